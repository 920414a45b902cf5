"""Triton's own definitions that every stage reads: ModelConfig messages, ensemble rules, connections."""
