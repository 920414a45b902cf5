"""What the user asks of ``plan``, ``config`` and ``build``: the options planning reads and the build carries on.

Planning reads the target override, ``allow_outside``, ``keep_going`` and the TensorRT choices (target resolution
and preflight); the build reads the rest. Plain data below both, so neither imports the other for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["TARGETS", "BuildOptions"]

#: Concrete targets (``auto`` resolves to one of them).
TARGETS = ("tensorrt", "onnx", "python")


@dataclass(frozen=True, slots=True)
class BuildOptions:
    """How to build; everything that changes artifacts is part of the cache key.

    ``code_path`` lists folders searched before ``sys.path`` for ``module:callable`` factories; the build puts the
    working folder, the manifest's folder and the manifest's ``code_path:`` entries first
    (:func:`generator.building.pipeline.factory_search_path`), as uvicorn and celery resolve an app.
    """

    allow_code: bool = False
    keep_going: bool = False
    jobs: int = 1
    cache_dir: Path | None = None
    use_cache: bool = True
    target: str | None = None
    allow_outside: bool = False
    #: "tensorrt" (Triton plans) or "tensorrt_rtx" (TensorRT-RTX engines: exercises the build path on a CPU; the
    #: engines are not Triton plans).
    tensorrt_module: str = "tensorrt"
    tensorrt: Mapping[str, Any] = field(default_factory=dict)
    code_path: tuple[str, ...] = ()
    #: Build on a Ray cluster (``auto`` or an address) instead of local processes; see generator.building.distributed.
    ray_address: str | None = None
