"""The build's plain data: progress events, per-model results and the report (its options are the plan's).

Imports no stage, so the local build, the per-model work and the Ray workers share it without importing each other.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from generator import __version__
from generator.errors import GenRepoError, Problem

__all__ = [
    "FINAL_STAGES",
    "STAGES",
    "BuildEvent",
    "BuildFailed",
    "BuildReport",
    "ModelArtifacts",
    "ModelResult",
    "OK_STATUSES",
    "Progress",
    "tool_versions",
]

#: The stages of one model, in order (progress bars count them). ``tensorrt`` only runs for the tensorrt target.
STAGES = ("source", "export", "reference", "check", "tensorrt")
#: Final states of a model in events and results. ``reconfigured``: the model files came from the build cache and
#: its config.pbtxt differs from the previous repository's (a ``tuned:`` block, say).
FINAL_STAGES = ("built", "cached", "reconfigured", "failed")
#: The states of a model that is in the repository as this build made it.
OK_STATUSES = ("built", "cached", "reconfigured")


@dataclass(frozen=True, slots=True)
class BuildEvent:
    """One progress event: the model, its stage and a sentence.

    ``model`` is "*" for the whole build; ``stage`` is one of :data:`STAGES` or :data:`FINAL_STAGES`, or
    ``note``/``queued``.
    """

    model: str
    stage: str
    message: str = ""

    def __str__(self) -> str:
        return f"{self.model}: {self.stage}" + (f": {self.message}" if self.message else "")


#: Progress callback; called in the parent process only (from a helper thread when ``jobs > 1``).
Progress = Callable[[BuildEvent], None]


@dataclass(frozen=True, slots=True)
class ModelArtifacts:
    """One model's built files (relative to its version folder) in a folder, and what the build noticed."""

    folder: Path
    files: tuple[str, ...]
    notes: tuple[str, ...] = ()
    #: Input value domains found in the graph (written to the contract; a Ray node's rewrite needs them too).
    values: Mapping[str, Any] = field(default_factory=dict)
    #: Output shape ranges over the whole input range (``generator.planning.plan.OutputRange`` by output name), as
    #: written to the contract.
    output_ranges: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ModelResult:
    """Outcome of one model: ``built``, ``cached``, ``reconfigured``, ``failed``, ``kept-previous`` (``--keep-going``).

    ``stage`` names where a failed model stopped: ``plan`` (refused before any work) or one of :data:`STAGES`.
    """

    name: str
    target: str
    status: str
    seconds: float
    cache_key: str = ""
    notes: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
    stage: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON form for ``--json``."""
        return {
            "name": self.name,
            "target": self.target,
            "status": self.status,
            "seconds": round(self.seconds, 3),
            "cache_key": self.cache_key,
            "notes": list(self.notes),
            "problems": [p.to_dict() for p in self.problems],
            "stage": self.stage,
        }


@dataclass(frozen=True, slots=True)
class BuildReport:
    """What a build did: per-model results, build-wide notes and whether the repository was swapped in."""

    output_dir: Path
    models: tuple[ModelResult, ...]
    committed: bool
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when every model built (from scratch or from the cache)."""
        return all(m.status in OK_STATUSES for m in self.models)

    def to_dict(self) -> dict[str, Any]:
        """JSON form for ``--json``."""
        return {
            "output_dir": str(self.output_dir),
            "committed": self.committed,
            "ok": self.ok,
            "notes": list(self.notes),
            "models": [m.to_dict() for m in self.models],
        }


class BuildFailed(GenRepoError):  # noqa: N818 (the CLI and tests know it by this name)
    """At least one model failed and ``--keep-going`` was not given: nothing was written."""

    exit_code = 1

    def __init__(self, report: BuildReport) -> None:
        self.report = report
        super().__init__([p for m in report.models for p in m.problems])


def tool_versions() -> dict[str, str]:
    """Versions that change artifacts (part of the cache key and the lock file)."""
    from importlib import metadata

    versions = {"gen-repo": __version__, "python": "{}.{}".format(*sys.version_info[:2])}
    # Distribution metadata, not imports: a warm (fully cached) build must not pay for importing torch.
    for distribution in ("torch", "onnx", "onnxruntime", "onnxscript", "numpy"):
        try:
            versions[distribution] = metadata.version(distribution)
        except metadata.PackageNotFoundError:
            versions[distribution] = "absent"
    return versions
