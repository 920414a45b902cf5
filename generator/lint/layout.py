"""Repository layout and the files a config names, as Triton's repository manager and model loading read them.

Model and version folders, ``config.pbtxt``, the files a config points at, and symlinks. Files gen-repo adds (the
lock at the root, ``gen_repo/`` in version folders) are not flagged: Triton ignores them.
"""

from __future__ import annotations

import os
import stat
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path as FsPath
from typing import Any

from generator.bounded import UnreadableFileError, read_bytes
from generator.confinement import config_path_escapes, relative_path_problem, walk_tree
from generator.dtypes import by_triton
from generator.errors import GenRepoError
from generator.json_reader import read_json
from generator.lint.backends import NO_AUTO_COMPLETE, resolve
from generator.lint.findings import ConfigFile, Finding, folder_finding
from generator.lint.folders import ModelFolder, Repository
from generator.lint.locator import PbtxtLocator
from generator.lint.rules import ERROR
from generator.naming import WARMUP_FOLDER, triton_version, version_folder_problem
from generator.triton.proto import ConfigTextError, parse_model_config
from generator.triton.proto import model_config_pb2 as mc
from generator.triton.version_policy import versions_to_load

__all__ = [
    "check_confinement",
    "check_files",
    "check_symlinks",
    "check_versions",
    "discover",
    "dims_element_count",
    "gen_repo_contract",
    "parse_config_text",
    "read_config",
    "scan_versions",
]

#: core constants.h kInitialStateFolder; kWarmupDataFolder is generator.naming's WARMUP_FOLDER.
INITIAL_STATE_FOLDER = "initial_state"
#: Folders Triton skips inside a model folder (model_lifecycle.cc VersionsToLoad).
SKIPPED_MODEL_SUBDIRS = frozenset({WARMUP_FOLDER, INITIAL_STATE_FOLDER, "configs"})
BATCH_STRATEGY_PATH = "TRITON_BATCH_STRATEGY_PATH"


# ---------------------------------------------------------------------------- repositories and model folders
def discover(paths: Sequence[str | FsPath]) -> tuple[list[ModelFolder], list[Finding]]:
    """Every model folder of every repository, as Triton's Poll finds them, with the layout findings."""
    findings: list[Finding] = []
    folders: list[ModelFolder] = []
    for path in paths:
        repo = Repository(FsPath(path), str(path) if len(paths) > 1 else "")
        if not repo.root.is_dir():
            findings.append(folder_finding("repository-missing", str(path), f"{path} is not a directory"))
            continue
        if (repo.root / "config.pbtxt").is_file():  # `gen-repo lint repo/mlp`: its version folders are no models
            findings.append(folder_finding(
                "repository-is-a-model", repo.show("config.pbtxt"),
                f"{path} is a model folder (it holds config.pbtxt); lint expects the repository folder that holds the "
                f"models: gen-repo lint {repo.root.resolve().parent}"))
            continue
        entries = sorted(p for p in repo.root.iterdir() if p.is_dir())
        for hidden in (p for p in entries if p.name.startswith(".")):
            findings.append(folder_finding(
                "model-folder-hidden", repo.show(hidden.name),
                f"'{hidden.name}' is a model folder to Triton: with model control 'none' or 'poll' it tries to load "
                "it and fails (lint skips it)"))
        models = [p for p in entries if not p.name.startswith(".")]
        if not models:
            findings.append(folder_finding("repository-empty", repo.label or ".", "no model folders in the repository"))
        folders += [ModelFolder(p.name, p, repo) for p in models]
    by_name: dict[str, list[ModelFolder]] = defaultdict(list)
    for folder in folders:
        by_name[folder.name].append(folder)
    for name, group in by_name.items():
        for folder in group if len(group) > 1 else ():
            others = ", ".join(str(f.repository.root) for f in group if f is not folder)
            findings.append(folder_finding(
                "model-duplicate", folder.show(),
                f"model '{name}' is also in {others}; Triton refuses a model that is not unique across all model "
                "repositories"))
    return folders, findings


def parse_config_text(text: str, rel: str) -> tuple[mc.ModelConfig | None, list[Finding]]:
    """Parse pbtxt as ModelConfig; a syntax error becomes a ``config-parse`` finding with line and column."""
    try:
        return parse_model_config(text, rel), []
    except ConfigTextError as error:
        finding = Finding(ERROR, rel, error.line, error.column, "config-parse",
                          f"not a valid ModelConfig: {error.reason}")
        return None, [finding]


