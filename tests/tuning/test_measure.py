"""generator/tuning/measure.py: the window arithmetic (rates per client, spread, percentiles) and the report form."""

from __future__ import annotations

import math

import pytest

from generator.tuning.loadgen import Completions
from generator.tuning.measure import Candidate, LevelResult, completion_rate, percentile, spread
from generator.tuning.space import Setting


def _batches(clients: int, period: float, start: float, stop: float) -> Completions:
    """Every client completing once per ``period`` s, all at once (one batch), from ``start`` to ``stop``."""
    done = Completions()
    t = start
    while t <= stop:
        for client in range(clients):
            done.ends.append(t)
            done.clients.append(client)
            done.latencies_ms.append(period * 1000)
        t += period
    return done


@pytest.mark.parametrize("offset", [0.0, 0.01, 0.049, 0.05, 0.099])
def test_a_window_cutting_a_batch_does_not_change_the_rate(offset):
    # 16 clients served in one batch every 0.1 s: 160 requests/s wherever the 1 s window starts. A plain count over
    # the window gives 160 or 176 depending on where it cuts; the per-client rate is 160 every time.
    done = _batches(16, 0.1, offset, offset + 1.0)
    assert completion_rate(done, 1.0) == pytest.approx(160.0)


def test_clients_slower_than_the_window_fall_back_to_the_count():
    done = Completions(ends=[0.5, 0.6], clients=[0, 1], latencies_ms=[800.0, 900.0])
    assert completion_rate(done, 2.0) == 1.0
    assert completion_rate(Completions(), 1.0) == 0.0


def test_spread_and_percentiles():
    assert spread([95.0, 100.0, 105.0]) == pytest.approx(0.1)
    assert math.isinf(spread([0.0, 0.0]))
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 99), percentile([], 99)) == (50.0, 99.0, 0.0)


def test_a_candidate_reports_its_worst_level_and_its_error():
    candidate = Candidate(Setting(2, "KIND_CPU", 500, ()), [LevelResult(8, 100.0, 0.02, 1.0, 4.0, 3),
                                                            LevelResult(32, 300.0, 0.04, 2.0, 9.0, 5)], 200.0)
    assert (candidate.noise, candidate.p99_ms) == (0.04, 9.0)
    doc = candidate.to_dict()
    assert doc["instance_count"] == 2 and doc["preferred_batch_size"] == [] and "error" not in doc
    assert doc["results"][1] == {"concurrency": 32, "throughput": 300.0, "throughput_noise": 0.04, "p50_ms": 2.0,
                                 "p99_ms": 9.0, "windows": 5}
    assert Candidate(Setting(1, "KIND_CPU", 0, ()), error="load failed: x").to_dict()["error"] == "load failed: x"
