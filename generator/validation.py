"""``gen-repo validate``'s work: every GraphSpec of every file checked as ``gen-repo plan`` would serve it.

One :class:`ValidatedFile` per file, in the order given: its graphs with the batch size Triton would get, and every
problem (schema, AITune's rules, the serving rules of :func:`generator.tensors.servability`), each naming the file
and the JSON pointer. Nothing is printed here; the CLI chooses tables, one line per file or JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from generator.errors import GenRepoError, Problem
from generator.schema import LoadedGraph, graph_summary, load_graphspecs
from generator.tensors import servability

__all__ = ["ValidatedFile", "ValidatedGraph", "validate_files"]


@dataclass(frozen=True, slots=True)
class ValidatedGraph:
    """One graph of a valid file: what was read and what Triton would be given."""

    loaded: LoadedGraph
    #: Triton's ``max_batch_size`` for the graph on its own (manifest defaults); 0 without batching.
    max_batch_size: int
    #: The serving decisions, in words (assumptions are in ``loaded.assumptions``).
    decisions: tuple[str, ...]

    def summary(self) -> dict[str, Any]:
        """Plain data for tables and ``--json``: :func:`generator.schema.graph_summary` plus how it is served."""
        triton = {"max_batch_size": self.max_batch_size, "decisions": list(self.decisions)}
        return {**graph_summary(self.loaded), "triton": triton}


@dataclass(frozen=True, slots=True)
class ValidatedFile:
    """One spec file: its graphs (those that loaded) and every problem found in it."""

    file: str
    graphs: tuple[ValidatedGraph, ...]
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        """True when the file has no problem."""
        return not self.problems


def validate_file(path: str) -> ValidatedFile:
    """Check every GraphSpec in one file (JSON or YAML; AITune fixture, bare graph or tune report)."""
    graphs: list[ValidatedGraph] = []
    problems: list[Problem] = []
    try:
        for loaded in load_graphspecs(path):
            served = servability(loaded)
            problems.extend(served.problems)
            decisions = tuple(d for d in served.decisions if not d.startswith("assumed: "))
            graphs.append(ValidatedGraph(loaded, served.max_batch_size, decisions))
    except GenRepoError as error:
        problems.extend(error.problems)
    return ValidatedFile(path, tuple(graphs), tuple(problems))


def validate_files(paths: Sequence[str]) -> list[ValidatedFile]:
    """:func:`validate_file` for each path, in order."""
    return [validate_file(path) for path in paths]
