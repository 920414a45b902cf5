"""generator/tuning/run.py: a whole tune on the real Triton, against the oracle whose optimum is known by arithmetic."""

from __future__ import annotations

import json

import jsonschema
import pytest

from generator.resources import resource_dir
from generator.serving.loadgen import Windows
from generator.tuning.run import KEPT, TuneRun, models_to_write, tune_repository
from tests.tuning.oracle import (
    NOISY_AMPLITUDE,
    bound_throughput,
    expected_throughput,
    noisy_throughput,
    one_instance_throughput,
    reaches_bound,
    write_noisy_oracle_repository,
    write_oracle_repository,
)

pytestmark = [pytest.mark.triton, pytest.mark.slow]

#: Candidates the search may measure to get there (the grid has 4 x 5 x 2 = 40).
MAX_CANDIDATES = 20


def test_tune_reaches_the_oracles_optimum(tmp_path):
    repo = write_oracle_repository(tmp_path)
    lines: list[str] = []
    report = tune_repository(TuneRun(repo, budget_s=90.0), progress=lines.append)
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
    assert expected_throughput(s.instance_count, s.preferred_batch_size, s.max_queue_delay_us) >= 0.95 * bound, \
        (bound, lines)
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
    _applied_as_asked(search.candidates)
    assert not search.kept and [m.model for m in models_to_write(report)] == ["oracle"]


def _applied_as_asked(candidates):
    """Every candidate measured was loaded as asked: the settings read back from the server are the candidate's."""
    for candidate in candidates:
        assert candidate.applied == candidate.setting, (candidate.applied, candidate.setting)


def test_a_noisy_oracle_reports_unsettled_figures_and_keeps_the_generated_setting(tmp_path):
    # Every setting with 2+ instances serves the same items/s (its device costs per item alone); each execution's
    # device time is scaled by a random factor in 1 +- 0.9. Half-second windows hold ~30 executions, whose mean
    # factor varies by ~9% (0.9 / sqrt(3) / sqrt(30)): three windows agree within 1% seldom, so figures are
    # unsettled, and any gain over the generated 2 instances is noise: nothing beats it beyond both figures' noise.
    repo = write_noisy_oracle_repository(tmp_path)
    lines: list[str] = []
    run = TuneRun(repo, budget_s=30.0, concurrency=(32,),
                  windows=Windows(window_s=0.5, warmup_s=0.5, tolerance=0.01, settle_s=4.0))
    report = tune_repository(run, progress=lines.append)
    (tune,) = report.models
    search = tune.search
    assert search is not None and search.baseline.error is None, lines
    results = [r for c in search.candidates for r in c.results]
    assert any(not r.settled for r in results), lines
    for result in results:  # unsettled exactly where the windows did not agree within the tolerance
        assert result.settled == (result.throughput_noise <= 0.01), result
    # The generated setting is kept; nothing would be written; the report and the notes say so in one line.
    assert search.kept and search.best is search.baseline, lines
    assert models_to_write(report) == []
    assert f"oracle: {KEPT}" in report.notes
    assert any("unsettled" in note for note in report.notes), report.notes
    document = report.to_dict()
    assert document["models"][0]["kept"] and document["models"][0]["unsettled"] >= 1
    assert len(document["load_after"]) == 3
    # The baseline's figure is the device's rate within what noise and a loaded 2-core machine take or give.
    assert 0.6 * noisy_throughput() <= search.baseline.score <= (1 + NOISY_AMPLITUDE) * noisy_throughput(), lines
    _applied_as_asked(search.candidates)
