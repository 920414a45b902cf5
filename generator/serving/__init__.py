"""A running Triton: the local server, the smoke checks, and load against it.

The package's ``__init__`` imports nothing: importing one module never imports its siblings.
"""
