"""The build: from a plan to each model's files (ONNX, reference data, TensorRT plans), locally or on Ray.

- :mod:`~generator.building.pipeline`: ``build_repository``: plan, cache, stage, swap (``-j N`` processes, ``--ray``);
- :mod:`~generator.building.results`: the build's plain data (events, per-model results, the report);
- :mod:`~generator.building.artifacts`: one model's stages, the only place torch, onnxruntime or TensorRT run, with
  :mod:`~generator.building.factories` (user code, only with ``--allow-code``) and
  :mod:`~generator.building.engines` (TensorRT engines per compute capability);
- :mod:`~generator.building.reference`, :mod:`~generator.building.samples`: the reference cases; real samples;
- :mod:`~generator.building.ensembles`: an ensemble's contract and reference data;
- :mod:`~generator.building.distributed`: the same work as Ray tasks;
- :mod:`generator.building.export`: torch -> ONNX -> TensorRT.

The package's ``__init__`` imports nothing: importing one module never imports its siblings.
"""
