"""``gen-repo validate``'s work: every GraphSpec of every file checked as ``gen-repo plan`` would serve it.

One :class:`ValidatedFile` per file, in the order given, every problem naming the file and the JSON pointer. Nothing
is printed here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from generator.errors import GenRepoError, Problem
from generator.planning.tensors import servability
from generator.planning.workers import fork_pool, usable_cpus
from generator.specs.schema import graph_summary, load_graphspecs

__all__ = ["PARALLEL_MIN_FILES", "Summaries", "ValidatedFile", "validate_file", "validate_files"]

#: What :class:`ValidatedFile` carries per graph besides its max_batch_size: nothing, the summary as plain data (for
#: tables and indented JSON) or as one line of compact JSON with sorted keys (encoded where the work is done, which
#: for many files is a worker: the parent only joins lines).
Summaries = Literal["none", "data", "json"]

#: Below this many files one process checks them all: starting workers costs more than it saves.
PARALLEL_MIN_FILES = 200


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
    #: The process that checked the file (a worker's pid from PARALLEL_MIN_FILES files on); not part of equality.
    checked_in: int = field(default=0, compare=False)

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
    return ValidatedFile(path, tuple(sizes), tuple(described), tuple(problems), os.getpid())


def _validate_chunk(paths: Sequence[str], summaries: Summaries) -> list[ValidatedFile]:
    return [validate_file(path, summaries) for path in paths]


def validate_files(
    paths: Sequence[str], summaries: Summaries = "none", jobs: int | None = None
) -> list[ValidatedFile]:
    """:func:`validate_file` for each path, results in the order given.

    ``jobs``: worker processes; default one per usable CPU from :data:`PARALLEL_MIN_FILES` files on, else 1.
    """
    if jobs is None:
        jobs = usable_cpus() if len(paths) >= PARALLEL_MIN_FILES else 1
    if jobs <= 1 or len(paths) < 2:
        return _validate_chunk(paths, summaries)
    # Chunks of a few dozen files keep the workers balanced while the pickled results stay few.
    size = max(1, min(64, len(paths) // (jobs * 4)))
    chunks = [paths[i:i + size] for i in range(0, len(paths), size)]
    with fork_pool(jobs) as pool:
        if pool is None:
            return _validate_chunk(paths, summaries)
        return [result for chunk in pool.map(_validate_chunk, chunks, [summaries] * len(chunks))
                for result in chunk]
