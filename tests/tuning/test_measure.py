"""generator/tuning/measure.py: a candidate's report form."""

from __future__ import annotations

from generator.tuning.measure import Candidate, LevelResult
from generator.tuning.space import Setting


def test_a_candidate_reports_its_worst_level_and_its_error():
    candidate = Candidate(Setting(2, "KIND_CPU", 500, ()), [LevelResult(8, 100.0, 0.02, 1.0, 4.0, 3),
                                                            LevelResult(32, 300.0, 0.04, 2.0, 9.0, 5)], 200.0)
    assert (candidate.noise, candidate.p99_ms) == (0.04, 9.0)
    doc = candidate.to_dict()
    assert doc["instance_count"] == 2 and doc["preferred_batch_size"] == [] and "error" not in doc
    assert doc["results"][1] == {"concurrency": 32, "throughput": 300.0, "throughput_noise": 0.04, "p50_ms": 2.0,
                                 "p99_ms": 9.0, "windows": 5, "settled": True, "window_s": 0.0}
    assert doc["settled"] and doc["applied"] is None
    candidate.results[0].settled = False  # one level unsettled: the candidate's figure is unsettled
    assert not candidate.settled and candidate.to_dict()["settled"] is False
    assert Candidate(Setting(1, "KIND_CPU", 0, ()), error="load failed: x").to_dict()["error"] == "load failed: x"
