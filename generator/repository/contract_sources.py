"""The contracts of a repository, as ``gen-repo diff`` and ``gen-repo publish`` compare them.

A folder, a bucket or one version folder; per model the contract of the version Triton serves, read by
:func:`generator.contracts.served.read_served_model`, bounded and confined.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from generator.client import ModelContract
from generator.confinement import refuse_symlinks
from generator.contracts.diff import ContractDiff, ServedSettings, diff_repositories
from generator.contracts.served import CONTRACT_PATH, FolderReader, Reader, read_served_model
from generator.errors import GenRepoError, Problem
from generator.naming import version_folder
from generator.repository.bucket_reads import list_objects, read_object, repository_objects
from generator.repository.storage_errors import storage_errors
from generator.repository.storage_urls import StorageURL, is_storage_url, local_location, open_filesystem, parse_url
from generator.triton.proto import model_config_pb2
from generator.triton.version_policy import served_version

__all__ = [
    "BucketReader",
    "FolderReader",
    "Location",
    "Reader",
    "diff_locations",
    "load_location",
    "load_model_contract",
    "served_settings",
    "served_version",
]


@dataclass
class BucketReader:
    """A repository in an object store: listed once, then only the objects asked for are fetched."""

    fs: Any
    target: StorageURL
    objects: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def open(cls, target: StorageURL, filesystem: Any = None) -> BucketReader:
        """List the repository at ``target`` (inside :func:`~generator.repository.storage_errors.storage_errors`)."""
        fs = filesystem if filesystem is not None else open_filesystem(target)
        return cls(fs, target, repository_objects(list_objects(fs, target)))

    def read(self, rel: str, limit_name: str) -> bytes | None:
        """See :class:`Reader`: as :func:`~generator.repository.bucket_reads.read_object` reads (listed size first)."""
        if rel not in self.objects:
            return None
        try:
            return read_object(self.fs, self.target, rel, self.objects[rel], limit_name)
        except FileNotFoundError:
            return None

    def where(self, rel: str) -> str:
        """The object's URL."""
        return self.target.object_url(rel)

    def models(self) -> list[str]:
        """Top-level names with a config.pbtxt or a version folder."""
        names = {key.split("/")[0] for key in self.objects if "/" in key}
        return sorted(n for n in names if not n.startswith(".")
                      and (f"{n}/config.pbtxt" in self.objects or self.versions(n)))

    def versions(self, model: str) -> set[int]:
        """Version folders directly under the model (:func:`generator.naming.version_folder`)."""
        found = (version_folder(parts[1]) for key in self.objects
                 if len(parts := key.split("/")) > 2 and parts[0] == model)
        return {v for v in found if v is not None}


def load_model_contract(reader: Reader, model: str, version: int | None = None) -> ModelContract:
    """The contract of ``model`` at ``version`` (default: the one Triton serves); GenRepoError naming the file."""
    return ModelContract.from_served(read_served_model(reader, model, version))


def served_settings(config: model_config_pb2.ModelConfig) -> ServedSettings:
    """What ``config`` serves with that no client sees (instance groups, queue delay, preferred batch sizes)."""
    kinds = model_config_pb2.ModelInstanceGroup.Kind
    groups = tuple(f"{kinds.Name(g.kind)} x{g.count}" for g in config.instance_group)
    if not config.HasField("dynamic_batching"):
        return ServedSettings(groups, None, None)
    dynamic = config.dynamic_batching
    return ServedSettings(groups, dynamic.max_queue_delay_microseconds, tuple(dynamic.preferred_batch_size))


@dataclass(frozen=True)
class Location:
    """What one side of a diff holds: model name -> contract, and whether it was one model's version folder."""

    label: str
    contracts: dict[str, ModelContract]
    version_folder: bool
    #: Each model's served settings (from its config; none for a model without one).
    served: dict[str, ServedSettings] = field(default_factory=dict)
    #: Which version of each model was read, and why (:meth:`~generator.contracts.served.ServedModel.describe`).
    read: dict[str, str] = field(default_factory=dict)


def _load_all(reader: Reader, label: str, models: list[str], version: int | None, version_folder: bool) -> Location:
    problems: list[Problem] = []
    contracts, served, read = {}, {}, {}
    for model in models:
        try:
            model_served = read_served_model(reader, model, version)
            contracts[model] = ModelContract.from_served(model_served)
        except GenRepoError as error:
            problems += error.problems
            continue
        read[model] = model_served.describe()
        if model_served.config is not None:
            served[model] = served_settings(model_served.config)
    if problems:
        raise GenRepoError(problems, summary=f"cannot read the contracts of {label}")
    return Location(label, contracts, version_folder, served, read)