def read_config(folder: ModelFolder, rel: str = "config.pbtxt") -> tuple[ConfigFile | None, str, list[Finding]]:
    """Read and parse one config file of ``folder``: the located config (None when unparsable), its text, findings.

    The read is bounded (generator.bounded: a regular file within the config_bytes limit); undecodable bytes are
    replaced, so protobuf's parser reports them where they stand.
    """
    try:
        text = read_bytes(folder.path / rel, "config_bytes").decode("utf-8", errors="replace")
    except OSError as error:  # generator.bounded.UnreadableFileError, or an I/O error
        message = error.problems[0].message if isinstance(error, UnreadableFileError) else str(error)
        return None, "", [folder_finding("config-unreadable", folder.show(rel), message)]
    config, findings = parse_config_text(text, folder.show(rel))
    if config is None:
        return None, text, findings
    cf = ConfigFile(folder.show(rel), config, PbtxtLocator(text))
    if config.name and config.name != folder.name:
        cf.add("config-name-mismatch", f"config name '{config.name}' differs from the model folder '{folder.name}'; "
               "Triton requires them to match", ("name",))
    return cf, text, findings


def load_config(folder: ModelFolder, *, auto_complete: bool = True) -> list[Finding]:
    """Set ``folder.cf`` from its config.pbtxt; findings for a missing or unparsable one.

    Without config.pbtxt, Triton reads the file anyway when auto-complete is off (``--disable-auto-complete-config``),
    and otherwise infers the backend from the model files and lets it fill a config in: refused where it infers none
    or the backend fills in nothing (:data:`~generator.lint.backends.NO_AUTO_COMPLETE`).
    """
    path = folder.path / "config.pbtxt"
    if path.exists() or path.is_symlink():  # a FIFO or a device there is config-unreadable
        folder.cf, folder.text, findings = read_config(folder)
        return findings
    what = f"model '{folder.name}' has no config.pbtxt"
    if not auto_complete:
        return [folder_finding("config-required", folder.show(), f"{what} and auto-complete is off "
                               "(--disable-auto-complete-config): Triton fails to open config.pbtxt and refuses it")]
    resolved = resolve(mc.ModelConfig(), folder.path, folder.name)
    if resolved.failure:
        return [folder_finding("platform-missing", folder.show(), f"{what}, so Triton infers its backend from the "
                               f"files: {resolved.failure}")]
    why = NO_AUTO_COMPLETE.get(resolved.backend) or NO_AUTO_COMPLETE.get(resolved.platform)
    if why is not None:
        return [folder_finding("config-required", folder.show(), f"{what} ({resolved.how}); {why}")]
    return [folder_finding("config-missing", folder.show(), f"{what}; Triton loads it only with auto-complete on (its "
                           f"default), from what the {resolved.backend} backend fills in ({resolved.how})")]


def alternative_configs(folder: ModelFolder) -> list[str]:
    """``configs/*.pbtxt`` (Triton's --model-config-name alternatives), relative to the model folder."""
    configs = folder.path / "configs"
    return [f"configs/{p.name}" for p in sorted(configs.glob("*.pbtxt"))] if configs.is_dir() else []


def check_symlinks(folder: ModelFolder) -> list[Finding]:
    """``symlink``: the model folder itself, and every folder and file at any depth in it, that is a symlink.

    Triton follows links and serves paths in place, so a linked version folder, ``warmup/``, ``gen_repo/`` or
    ``model.py`` is read wherever it leads on the server. The walk is :func:`generator.confinement.walk_tree`: it never
    descends through a link.
    """
    if folder.path.is_symlink():
        return [_symlink_finding(folder, "")]  # not entered: what it leads to is not the repository's
    return [_symlink_finding(folder, rel) for rel, st in walk_tree(folder.path) if stat.S_ISLNK(st.st_mode)]


def _symlink_finding(folder: ModelFolder, rel: str) -> Finding:
    path = folder.path / rel if rel else folder.path
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    kind = "folder" if path.is_dir() else "file" if path.exists() else "path that does not exist"
    what = f"model folder '{folder.name}'" if not rel else f"'{rel}' in model '{folder.name}'"
    shown = repr(target if len(target) <= 120 else target[:120] + "...")
    return folder_finding("symlink", folder.show(rel), f"{what} is a symlink (to the {kind} {shown}); Triton "
                          "follows it wherever it leads on the server, outside the repository included: keep "
                          "regular files and folders in a model folder")


