"""generator/tuning/run.py: a whole tune on the real Triton, against the oracle whose optimum is known by arithmetic."""

from __future__ import annotations

import json

import jsonschema
import pytest

from generator.resources import resource_dir
from generator.tuning.run import TuneRun, tune_repository
from tests.tuning.oracle import (
    bound_throughput,
    expected_throughput,
    one_instance_throughput,
    reaches_bound,
    write_oracle_repository,
)

pytestmark = [pytest.mark.triton, pytest.mark.slow]

#: Candidates the search may measure to get there (the grid has 4 x 5 x 2 = 40).
MAX_CANDIDATES = 20


def test_tune_reaches_the_oracles_optimum(tmp_path):
    repo = write_oracle_repository(tmp_path)
    lines: list[str] = []
    report = tune_repository(TuneRun(repo, budget_s=75.0), progress=lines.append)
    (tune,) = report.models
    search = tune.search
    assert search is not None
    bound = bound_throughput()
    best = search.best
    assert best.error is None
    # The setting found is the optimum by arithmetic (within 5% of the bound: noise-free, whatever the machine's
    # load); its measured throughput confirms it, within what a loaded 2-core machine takes off any setting (a
    # python-backend round trip per request), and never above the bound (the model cannot serve faster).
    s = best.setting
    assert expected_throughput(s.instance_count, s.preferred_batch_size) >= 0.95 * bound, (bound, lines)
    assert reaches_bound(s.instance_count), lines
    assert 0.85 * bound <= best.score <= 1.03 * bound, (bound, lines)
    # It started away from it (one instance cannot exceed one_instance_throughput) and needed few candidates.
    assert search.baseline.score <= 1.03 * one_instance_throughput() < 0.95 * bound, lines
    assert len(search.candidates) <= MAX_CANDIDATES, lines
    assert search.stopped.startswith(("converged", "budget"))
    assert report.engine in ("loop", "perf_analyzer") and report.hardware
    document = report.to_dict()
    schema = json.loads((resource_dir("schemas") / "report_tune.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(document)
    assert document["models"][0]["best"]["instance_count"] == best.setting.instance_count
