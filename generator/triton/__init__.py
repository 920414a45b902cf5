"""Triton's own definitions, below every stage: what any part of gen-repo reads of Triton itself.

- :mod:`~generator.triton.proto`: the ``model_config.proto`` messages (without tritonclient's gRPC client imports);
- :mod:`~generator.triton.ensemble`: the ensemble wiring rules Triton applies at load, on plain data (the manifest's
  ensembles, their plan and lint share them);
- :mod:`~generator.triton.config_rules`: Triton's refusals of dynamic batching and instance group settings, on plain
  data (the manifest, the planned config and lint share them);
- :mod:`~generator.triton.connection`: tritonclient connections, every call with a deadline
  (``ServerUnreachableError``).

The package's ``__init__`` imports nothing: importing one module never imports its siblings.
"""
