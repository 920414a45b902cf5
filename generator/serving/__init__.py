"""A running Triton: the local server, smoke checks, perf."""