def _split_version(path: str) -> tuple[str, str, int] | None:
    """``root/model/3`` -> (root, model, 3) when the last part is a version number."""
    parts = path.rstrip("/").split("/")
    version = version_folder(parts[-1]) if len(parts) >= 3 else None
    return ("/".join(parts[:-2]), parts[-2], version) if version is not None else None


def _load_bucket(location: str, filesystem: Any) -> Location:
    target = parse_url(location)
    split = _split_version(target.path)
    version_target = None
    if split is not None and split[0]:
        root_url = location.rstrip("/").rsplit("/", 2)[0]
        version_target = (parse_url(root_url), split[1], split[2])
    with storage_errors(target, "reading the repository's contracts"):
        if version_target is not None:
            root, model, version = version_target
            reader = BucketReader.open(root, filesystem)
            if any(key.startswith(f"{model}/{version}/") for key in reader.objects):
                return _load_all(reader, location, [model], version, True)
        reader = BucketReader.open(target, filesystem)
        models = reader.models()
        if not models:
            raise GenRepoError([Problem(location, "", "not a model repository: no <model>/config.pbtxt nor version "
                                                      "folders under this URL")])
        return _load_all(reader, location, models, None, False)


def _load_folder(location: str) -> Location:
    path = Path(location)
    if not path.is_dir():
        raise GenRepoError([Problem(location, "", "not a folder, an s3:// or a gs:// repository")])
    version = version_folder(path.name)
    if version is not None and path.parent.name and ((path.parent / "config.pbtxt").is_file()
                                                     or (path / CONTRACT_PATH).is_file()):
        refuse_symlinks(path.parent)  # the model's folder: the version folder given, and every file read in it
        reader = FolderReader(path.parent.parent)
        return _load_all(reader, location, [path.parent.name], version, True)
    refuse_symlinks(path)  # nothing read through a link (generator.confinement.walk_tree)
    reader = FolderReader(path)
    models = reader.models()
    if not models:
        raise GenRepoError([Problem(location, "", "not a model repository: no model folder (with a config.pbtxt "
                                                  "or a version folder)")])
    return _load_all(reader, location, models, None, False)


def load_location(location: str, filesystem: Any = None) -> Location:
    """The contracts at ``location`` (a folder, a bucket URL or a model's version folder); see the module docstring."""
    if is_storage_url(location):
        return _load_bucket(location, filesystem)
    return _load_folder(local_location(location))  # file:///path: the folder it names


def _both(old: str, new: str) -> Iterator[Location]:
    problems: list[Problem] = []
    loaded: list[Location] = []
    for location in (old, new):
        try:
            loaded.append(load_location(location))
        except GenRepoError as error:
            if error.exit_code != GenRepoError.exit_code:
                raise  # unreachable storage (exit 3) wins over bad input
            problems += error.problems
    if problems:
        raise GenRepoError(problems, summary="nothing was compared")
    yield from loaded


def diff_locations(old: str, new: str, say: Callable[[str], None] | None = None) -> ContractDiff:
    """Compare the contracts at ``old`` and ``new`` (both repositories, or both one model's version folders).

    Two version folders compare one model whatever their folder names say (a model renamed between them included).
    ``say`` hears which version of each model each side was read at (``old: model mlp: version 2 (...)``).
    """
    before, after = _both(old, new)
    if say is not None:
        for side, location in (("old", before), ("new", after)):
            for line in location.read.values():
                say(f"{side}: {line}")
    if before.version_folder != after.version_folder:
        kinds = {True: "one model's version folder", False: "a repository"}
        raise GenRepoError([Problem(old, "", f"is {kinds[before.version_folder]}, but {new} is "
                                             f"{kinds[after.version_folder]}: compare two repositories or two version "
                                             "folders")])
    old_contracts, new_contracts = before.contracts, after.contracts
    old_served, new_served = before.served, after.served
    if before.version_folder:
        (old_name, old_contract), = old_contracts.items()
        (new_name, new_contract), = new_contracts.items()
        new_contracts = {old_name: replace(new_contract, name=old_name)}
        old_contracts = {old_name: old_contract}
        new_served = {old_name: new_served[new_name]} if new_name in new_served else {}
    return diff_repositories(old_contracts, new_contracts, old_label=old, new_label=new, old_served=old_served,
                             new_served=new_served)
