"""Confinement: every path a Triton config, a manifest's output or a request names stays inside its folder.

:data:`CONFIG_PATH_FIELDS` is the one table of config fields naming a file (docs/security.md); :func:`walk_tree` is the
one walk of a repository, listing links and never entering them.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from generator.errors import GenRepoError, Problem

if TYPE_CHECKING:
    from tritonclient.grpc import model_config_pb2

__all__ = [
    "CONFIG_PATH_FIELDS",
    "MODEL_DIRECTORY_VARIABLE",
    "OUTPUT_OPTION",
    "ConfigPathField",
    "MapKey",
    "PathEscape",
    "config_path_escapes",
    "confined_file",
    "confined_path",
    "name_problem",
    "output_overlap_problems",
    "refuse_symlinks",
    "relative_path_problem",
    "walk_tree",
]

#: Where an output folder given on the command line (``-o``) is located in problems (as a manifest's is at /output).
OUTPUT_OPTION = "-o/--output"
#: The Python backend replaces this prefix of ``EXECUTION_ENV_PATH`` with the model's folder (python_be.cc; core
#: model_config_utils.cc LocalizePythonBackendExecutionEnvironmentPath).
MODEL_DIRECTORY_VARIABLE = "$$TRITON_MODEL_DIRECTORY"

#: How a field's value is read. ``relative``: joined to a folder of the model; ``name``: part of a library or
#: folder name the server builds (``libtriton_<backend>.so`` in ``<backends>/<backend>/``); ``model-directory``:
#: relative to the model's folder only through the ``$$TRITON_MODEL_DIRECTORY`` prefix; ``server``: used as given,
#: relative to the server's working folder or searched by the dynamic loader, so no value can be shown to stay in
#: the model's folder.
RELATIVE, NAME, MODEL_DIRECTORY, SERVER = "relative", "name", "model-directory", "server"


@dataclass(frozen=True, slots=True)
class ConfigPathField:
    """One ModelConfig field that names a file, folder or library: how it is read and by whom."""

    field: str
    kind: str
    read_by: str


#: Every ModelConfig field (and backend parameter) that names a file, folder or library. ``field`` uses the proto's
#: names; ``[KEY]`` is a map entry, ``[]`` every element of a repeated field.
CONFIG_PATH_FIELDS: tuple[ConfigPathField, ...] = (
    ConfigPathField("default_model_filename", RELATIVE,
                    "core model_config_utils.cc; every backend (python_backend stub_launcher.cc imports it)"),
    ConfigPathField("cc_model_filenames[CC]", RELATIVE, "tensorrt_backend model_state.cc"),
    ConfigPathField("model_warmup[].inputs[NAME].input_data_file", RELATIVE, "core backend_model_instance.cc"),
    ConfigPathField("sequence_batching.state[].initial_state[].data_file", RELATIVE,
                    "core sequence_batch_scheduler.cc"),
    ConfigPathField("output[].label_filename", RELATIVE, "core model.cc (label provider)"),
    ConfigPathField("backend", NAME, "core backend_model.cc GetBackendLibrarySearchPaths"),
    ConfigPathField("runtime", NAME, "core backend_model.cc GetBackendLibraryProperties"),
    ConfigPathField("platform", NAME, "core model_config_utils.cc GetBackendTypeFromPlatform"),
    ConfigPathField("model_repository_agents.agents[].name", NAME, "core repo_agent.cc"),
    ConfigPathField("model_repository_agents.agents[checksum].parameters[ALGORITHM:PATH] (key)", RELATIVE,
                    "checksum_repository_agent checksum.cc ReadFile"),
    ConfigPathField("parameters[EXECUTION_ENV_PATH]", MODEL_DIRECTORY,
                    "python_backend python_be.cc; core model_config_utils.cc"),
    ConfigPathField("parameters[TRITON_BATCH_STRATEGY_PATH]", SERVER,
                    "core backend_model.cc (custom batching library, dlopen)"),
    ConfigPathField("optimization.execution_accelerators.*_execution_accelerator[].parameters[trt_engine_cache_path]",
                    SERVER, "onnxruntime_backend onnxruntime.cc (TensorRT execution provider)"),
    ConfigPathField("optimization.execution_accelerators.*_execution_accelerator[].parameters[trt_timing_cache_path]",
                    SERVER, "onnxruntime_backend onnxruntime.cc"),
    ConfigPathField(
        "optimization.execution_accelerators.*_execution_accelerator[].parameters[trt_ep_context_file_path]",
        SERVER, "onnxruntime_backend onnxruntime.cc"),
    ConfigPathField(
        "optimization.execution_accelerators.*_execution_accelerator[].parameters[trt_extra_plugin_lib_paths]",
        SERVER, "onnxruntime_backend onnxruntime.cc"),
    ConfigPathField(
        "optimization.execution_accelerators.*_execution_accelerator[].parameters[int8_calibration_table_name]",
        NAME, "onnxruntime_backend onnxruntime.cc"),
    ConfigPathField("model_operations.op_library_filename[]", SERVER,
                    "onnxruntime_backend onnxruntime.cc RegisterCustomOpsLibrary; tensorflow_backend"),
)

#: Model ``parameters`` keys by kind (from the table).
_PARAMETER_KINDS = {"EXECUTION_ENV_PATH": MODEL_DIRECTORY, "TRITON_BATCH_STRATEGY_PATH": SERVER}
#: Execution-accelerator parameter keys by kind (from the table).
_ACCELERATOR_KINDS = {"trt_engine_cache_path": SERVER, "trt_timing_cache_path": SERVER,
                      "trt_ep_context_file_path": SERVER, "trt_extra_plugin_lib_paths": SERVER,
                      "int8_calibration_table_name": NAME}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SHOWN = 120  # characters of a hostile value quoted in a message


@dataclass(frozen=True, slots=True)
class MapKey:
    """A map entry in a :attr:`PathEscape.location` (``parameters["KEY"]``), found by its key."""

    key: str


@dataclass(frozen=True, slots=True)
class PathEscape:
    """A config value that names a path leaving the model's folder (or that cannot be shown to stay in it).

    ``field`` reads like the config (``cc_model_filenames["8.6"]``); ``location`` is the field's path in the
    pbtxt (message names, indices of repeated fields, :class:`MapKey` for map entries) for
    :meth:`locate`; ``parameter`` is the model ``parameters`` key the value came from, if any.
    """

    field: str
    value: str
    message: str
    location: tuple[str | int | MapKey, ...]
    parameter: str | None = None

    def locate(self, map_entry: Callable[[tuple[Any, ...], str], tuple[Any, ...]]) -> tuple[Any, ...]:
        """The field's path with each map key resolved by ``map_entry(prefix, key)`` (a pbtxt locator's)."""
        path: tuple[Any, ...] = ()
        for part in self.location:
            path = map_entry(path, part.key) if isinstance(part, MapKey) else (*path, part)
        return path


def _shown(value: str) -> str:
    return repr(value if len(value) <= _SHOWN else value[:_SHOWN] + "...")


def relative_path_problem(value: str) -> str | None:
    """Why ``value`` is not a plain relative path that stays in the folder it is joined to; None when it is.

    Refused: empty, absolute (``/`` or a drive letter), a ``..`` component, a backslash (a separator
    where Triton runs on Windows) and control characters (NUL, newline).
    """
    if all(part in ("", ".") for part in value.split("/")):
        return "is empty (it names the folder itself)"
    if _CONTROL.search(value):
        return "contains a control character (NUL, newline, ...)"
    if "\\" in value:
        return "contains a backslash (a path separator on Windows)"
    if value.startswith("/") or re.match(r"^[A-Za-z]:", value):
        return "is absolute (it depends on where the repository is served)"
    if ".." in value.split("/"):
        return "has a '..' component"
    return None


def name_problem(value: str) -> str | None:
    """Why ``value`` cannot be a library or folder name the server builds a path from; None when it can."""
    if value in (".", ".."):
        return "is '.' or '..'"
    if "/" in value or "\\" in value:
        return "contains a path separator"
    if _CONTROL.search(value):
        return "contains a control character (NUL, newline, ...)"
    return None


def _relative_escape(field: str, value: str, folder: str, location: tuple[str | int | MapKey, ...],
                     parameter: str | None = None) -> PathEscape | None:
    why = relative_path_problem(value)
    if why is None:
        return None
    return PathEscape(field, value, f"{field} {_shown(value)} {why}: Triton joins it to {folder}, and it must stay "
                      "inside the model's folder", location, parameter)


def _name_escape(field: str, value: str, location: tuple[str | int | MapKey, ...]) -> PathEscape | None:
    why = name_problem(value)
    if why is None:
        return None
    return PathEscape(field, value, f"{field} {_shown(value)} {why}: the server builds a library or folder path from "
                      "it, which would leave its folder", location)


def _parameter_escape(field: str, value: str, kind: str,
                      location: tuple[str | int | MapKey, ...], parameter: str | None) -> PathEscape | None:
    if kind == NAME:
        return _name_escape(field, value, location)
    if kind == MODEL_DIRECTORY:
        prefix = MODEL_DIRECTORY_VARIABLE + "/"
        if value.startswith(prefix):
            escape = _relative_escape(field, value[len(prefix):], f"the model's folder ({MODEL_DIRECTORY_VARIABLE})",
                                      location, parameter)
            return None if escape is None else PathEscape(field, value, escape.message, location, parameter)
        return PathEscape(field, value, f"{field} {_shown(value)} does not start with '{prefix}': the Python backend "
                          "reads it relative to the server's working folder or as an absolute path, outside the "
                          "model's folder", location, parameter)
    return PathEscape(field, value, f"{field} {_shown(value)} is read as given (relative to the server's working "
                      "folder, an absolute path, or searched by the dynamic loader): gen-repo cannot confine it to "
                      "the model's folder; remove it", location, parameter)


def config_path_escapes(config: model_config_pb2.ModelConfig) -> list[PathEscape]:
    """Every value of ``config`` that names a path leaving the model's folder (see :data:`CONFIG_PATH_FIELDS`)."""
    out: list[PathEscape | None] = []
    if config.default_model_filename:
        out.append(_relative_escape("default_model_filename", config.default_model_filename, "<model>/<version>/",
                                    ("default_model_filename",)))
    for cc in sorted(config.cc_model_filenames):
        out.append(_relative_escape(f"cc_model_filenames[{cc!r}]", config.cc_model_filenames[cc],
                                    "<model>/<version>/", ("cc_model_filenames", MapKey(cc), "value")))
    for index, warmup in enumerate(config.model_warmup):
        for name in sorted(warmup.inputs):
            data_file = warmup.inputs[name].input_data_file
            if data_file:
                out.append(_relative_escape(f"model_warmup[{index}].inputs[{name!r}].input_data_file", data_file,
                                            "<model>/warmup/", ("model_warmup", index, "inputs", MapKey(name),
                                                                "value", 0, "input_data_file")))
    for s, state in enumerate(config.sequence_batching.state):
        for i, initial in enumerate(state.initial_state):
            if initial.data_file:
                out.append(_relative_escape(f"sequence_batching.state[{s}].initial_state[{i}].data_file",
                                            initial.data_file, "<model>/initial_state/",
                                            ("sequence_batching", 0, "state", s, "initial_state", i, "data_file")))
    for index, output in enumerate(config.output):
        if output.label_filename:
            out.append(_relative_escape(f"output[{index}].label_filename", output.label_filename, "<model>/",
                                        ("output", index, "label_filename")))
    for field in ("backend", "runtime", "platform"):
        if value := getattr(config, field):
            out.append(_name_escape(field, value, (field,)))
    for index, agent in enumerate(config.model_repository_agents.agents):
        where: tuple[str | int | MapKey, ...] = ("model_repository_agents", 0, "agents", index)
        out.append(_name_escape(f"model_repository_agents.agents[{index}].name", agent.name, (*where, "name")))
        if agent.name == "checksum":
            for key in sorted(agent.parameters):
                path = key.partition(":")[2]
                out.append(_relative_escape(f"model_repository_agents.agents[{index}].parameters key {key!r}", path,
                                            "<model>/", (*where, "parameters", MapKey(key), "key")))
    for key in sorted(config.parameters):
        if key in _PARAMETER_KINDS:
            out.append(_parameter_escape(f"parameters[{key!r}]", config.parameters[key].string_value,
                                         _PARAMETER_KINDS[key],
                                         ("parameters", MapKey(key), "value", 0, "string_value"), key))
    accelerators = config.optimization.execution_accelerators
    for group in ("gpu_execution_accelerator", "cpu_execution_accelerator"):
        for index, accelerator in enumerate(getattr(accelerators, group)):
            where = ("optimization", 0, "execution_accelerators", 0, group, index, "parameters")
            for key in sorted(accelerator.parameters):
                if key in _ACCELERATOR_KINDS:
                    out.append(_parameter_escape(f"optimization.execution_accelerators.{group}[{index}]"
                                                 f".parameters[{key!r}]", accelerator.parameters[key],
                                                 _ACCELERATOR_KINDS[key], (*where, MapKey(key), "value"), None))
    for index, library in enumerate(config.model_operations.op_library_filename):
        out.append(_parameter_escape(f"model_operations.op_library_filename[{index}]", library, SERVER,
                                     ("model_operations", 0, "op_library_filename", "#", index), None))
    return [escape for escape in out if escape is not None]


