"""From a manifest to a plan: tensors, ModelConfig, contract, targets; no I/O beyond reading inputs."""
