"""What Triton serves for one model of a repository: its config, the version it serves, that version's contract.

The one reader for every command that needs a model. The version is the one Triton serves under the config's
``version_policy``; files come through a :class:`Reader` (a folder, or a bucket), bounded and confined.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from generator.bounded import read_bytes
from generator.confinement import confined_path
from generator.errors import GenRepoError, Problem
from generator.json_reader import parse_json
from generator.naming import version_folder
from generator.planning.compare import CompareSettings
from generator.planning.contract import contract_model_problem
from generator.triton.proto import model_config_pb2, parse_model_config
from generator.triton.version_policy import policy_name, served_version

__all__ = ["CONTRACT_PATH", "FolderReader", "Reader", "ServedModel", "read_served_model"]

CONTRACT_PATH = "gen_repo/contract.json"


class Reader(Protocol):
    """A repository's files by repository-relative path (``mlp/config.pbtxt``)."""

    def read(self, rel: str, limit_name: str) -> bytes | None:
        """The file's bytes (None when there is none); UnreadableFileError beyond the limit."""

    def where(self, rel: str) -> str:
        """How problems name the file."""

    def models(self) -> list[str]:
        """The repository's model folders, sorted."""

    def versions(self, model: str) -> set[int]:
        """The model's numeric version folders."""


@dataclass(frozen=True)
class FolderReader:
    """A repository folder on disk."""

    root: Path

    def read(self, rel: str, limit_name: str) -> bytes | None:
        """See :class:`Reader`; a path leading outside the folder (a symlink) is refused (ValueError)."""
        path = confined_path(self.root, *rel.split("/"))
        if not path.is_file():
            return None
        return read_bytes(path, limit_name)

    def where(self, rel: str) -> str:
        """The file's path."""
        return str(self.root.joinpath(*rel.split("/")))

    def models(self) -> list[str]:
        """Folders that hold a config.pbtxt or a numeric version folder (hidden folders are not models)."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")
                      and ((p / "config.pbtxt").is_file() or self.versions(p.name)))

    def versions(self, model: str) -> set[int]:
        """The model's version folders (:func:`generator.naming.version_folder`)."""
        folder = confined_path(self.root, model)
        found = (version_folder(p.name) for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else ()
        return {v for v in found if v is not None}


@dataclass(frozen=True)
class ServedModel:
    """One model as Triton serves it: its config, the version served and that version's gen-repo files."""

    name: str
    #: The model's config.pbtxt (None where it has none: Triton's auto-complete fills it in).
    config: model_config_pb2.ModelConfig | None
    config_where: str
    #: The version a request naming none reaches (None: no version folder).
    version: int | None
    #: Why that version: ``version_policy specific``, ``highest version folder``, ``asked for``...
    chosen_by: str
    #: ``<version>/gen_repo/contract.json`` (None: a repository gen-repo did not build).
    contract_doc: dict[str, Any] | None = None
    contract_where: str = ""
    #: ``reference.json``'s compare settings (None: no reference data, or not asked for).
    compare: CompareSettings | None = None
    #: The version's ``gen_repo`` folder, repository-relative ("" without a version).
    gen_repo: str = ""

    def describe(self) -> str:
        """One line: which version was read and why (``model mlp: version 2 (version_policy specific)``)."""
        if self.version is None:
            return f"model {self.name}: no version folder"
        return f"model {self.name}: version {self.version} ({self.chosen_by})"


def _json_object(data: bytes, where: str, what: str) -> dict[str, Any]:
    doc = parse_json(data, where)
    if not isinstance(doc, dict):
        raise GenRepoError([Problem(where, "", f"not a {what}: the document is not a JSON object")])
    return doc


def read_served_model(reader: Reader, model: str, version: int | None = None, *,
                      reference: bool = False) -> ServedModel:
    """``model`` as Triton serves it (``version``: that one instead); ``reference`` also reads reference.json.

    GenRepoError naming the file for a config or contract that does not parse, a contract naming another model, a
    path leading out of the repository, or a folder with neither a config nor a contract.
    """
    config_rel = f"{model}/config.pbtxt"
    try:
        config_bytes = reader.read(config_rel, "config_bytes")
        config = parse_model_config(config_bytes, reader.where(config_rel)) if config_bytes is not None else None
        if version is not None:
            chosen = "asked for"
        else:
            version = served_version(config, reader.versions(model))
            policy = policy_name(config)
            chosen = f"version_policy {policy}" if policy else "highest version folder"
        gen_repo = f"{model}/{version}/gen_repo" if version is not None else ""
        contract_rel = f"{model}/{version}/{CONTRACT_PATH}"
        data = reader.read(contract_rel, "document_bytes") if gen_repo else None
        index = reader.read(f"{gen_repo}/reference.json", "document_bytes") if reference and gen_repo else None
    except ValueError as error:  # a path leading out of the repository
        raise GenRepoError([Problem(reader.where(model), "", str(error))]) from error
    if data is None and config is None:
        raise GenRepoError([Problem(reader.where(model), "", f"neither {config_rel} nor "
                                                             f"{model}/<version>/{CONTRACT_PATH}: not a model")])
    served = ServedModel(model, config, reader.where(config_rel) if config is not None else "", version, chosen,
                         gen_repo=gen_repo)
    if data is not None:
        where = reader.where(contract_rel)
        doc = _json_object(data, where, "gen-repo contract")
        if (why := contract_model_problem(doc, model)) is not None:
            raise GenRepoError([Problem(where, "/model", why)])
        served = replace(served, contract_doc=doc, contract_where=where)
    if index is not None:
        where = reader.where(f"{gen_repo}/reference.json")
        entry = _json_object(index, where, "reference index").get("compare")
        try:
            served = replace(served, compare=CompareSettings.from_json(entry))
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise GenRepoError([Problem(where, "/compare", f"cannot read: {error}")]) from error
    return served

