"""GraphSpec files as AITune writes them: read safely, checked against the schema and AITune's rules, as GraphSpecs.

The package's ``__init__`` imports nothing: importing one module never imports its siblings.
"""
