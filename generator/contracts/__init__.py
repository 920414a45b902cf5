"""What a built repository promises its clients, read back: contract diffs, reference data, request arrays.

The public client library (:mod:`generator.client`) stands on this package.

- :mod:`~generator.contracts.model_contract`, :mod:`~generator.contracts.tensor_contract`: a model's contract and
  the checks Triton applies to a request (published as :mod:`generator.client`);
- :mod:`~generator.contracts.served`: what Triton serves for a model of a repository (the one reader);
- :mod:`~generator.contracts.diff`: client-visible changes between two contracts, breaking or compatible;
- :mod:`~generator.contracts.reference_data`: ``reference.npz``/``reference.json`` written and read back, the
  requests an ``.npz`` holds;
- :mod:`~generator.contracts.array_files`: ``.npz``/``.safetensors`` arrays, every header checked first.

The package's ``__init__`` imports nothing: importing one module never imports its siblings.
"""
