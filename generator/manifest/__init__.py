"""The repository manifest (``gen-repo.yaml``): which GraphSpecs become which Triton models, with which options.

The package's ``__init__`` imports nothing: importing one module never imports its siblings.
"""
