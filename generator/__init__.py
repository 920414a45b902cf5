"""gen-repo: GraphSpecs (as NVIDIA AITune records them) to ready-to-serve Triton model repositories."""

__version__ = "0.2.0"
