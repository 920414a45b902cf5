"""A running Triton: the local server, the smoke checks, and load against it.

- :mod:`~generator.serving.server`: a local ``tritonserver`` on loopback and free ports, always stopped;
- :mod:`~generator.serving.smoke`, :mod:`~generator.serving.smoke_session`: the smoke checks; one run with its
  repository (folder or bucket) and server (running or launched); their parts:
  :mod:`~generator.serving.smoke_results` (the results as data), :mod:`~generator.serving.config_drift` (the config
  check), :mod:`~generator.serving.requests` (one request and its answer), :mod:`~generator.serving.burst` (many at
  once);
- :mod:`~generator.serving.perf`: perf_analyzer / Model Analyzer configs bounded by the profiles, a load loop.

The package's ``__init__`` imports nothing: importing one module never imports its siblings.
"""
