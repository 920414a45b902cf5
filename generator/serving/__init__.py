"""A running Triton: the local server, the smoke checks, and load against it.

- :mod:`~generator.serving.server`: a local ``tritonserver`` on loopback and free ports, always stopped;
- :mod:`~generator.serving.smoke`, :mod:`~generator.serving.smoke_session`: the smoke checks; one run with its
  repository (folder or bucket) and server (running or launched); their parts:
  :mod:`~generator.serving.smoke_results` (the results as data), :mod:`~generator.serving.config_drift` (the config
  check), :mod:`~generator.serving.requests` (one request and its answer), :mod:`~generator.serving.burst` (many at
  once);
- :mod:`~generator.serving.perf`: ``gen-repo perf``, with :mod:`~generator.serving.perf_models` (each model's
  profile and the search space inside it), :mod:`~generator.serving.perf_config` (``gen-repo perf-config``'s
  perf_analyzer and Model Analyzer files), :mod:`~generator.serving.perf_analyzer` (a real binary found and run)
  and :mod:`~generator.serving.loadgen` (the one load generator: ``perf``, ``tune`` and ``smoke --perf``).

The package's ``__init__`` imports nothing: importing one module never imports its siblings.
"""
