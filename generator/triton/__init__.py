"""Triton's own definitions, below every stage: what any part of gen-repo reads of Triton itself.

The package's ``__init__`` imports nothing: importing one module never imports its siblings.
"""
