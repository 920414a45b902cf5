"""The repository manifest (``gen-repo.yaml``): which GraphSpecs become which Triton models, with which options.

- :mod:`~generator.manifest.loading`: ``read_manifest`` / ``load_manifest``, every problem located;
- :mod:`~generator.manifest.entries`: what loading returns (``Manifest``, ``ManifestModel``, sources, ensembles);
- :mod:`~generator.manifest.options`: option conflicts and model names;
- :mod:`~generator.manifest.overrides`: the manifest's ``dynamic_shapes`` and batch multipliers applied to a graph;
- :mod:`~generator.manifest.proto_ranges`: its numbers against the ModelConfig field types;
- :mod:`~generator.manifest.starter`: ``gen-repo init``'s starter manifest.

The package's ``__init__`` imports nothing: importing one module never imports its siblings.
"""