def confined_path(root: Path | str, *parts: str) -> Path:
    """``root/parts...``, checked to stay inside ``root`` (no ``..``, no absolute part, no symlink leading out).

    Raises ValueError naming the part that leaves ``root``. Missing files are not an error here (the caller reads).
    """
    for part in parts:
        why = relative_path_problem(part)
        if why is not None:
            raise ValueError(f"{part[:_SHOWN]!r} {why}: it must stay inside {str(root)!r}")
    path = Path(root).joinpath(*parts)
    real_root = os.path.realpath(root)
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError) as error:
        raise ValueError(f"{str(path)!r} cannot be resolved: {error}") from error
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise ValueError(f"{str(path)!r} leads outside {str(root)!r} (through a symlink) to {real!r}")
    return path


def confined_file(root: Path | str, relative: str) -> Path:
    """``root/relative`` (a POSIX relative path) with every folder on the way checked by :func:`confined_path`.

    The file's own name is checked as text (no separator, not ``.`` or ``..``) but not resolved: the caller either
    ``lstat``s it (a symlink there is its finding) or replaces it by a rename (a symlink there is replaced, never
    followed). Raises ValueError naming what leaves ``root``.
    """
    *folders, name = relative.split("/")
    why = relative_path_problem(relative) or name_problem(name)
    if why is not None:
        raise ValueError(f"{relative[:_SHOWN]!r} {why}: it must stay inside {str(root)!r}")
    return confined_path(root, *folders) / name


