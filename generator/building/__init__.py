"""The build: from a plan to each model's files (ONNX, reference data, TensorRT plans), locally or on Ray.

The package's ``__init__`` imports nothing: importing one module never imports its siblings.
"""
