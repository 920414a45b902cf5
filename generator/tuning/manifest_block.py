"""The ``tuned:`` block written into the manifest the repository came from: a text edit, comments and order kept.

The edited text is parsed again and must differ only in its ``tuned`` blocks, or nothing is written; the file is
replaced atomically, so an interrupted tune leaves it as it was.
"""

from __future__ import annotations

import copy
import datetime
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from generator import __version__
from generator.atomic_write import write_atomically
from generator.bounded import read_text
from generator.errors import GenRepoError, Problem
from generator.manifest.options import tuned_settings_digest
from generator.tuning.measure import Candidate

__all__ = ["tuned_block", "write_tuned"]

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def _flow(value: Any) -> str:
    """A value as one line of YAML flow style (plain words unquoted, everything else as JSON, which YAML reads)."""
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, str) and _PLAIN.match(value) and value.lower() not in _RESERVED:
        return value
    return json.dumps(value)


def tuned_block(best: Candidate, *, hardware: str, engine: str, concurrency: list[int],
                at: datetime.datetime | None = None) -> dict[str, Any]:
    """The ``tuned:`` value for a model: its best setting and what measured it (tied to it by its digest)."""
    s = best.setting
    moment = (at or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    settings: dict[str, Any] = {
        "instance_group": [{"kind": s.kind, "count": s.instance_count}],
        "dynamic_batching": {"max_queue_delay_microseconds": s.max_queue_delay_us,
                             "preferred_batch_size": list(s.preferred_batch_size)},
    }
    return {**settings, "measured": {
        "at": moment, "hardware": hardware, "engine": engine, "concurrency": list(concurrency),
        "throughput": round(best.score, 1), "noise": round(best.noise, 3), "p99_ms": round(best.p99_ms, 1),
        "settings_digest": tuned_settings_digest(settings), "gen_repo": __version__}}


def _model_nodes(root: yaml.Node | None, manifest: Path) -> dict[str, yaml.MappingNode]:
    models = next((v for k, v in getattr(root, "value", []) if isinstance(k, yaml.ScalarNode)
                   and k.value == "models"), None) if isinstance(root, yaml.MappingNode) else None
    if not isinstance(models, yaml.SequenceNode):
        raise GenRepoError([Problem(str(manifest), "/models", "no models list to write the tuned settings into")])
    out = {}
    for entry in models.value:
        if isinstance(entry, yaml.MappingNode):
            name = next((v.value for k, v in entry.value if k.value == "name" and isinstance(v, yaml.ScalarNode)),
                        None)
            if name is not None:
                out[str(name)] = entry
    return out


def _offset(mark: yaml.Mark) -> int:
    return int(mark.index)


def _line_after(text: str, end: int) -> int:
    """Where the line holding a node that ends at ``end`` ends (a block node's end mark may sit on the next line)."""
    line_start = text.rfind("\n", 0, end) + 1
    if not text[line_start:end].strip():
        return line_start
    line_end = text.find("\n", end)
    return len(text) if line_end < 0 else line_end + 1


def _edit(text: str, entry: yaml.MappingNode, block: dict[str, Any]) -> tuple[int, int, str]:
    """(start, end, replacement) putting ``tuned: block`` into ``entry``."""
    existing = next(((k, v) for k, v in entry.value if k.value == "tuned"), None)
    if entry.flow_style:
        if existing is not None:
            return _offset(existing[0].start_mark), _offset(existing[1].end_mark), \
                f"tuned: {_flow(block)}"
        end = _offset(entry.end_mark) - 1  # before the closing brace
        return end, end, f", tuned: {_flow(block)}"
    key_column = entry.value[0][0].start_mark.column
    pad = " " * key_column
    lines = "tuned:  # written by gen-repo tune\n" + "".join(
        f"{pad}  {key}: {_flow(value)}\n" for key, value in block.items())
    if existing is not None:
        start = _offset(existing[0].start_mark)
        return start, _line_after(text, _offset(existing[1].end_mark)), lines
    insert_at = _line_after(text, _offset(entry.value[-1][1].end_mark))
    prefix = "" if text[:insert_at].endswith("\n") else "\n"
    return insert_at, insert_at, f"{prefix}{pad}{lines}"


def write_tuned(manifest: Path, blocks: Mapping[str, dict[str, Any]]) -> str:
    """Write each model's ``tuned:`` block into ``manifest`` (atomically); return the new text.

    GenRepoError (nothing written) when a model is not in the manifest's ``models`` list, or when the edit would
    change anything but the ``tuned`` entries.
    """
    text = read_text(manifest)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        before = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise GenRepoError([Problem(str(manifest), "", f"not YAML: {error}")]) from None
    nodes = _model_nodes(root, manifest)
    missing = sorted(set(blocks) - set(nodes))
    if missing:
        raise GenRepoError([Problem(str(manifest), "/models", f"no model {name!r} in the manifest (models: "
                                    f"{', '.join(nodes)}); tune the repository this manifest builds")
                            for name in missing])
    edits = sorted((_edit(text, nodes[name], block) for name, block in blocks.items()), reverse=True)
    new = text
    for start, end, replacement in edits:
        new = new[:start] + replacement + new[end:]
    expected = copy.deepcopy(before)
    for entry in expected["models"]:
        if isinstance(entry, dict) and entry.get("name") in blocks:
            entry["tuned"] = blocks[entry["name"]]
    try:
        after = yaml.safe_load(new)
    except yaml.YAMLError as error:
        raise GenRepoError([Problem(str(manifest), "", f"the tuned settings could not be written into this "
                                    f"manifest's text (nothing written): {error}")]) from None
    if after != expected:
        raise GenRepoError([Problem(str(manifest), "/models", "the tuned settings could not be written into this "
                                    "manifest's text without changing something else (nothing written)")])
    try:
        write_atomically(manifest, new)
    except OSError as error:
        raise GenRepoError([Problem(str(manifest), "", f"cannot write: {error.strerror or error}")]) from error
    return new
