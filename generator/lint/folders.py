"""Plain data every area of lint reads: the repositories, each model folder as Triton sees it, its resolved backend."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import TYPE_CHECKING

from generator.lint.findings import ConfigFile

if TYPE_CHECKING:
    from generator.triton.proto import model_config_pb2 as mc

__all__ = ["ModelFolder", "Repository", "Resolved"]


@dataclass(frozen=True, slots=True)
class Repository:
    """One ``--model-repository``: its folder and the prefix its findings' file names carry ("" when alone)."""

    root: FsPath
    label: str = ""

    def show(self, rel: str) -> str:
        """The file name a finding shows for ``rel`` (relative to this repository)."""
        return f"{self.label}/{rel}" if self.label else rel


@dataclass(frozen=True, slots=True)
class Resolved:
    """Platform, backend and model file name after Triton core's inference (AutoCompleteBackendFields).

    ``how`` says where an inferred value came from ("" when the config names everything); ``failure`` is Triton's
    refusal when nothing can be inferred.
    """

    platform: str
    backend: str
    default_model_filename: str
    how: str = ""
    failure: str = ""


@dataclass
class ModelFolder:
    """One model folder: its config (parsed, located), its versions as Triton parses them, and what they resolve to.

    ``versions`` maps each version Triton finds (``std::stoll`` of a folder name) to the folder names that gave it;
    Triton loads version ``v`` from the folder named ``str(v)``. ``loaded`` are the versions the version policy
    loads (core's VersionsToLoad).
    """

    name: str
    path: FsPath
    repository: Repository
    cf: ConfigFile | None = None
    text: str = ""
    versions: dict[int, list[str]] = field(default_factory=dict)
    loaded: list[int] = field(default_factory=list)
    resolved: Resolved | None = None
    #: what the backend's auto-complete fills into the config (:func:`generator.lint.backends.auto_complete_fills`)
    fills: frozenset[str] = frozenset()

    @property
    def config(self) -> mc.ModelConfig | None:
        """The parsed config.pbtxt (None when missing or unparsable)."""
        return self.cf.config if self.cf is not None else None

    def show(self, rel: str = "") -> str:
        """The file name a finding shows for ``rel`` inside this model folder (the folder itself for "")."""
        return self.repository.show(f"{self.name}/{rel}" if rel else self.name)
