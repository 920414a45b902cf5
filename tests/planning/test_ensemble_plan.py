"""plan_ensemble (generator/planning/ensemble_plan.py) at scale: its cost grows linearly with steps and tensors.

No timing (timings belong in bench/bench_plan_scale.py): every tensor name is a :class:`CountedName`, a ``str`` that
counts how often it is compared or hashed, which is what a membership test in a list (quadratic) or in a dict or
set (linear) costs. Planning 4x the steps must cost about 4x the operations, in every shape an ensemble can take.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from generator.manifest.entries import ManifestEnsemble
from generator.planning.ensemble_plan import plan_ensemble
from generator.triton.ensemble import Step
from tests.manifest_helpers import graph, plan_for, tensor

_OPERATIONS = [0]
MODELS = 4


class CountedName(str):
    """A tensor name that counts its comparisons and hashes (in :data:`_OPERATIONS`)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        _OPERATIONS[0] += 1
        return str.__eq__(self, other)

    def __hash__(self) -> int:
        _OPERATIONS[0] += 1
        return str.__hash__(self)


def _chain(n: int) -> list[Step]:
    """Step i reads t<i> and writes t<i+1>: one input, one output, n-1 edges."""
    return [Step(f"m{i % MODELS}", {"input_x": CountedName(f"t{i}")}, {"output": CountedName(f"t{i + 1}")})
            for i in range(n)]


def _reversed_chain(n: int) -> list[Step]:
    """The chain listed backwards: each pass over the steps in index order runs one step only."""
    return _chain(n)[::-1]


def _wide(n: int) -> list[Step]:
    """n independent steps: n ensemble inputs and n outputs, no edges."""
    return [Step(f"m{i % MODELS}", {"input_x": CountedName(f"x{i}")}, {"output": CountedName(f"y{i}")})
            for i in range(n)]


def _fan_in(n: int) -> list[Step]:
    """One ensemble input read by every step, each step's output an ensemble output (one tensor, n consumers)."""
    return [Step(f"m{i % MODELS}", {"input_x": CountedName("x")}, {"output": CountedName(f"y{i}")})
            for i in range(n)]


@pytest.fixture(scope="module")
def square_models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """MODELS planned models ``m<j>``: ``x[b,16] -> output[b,16]`` (a chain of them is well wired)."""
    spec = graph([tensor("x", ["batch0", 16], [1, 16], [8, 16])], [tensor([], ["batch0", 16], [1, 16], [8, 16])])
    folder = tmp_path_factory.mktemp("square")
    plan = plan_for(folder, {"defaults": {"target": "python"},
                             "models": [{"name": f"m{j}", "spec": spec} for j in range(MODELS)]})
    return folder / "gen-repo.yaml", plan.models


def _operations(shape: Callable[[int], list[Step]], n: int, square_models: tuple[Path, Any]) -> int:
    manifest, models = square_models
    ensemble = ManifestEnsemble(0, "chain", 1, tuple(shape(n)))
    _OPERATIONS[0] = 0
    plan, problems = plan_ensemble(ensemble, manifest, models)
    assert plan is not None, problems
    assert len(plan.step_order) == n
    return _OPERATIONS[0]


@pytest.mark.parametrize("shape", [_chain, _reversed_chain, _wide, _fan_in], ids=lambda f: f.__name__.strip("_"))
def test_planning_an_ensemble_costs_operations_linear_in_its_steps_and_tensors(shape, square_models) -> None:  # type: ignore[no-untyped-def]
    """Before, a chain of 4x the steps cost about 16x the comparisons (list membership while deriving the inputs
    and outputs, a list removal and a rescan per pass while ordering the steps, every step rescanned per ensemble
    tensor)."""
    small, large = _operations(shape, 500, square_models), _operations(shape, 2000, square_models)
    assert small > 0
    assert large <= 4.5 * small, f"{shape.__name__}: {small} operations for 500 steps, {large} for 2,000"