# ---------------------------------------------------------------------------- versions
def scan_versions(folder: ModelFolder) -> list[Finding]:
    """``folder.versions`` as VersionsToLoad finds them, with findings for the folders Triton ignores.

    A name Triton reads as a version without being exactly its name (``+1``, ``1abc``) is checked in
    :func:`check_versions`, once the versions loaded are known.
    """
    findings: list[Finding] = []
    for sub in sorted(p for p in folder.path.iterdir() if p.is_dir()):
        if sub.name in SKIPPED_MODEL_SUBDIRS:
            continue
        where = folder.show(sub.name)
        version = triton_version(sub.name)
        if version is not None:
            folder.versions.setdefault(version, []).append(sub.name)
        elif len(sub.name) > 1 and sub.name.startswith("0"):
            findings.append(folder_finding(
                "version-leading-zero", where, f"folder {sub.name!a} starts with 0; Triton ignores it, tools reading "
                "it as a number do not (gen-repo's verify and publish refuse it)"
                + (f" (name it '{int(sub.name)}')" if sub.name.isascii() and sub.name.isdigit() else "")))
        elif (why := version_folder_problem(sub.name)) is not None:
            findings.append(folder_finding("version-folder-name", where, why))
        else:
            findings.append(folder_finding(
                "version-non-numeric", where, f"folder {sub.name!a} in model '{folder.name}' is not a numeric "
                "version; Triton ignores it"))
    return findings


def check_versions(folder: ModelFolder) -> list[Finding]:
    """Version folders against the version policy; sets ``folder.loaded``."""
    findings: list[Finding] = []
    if not folder.versions:
        return [folder_finding("version-missing", folder.show(),
                               f"model '{folder.name}' has no numeric version folder (e.g. '1'), so Triton has nothing "
                               "to serve")]
    config, cf = folder.config, folder.cf
    folder.loaded = versions_to_load(config, folder.versions)
    if cf is not None and config is not None and not folder.loaded:
        present = ", ".join(str(v) for v in sorted(folder.versions))
        cf.add("version-policy", f"version_policy selects none of the versions present ({present}); Triton refuses "
               "the model: at least one version must be available under its version policy", ("version_policy",))
    elif cf is not None and config is not None and config.version_policy.HasField("specific"):
        for k, version in enumerate(config.version_policy.specific.versions):
            if version not in folder.versions:
                cf.add("version-policy-missing", f"version_policy lists version {version}, but folder "
                       f"'{folder.name}/{version}' does not exist (Triton logs it and loads the others)",
                       ("version_policy", 0, "specific", 0, "versions", "#", k))
    for version, names in sorted(folder.versions.items()):
        missing = version in folder.loaded and str(version) not in names
        for name in names:
            if missing:
                findings.append(folder_finding(
                    "version-folder-prefix", folder.show(name),
                    f"Triton reads folder {name!a} as version {version} (std::stoll takes its leading digits) and "
                    f"loads that version from '{folder.name}/{version}', which does not exist"))
            elif (why := version_folder_problem(name)) is not None:
                findings.append(folder_finding("version-folder-name", folder.show(name), why))
    return findings


# ---------------------------------------------------------------------------- files a config names
def gen_repo_contract(folder: ModelFolder, version: int) -> dict[str, Any] | None:
    """The gen-repo contract of a version (``<version>/gen_repo/contract.json``), read within the document limit.

    None where there is none or it is no JSON object (a repository gen-repo did not build, or a broken file): the
    rules that use it then say nothing.
    """
    try:
        contract = read_json(folder.path / str(version) / "gen_repo" / "contract.json")
    except (OSError, GenRepoError):  # UnreadableFileError is an OSError; GenRepoError: not JSON, deep, a key twice
        return None
    return contract if isinstance(contract, dict) else None


def triton_join(base: FsPath, *segments: str) -> FsPath:
    """Triton's JoinPath: an absolute segment is appended, not substituted (``/x`` under ``base`` is ``base/x``)."""
    path = base
    for segment in segments:
        path = path / segment.lstrip("/")
    return path


def dims_element_count(shape: Iterable[int]) -> int:
    """Element count, or -1 when a dim is -1 (Triton's WILDCARD_SIZE)."""
    count = 1
    for dim in shape:
        if dim == -1:
            return -1
        count *= dim
    return count


def _data_bytes(data_type: int, dims: Iterable[int]) -> int | None:
    """Bytes a tensor of ``dims`` needs; None for strings (any size) or unknown dims."""
    dtype = by_triton(mc.DataType.Name(data_type))
    count = dims_element_count(dims)
    if dtype is None or dtype.byte_size is None or count < 0:
        return None
    return count * dtype.byte_size


def check_confinement(cf: ConfigFile) -> None:
    """path-escape: every config value naming a file, folder or library that leaves the model's folder.

    Also a value that cannot be shown to stay in it (:func:`generator.confinement.config_path_escapes`); the file
    rules here leave such values to this one.
    """
    for escape in config_path_escapes(cf.config):
        cf.add("path-escape", escape.message, escape.locate(cf.locator.map_entry))


