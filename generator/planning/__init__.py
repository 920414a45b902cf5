"""From a manifest to a plan: per model its tensors, decisions and ModelConfig, and the files those render to.

Pure (no build machinery, no torch): ``plan``, ``config`` and ``validate`` run on it alone.

- :mod:`~generator.planning.targets`: ``plan_build`` (load and plan for this machine), target resolution, preflight;
- :mod:`~generator.planning.options`: ``BuildOptions``, what the user asks of plan and build;
- :mod:`~generator.planning.plan`, :mod:`~generator.planning.ensemble_plan`: ``RepositoryPlan``/``ModelPlan`` and
  the manifest's ensembles;
- :mod:`~generator.planning.tensors`: one graph's tensors as Triton serves them, the batching decision;
- :mod:`~generator.planning.config`, :mod:`~generator.planning.contract`, :mod:`~generator.planning.model_files`:
  the ModelConfig and its deterministic text, the contract, both files' text;
- :mod:`~generator.planning.values`, :mod:`~generator.planning.compare`: value domains and synthetic data; output
  tolerances and the element test (the build's check and smoke share them);
- :mod:`~generator.planning.validation`: ``gen-repo validate``'s work per file.

The package's ``__init__`` imports nothing: importing one module never imports its siblings.
"""
