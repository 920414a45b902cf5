"""GraphSpec files: safe documents, JSON Schema, GraphSpecs with AITune's semantics, shape policy."""
