"""Where a tensor lives: AITune's semantic paths into forward's arguments (or its result), and the Locator.

AITune's ``Locator`` (``aitune.torch.module.graph_spec``), as its JSON form keeps it: the semantic path alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from generator.naming import SemanticPath

__all__ = ["Locator", "path_from_json", "path_to_json"]


def path_from_json(value: Any) -> SemanticPath:
    """AITune's JSON semantic path (scalar, or list for deeper paths; ``[]`` for a bare output) to a Locator path."""
    if isinstance(value, list):
        return tuple(value)
    return value


def path_to_json(path: SemanticPath) -> str | int | list[str | int]:
    """Inverse of :func:`path_from_json`."""
    return list(path) if isinstance(path, tuple) else path


def _path_steps(path: SemanticPath) -> tuple[str | int, ...]:
    return path if isinstance(path, tuple) else (path,)


@dataclass(frozen=True, slots=True)
class Locator:
    """Where a tensor lives in forward's arguments (or in its returned structure).

    AITune's Locator records container types per step; the JSON form keeps only the semantic ``path`` and the
    display ``access_path``, which is all gen-repo needs: dict keys are strings, sequence indices are ints.
    """

    path: SemanticPath
    access_path: str = field(default="", compare=False)
    is_output: bool = field(default=False, compare=False)

    @property
    def display_path(self) -> str:
        """Python-like access path (``extras["mask"]``), as AITune prints it."""
        return self.access_path or _display_path(self.path, self.is_output)

    @property
    def root_name(self) -> str | int:
        """First step of the path: the forward parameter for inputs."""
        steps = _path_steps(self.path)
        return steps[0] if steps else ""

    def get_value(self, obj: Any) -> Any:
        """The value at this path inside ``obj``."""
        for step in _path_steps(self.path):
            obj = obj[step]
        return obj

    def set_value(self, obj: Any, value: Any) -> Any:
        """Return ``obj`` with the value at this path replaced (tuples are rebuilt, other containers edited)."""
        return _set_in(obj, _path_steps(self.path), value)

    def __str__(self) -> str:
        return self.display_path


def _display_path(path: SemanticPath, is_output: bool = False) -> str:
    steps = _path_steps(path)
    if is_output or not steps:
        text = "output"
        rest = list(steps)
    else:
        text, rest = str(steps[0]), list(steps[1:])
    for step in rest:
        text += f'["{step}"]' if isinstance(step, str) else f"[{step}]"
    return text


def _set_in(obj: Any, steps: tuple[str | int, ...], value: Any) -> Any:
    if not steps:
        return value
    head, rest = steps[0], steps[1:]
    child = _set_in(obj[head], rest, value)
    if isinstance(obj, tuple):
        items = list(obj)
        items[head] = child  # type: ignore[index]
        return type(obj)(items) if type(obj) is tuple else type(obj)(*items)
    obj[head] = child
    return obj
