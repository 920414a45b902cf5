"""Export stages: torch -> ONNX (:mod:`~generator.building.export.onnx`, checked by ``onnx_checks``) -> TensorRT.

:mod:`~generator.building.export.exchange` holds the tensor plans and results they exchange,
:mod:`~generator.building.export.flat_module` the wrapper the graph runs through, ``onnx_indices`` and
``onnx_masks`` what a graph tells about its index and mask inputs, :mod:`~generator.building.export.tensorrt` the
thin layer over the TensorRT builder API.
"""
