"""``gen-repo validate``'s work: every GraphSpec of every file checked as ``gen-repo plan`` would serve it.

One :class:`ValidatedFile` per file, in the order given, every problem naming the file and the JSON pointer. Nothing
is printed here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from generator.errors import GenRepoError, Problem
from generator.planning.tensors import servability
from generator.specs.schema import graph_summary, load_graphspecs

__all__ = ["Summaries", "ValidatedFile", "validate_file", "validate_files"]

#: What :class:`ValidatedFile` carries per graph besides its max_batch_size: nothing, the summary as plain data (for
#: tables and indented JSON) or as one line of compact JSON with sorted keys (the CLI only joins lines).
Summaries = Literal["none", "data", "json"]


@dataclass(frozen=True, slots=True)
class ValidatedFile:
    """One spec file: Triton's max_batch_size per graph that loaded, their summaries if asked, every problem."""

    file: str
    #: Per graph, Triton's ``max_batch_size`` for it on its own (manifest defaults); 0 without batching.
    max_batch_sizes: tuple[int, ...]
    #: Per graph, :func:`generator.specs.schema.graph_summary` plus how Triton serves it, as asked (see
    #: :data:`Summaries`).
    summaries: tuple[dict[str, Any], ...] | tuple[str, ...]
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        """True when the file has no problem."""
        return not self.problems


def validate_file(path: str, summaries: Summaries = "none") -> ValidatedFile:
    """Check every GraphSpec in one file (JSON or YAML; AITune fixture, bare graph or tune report)."""
    sizes: list[int] = []
    described: list[Any] = []
    problems: list[Problem] = []
    try:
        for loaded in load_graphspecs(path):
            served = servability(loaded)
            problems.extend(served.problems)
            sizes.append(served.max_batch_size)
            if summaries != "none":
                decisions = [d for d in served.decisions if not d.startswith("assumed: ")]
                triton = {"max_batch_size": served.max_batch_size, "decisions": decisions}
                summary = {**graph_summary(loaded), "triton": triton}
                described.append(summary if summaries == "data" else json.dumps(summary, sort_keys=True))
    except GenRepoError as error:
        problems.extend(error.problems)
    return ValidatedFile(path, tuple(sizes), tuple(described), tuple(problems))


def validate_files(paths: Sequence[str], summaries: Summaries = "none") -> list[ValidatedFile]:
    """:func:`validate_file` for each path, results in the order given."""
    return [validate_file(path, summaries) for path in paths]