def _contains(folder: str, path: str) -> bool:
    """Whether ``path`` is ``folder`` or lies under it (both absolute, resolved)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def output_overlap_problems(output: Path, reads: Iterable[tuple[str, Path | str]], file: str, pointer: str, *,
                            resolved: bool = False) -> list[Problem]:
    """The output folder equals or contains something the build reads: replacing it would destroy an input.

    ``reads``: (what, path) pairs, compared resolved so a link cannot hide an input inside the output (``resolved``:
    already resolved by :func:`generator.manifest.loading.read_paths`). Located at ``file``/``pointer``; a read inside
    one already reported is not reported again.
    """
    try:
        target = os.path.realpath(output)
    except (OSError, ValueError):
        return []  # a path that cannot be resolved is refused where it is used
    problems: list[Problem] = []
    reported: list[str] = []  # a folder already named covers what lies in it
    for what, path in reads:
        try:
            real = str(path) if resolved else os.path.realpath(path)
        except (OSError, ValueError):
            continue
        if _contains(target, real) and not any(_contains(folder, real) for folder in reported):
            reported.append(real)
            relation = "is" if real == target else "contains"
            problems.append(Problem(file, pointer, f"the output folder {os.path.abspath(output)!r} {relation} {what} "
                                    f"{real!r}: gen-repo replaces what is in its output folder, which would "
                                    "destroy what it reads; choose a folder of its own"))
    return problems


# -- The one walk of a repository folder -----------------------------------------------------------------------------
def walk_tree(root: Path | str) -> Iterator[tuple[str, os.stat_result]]:
    """(relative POSIX path, ``lstat``) of every entry under ``root`` at every depth, folders included.

    Sorted by name, a folder before its contents. Nothing is followed: a symlink is yielded as the link it is and never
    entered; a folder that cannot be listed is yielded, not entered. ``root`` itself is not yielded (callers ``lstat``
    it).
    """
    pending = [""]
    while pending:
        base = pending.pop()
        folder = os.path.join(root, base) if base else os.fspath(root)
        try:
            with os.scandir(folder) as entries:
                names = sorted(entry.name for entry in entries)
        except OSError:
            continue
        below = []
        for name in names:
            rel = f"{base}/{name}" if base else name
            try:
                st = os.lstat(os.path.join(folder, name))
            except OSError:
                continue  # gone since it was listed
            yield rel, st
            if stat.S_ISDIR(st.st_mode):
                below.append(rel)
        pending += reversed(below)  # depth first, in name order


def _link_target(path: str) -> str:
    try:
        target = os.readlink(path)
    except OSError:
        return "?"
    return target if len(target) <= _SHOWN else target[:_SHOWN] + "..."


def symlink_problems(root: Path | str) -> list[Problem]:
    """Every symlink at ``root`` or under it (:func:`walk_tree`), one refusal each naming the link and its target."""
    links = [""] if os.path.islink(root) else [rel for rel, st in walk_tree(root) if stat.S_ISLNK(st.st_mode)]
    out = []
    for rel in links:
        path = os.path.join(root, rel) if rel else os.fspath(root)
        kind = "folder" if os.path.isdir(path) else "file" if os.path.exists(path) else "path that does not exist"
        out.append(Problem(path, "", f"refused: a symlink (to the {kind} {_link_target(path)!r}); a repository holds "
                                     "regular files and folders only (Triton would follow it wherever it leads)"))
    return out


def refuse_symlinks(root: Path | str) -> None:
    """GenRepoError (exit 2) naming every symlink at or under the repository folder ``root``; nothing is read first."""
    problems = symlink_problems(root)
    if problems:
        raise GenRepoError(problems, summary=f"{root} holds symlinks: nothing was read through them")
