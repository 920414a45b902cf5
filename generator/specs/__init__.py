"""GraphSpec files as AITune writes them: read safely, checked against the schema and AITune's rules, as GraphSpecs.

- :mod:`~generator.specs.documents`: JSON/YAML read within limits (``load_document``), nothing executed;
- :mod:`~generator.specs.json_schema`: the JSON Schemas in ``schemas/`` (reference and fast validators,
  ``schema_problems``), for specs, manifests and report inputs;
- :mod:`~generator.specs.paths`, :mod:`~generator.specs.tensor_spec`, :mod:`~generator.specs.sample_metadata`,
  :mod:`~generator.specs.graphspec`: the GraphSpec data model with AITune's semantics (no torch);
- :mod:`~generator.specs.schema`: documents to GraphSpecs (``load_graphspecs``, ``validate_document``), with
  :mod:`~generator.specs.semantics` (the rules a schema cannot express);
- :mod:`~generator.specs.shape_policy`: axes that must agree across inputs, and the range each group gets.

The package's ``__init__`` imports nothing: importing one module never imports its siblings.
"""
