"""From a manifest to a plan: per model its tensors, decisions and ModelConfig, and the files those render to.

Pure (no build machinery, no torch): ``plan``, ``config`` and ``validate`` run on it alone. The package's
``__init__`` imports nothing: importing one module never imports its siblings.
"""
