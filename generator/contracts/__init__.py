"""What a built repository promises its clients, read back: contract diffs, reference data, request arrays.

The public client library (:mod:`generator.client`) stands on this package. Its ``__init__`` imports nothing:
importing one module never imports its siblings.
"""