def check_files(folder: ModelFolder) -> None:
    """The files ``folder``'s config names: warmup data, initial state, labels, the batch strategy parameter."""
    cf = folder.cf
    if cf is None:
        return
    _check_warmup_files(cf, folder.path)
    _check_initial_state_files(cf, folder.path)
    _check_label_files(cf, folder.path)
    _check_batch_strategy(cf)


def _check_warmup_files(cf: ConfigFile, model_dir: FsPath) -> None:
    """Warmup ``input_data_file``s as Triton reads them: ``<model>/warmup/<file>``, at least ``dims`` bytes' worth.

    Triton refuses to load a model whose file is missing or short ("warmup setting expects N bytes") and reads
    only the first N bytes of a longer one.
    """
    for index, warmup in enumerate(cf.config.model_warmup):
        if warmup.batch_size == 0:
            continue  # Triton skips the sample, its files unread
        label = f"model_warmup #{index}" + (f" '{warmup.name}'" if warmup.name else "")
        for name in sorted(warmup.inputs):
            sample = warmup.inputs[name]
            if not sample.input_data_file:
                continue
            where = cf.entry(("model_warmup", index, "inputs"), name, "value", 0, "input_data_file")
            if relative_path_problem(sample.input_data_file):
                continue  # path-escape's finding (check_confinement)
            path = model_dir / WARMUP_FOLDER / sample.input_data_file
            if not path.is_file():
                cf.add("warmup-data-file", f"{label} input '{name}': input_data_file "
                       f"'{WARMUP_FOLDER}/{sample.input_data_file}' is missing; Triton fails to open it", where)
                continue
            need, have = _data_bytes(sample.data_type, sample.dims), path.stat().st_size
            if need is not None and have != need:
                cf.add("warmup-data-file" if have < need else "warmup-data-file-long",
                       f"{label} input '{name}': '{WARMUP_FOLDER}/{sample.input_data_file}' holds {have} bytes; dims "
                       f"{list(sample.dims)} of {mc.DataType.Name(sample.data_type)} need {need}", where)


def _check_initial_state_files(cf: ConfigFile, model_dir: FsPath) -> None:
    """Initial sequence state ``data_file``s: ``<model>/initial_state/<file>``, at least the state's bytes."""
    for s, state in enumerate(cf.config.sequence_batching.state):
        for k, initial in enumerate(state.initial_state):
            if initial.WhichOneof("state_data") != "data_file":
                continue
            where = ("sequence_batching", 0, "state", s, "initial_state", k, "data_file")
            label = f"sequence_batching state '{state.input_name}' initial_state"
            path = triton_join(model_dir, INITIAL_STATE_FOLDER, initial.data_file)
            if relative_path_problem(initial.data_file):
                continue  # path-escape's finding
            if not path.is_file():
                cf.add("initial-state-file", f"{label} data_file '{INITIAL_STATE_FOLDER}/{initial.data_file}' is "
                       "missing from the model folder; Triton fails to open it", where)
                continue
            need, have = _data_bytes(initial.data_type, initial.dims), path.stat().st_size
            if need is not None and have < need:
                cf.add("initial-state-file", f"{label} data_file '{INITIAL_STATE_FOLDER}/{initial.data_file}' holds "
                       f"{have} bytes; dims {list(initial.dims)} of {mc.DataType.Name(initial.data_type)} need "
                       f"{need}", where)


def _check_label_files(cf: ConfigFile, model_dir: FsPath) -> None:
    """Output ``label_filename``s: read by Triton from the model folder at load."""
    for index, output in enumerate(cf.config.output):
        if output.label_filename and not relative_path_problem(output.label_filename) \
                and not triton_join(model_dir, output.label_filename).is_file():
            cf.add("label-file-missing", f"output '{output.name}' label_filename '{output.label_filename}' is not a "
                   "file in the model folder; Triton fails to read it at load", ("output", index, "label_filename"))


def _check_batch_strategy(cf: ConfigFile) -> None:
    """``TRITON_BATCH_STRATEGY_PATH`` with sequence batching: Triton refuses the pair whatever the path.

    The path itself is path-escape's (:func:`check_confinement`): Triton opens it as given, relative to the server's
    working folder or absolute, so no value can be shown to stay in the model's folder.
    """
    config = cf.config
    if BATCH_STRATEGY_PATH in config.parameters and config.HasField("sequence_batching"):
        cf.add("batch-strategy-path", f"{BATCH_STRATEGY_PATH} cannot be set on a model with sequence_batching; "
               "Triton refuses it", cf.entry(("parameters",), BATCH_STRATEGY_PATH, "value"))
