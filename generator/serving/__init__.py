"""A running Triton: the local server, the smoke checks, and load against it.

- :mod:`~generator.serving.server`: a local ``tritonserver`` on loopback and free ports, always stopped;
- :mod:`~generator.serving.smoke`, :mod:`~generator.serving.smoke_session`: the smoke checks as data; one run with
  its repository (folder or bucket) and server (running or launched);
- :mod:`~generator.serving.perf`: perf_analyzer / Model Analyzer configs bounded by the profiles, a load loop.

The package's ``__init__`` imports nothing: importing one module never imports its siblings.
"""
