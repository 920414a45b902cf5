"""generator/tuning/search.py: the climb on score surfaces given as arithmetic (no server: the search alone)."""

from __future__ import annotations

import itertools

from generator.tuning.measure import Candidate, LevelResult
from generator.tuning.search import beats, hill_climb
from generator.tuning.space import Setting, TuneFacts, grid

FACTS = TuneFacts("m", 16, 16, "KIND_CPU", 1, True, 100, (4, 16))


def _measure(score, noise=0.01, p99=None, log=None):
    def measure(setting: Setting) -> Candidate:
        if log is not None:
            log.append(setting)
        value = score(setting)
        if value is None:
            return Candidate(setting, error="load failed: refused")
        latency = p99(setting) if p99 else 10.0
        result = LevelResult(32, value, noise, latency / 2, latency, 3)
        return Candidate(setting, [result], value)
    return measure


def _surface(s: Setting) -> float:
    """Unimodal: best at 3 instances, delay 500, no preferred sizes."""
    return 1000.0 - 100 * abs(s.instance_count - 3) - abs(s.max_queue_delay_us - 500) / 10 \
        - (50 if s.preferred_batch_size else 0)


def test_it_climbs_to_the_top_of_a_unimodal_surface_in_fewer_candidates_than_the_grid():
    log: list[Setting] = []
    result = hill_climb(FACTS, _measure(_surface, log=log), budget_s=1e9, tolerance=0.01)
    assert result.best.setting == Setting(3, "KIND_CPU", 500, ())
    assert result.stopped.startswith("converged")
    assert len(log) == len(set(log)) < len(grid(FACTS)) / 2
    assert result.baseline.setting == FACTS.baseline and result.candidates[0] is result.baseline


def test_gains_inside_the_noise_are_not_climbed_from_and_the_generated_setting_is_kept():
    # Every neighbour is 3% better than the baseline, the noise is 5% (windows within 2.5% either side): the ranges
    # overlap, so the search stops after one step and keeps the generated setting.
    def flat(s: Setting) -> float:
        return 100.0 if s == FACTS.baseline else 103.0

    result = hill_climb(FACTS, _measure(flat, noise=0.05), budget_s=1e9, tolerance=0.01)
    assert result.stopped.startswith("converged: no neighbour beats the best beyond the noise (5.0%)")
    assert len(result.candidates) == 1 + 4 and result.best is result.baseline and result.kept
    # With --budget 0 only the baseline is measured: kept, never a block pinning it.
    ticks = itertools.count()
    nothing = hill_climb(FACTS, _measure(flat), budget_s=0, tolerance=0.01, clock=lambda: float(next(ticks)))
    assert nothing.candidates == [nothing.baseline] and nothing.kept


def test_a_move_needs_a_gain_beyond_both_figures_noise():
    def candidate(score: float, noise: float) -> Candidate:
        return Candidate(FACTS.baseline, [LevelResult(8, score, noise)], score)

    # Ranges: 100 +-10% is 95..105; 112 +-10% is 106.4..117.6 (apart); 108 +-10% is 102.6..113.4 (overlapping).
    assert beats(candidate(112.0, 0.10), candidate(100.0, 0.10), 0.05)
    assert not beats(candidate(108.0, 0.10), candidate(100.0, 0.10), 0.05)
    # The challenger's own noise counts as much as the best's: a 93% spread hides a 40% gain.
    assert not beats(candidate(140.0, 0.93), candidate(100.0, 0.02), 0.05)
    # The tolerance is the least noise assumed: 4% is inside a 5% tolerance however quiet both figures were.
    assert not beats(candidate(104.0, 0.0), candidate(100.0, 0.0), 0.05)
    assert beats(candidate(106.0, 0.0), candidate(100.0, 0.0), 0.05)


def test_the_budget_bounds_the_search():
    ticks = itertools.count()
    result = hill_climb(FACTS, _measure(_surface), budget_s=3, tolerance=0.01, clock=lambda: float(next(ticks)))
    assert result.stopped == "budget: 3 s spent"
    assert len(result.candidates) <= 1 + 3


def test_over_the_latency_budget_never_becomes_the_best_and_failures_are_skipped():
    def p99(s: Setting) -> float:
        return 5.0 if s.instance_count == 1 else 50.0

    measure = _measure(lambda s: None if s.max_queue_delay_us == 0 else _surface(s), p99=p99)

    def budgeted(setting: Setting) -> Candidate:
        candidate = measure(setting)
        candidate.within_budget = candidate.error is None and candidate.p99_ms <= 20.0
        return candidate

    result = hill_climb(FACTS, budgeted, budget_s=1e9, tolerance=0.01)
    assert result.best.setting.instance_count == 1 and result.best.within_budget
    assert any(c.error for c in result.candidates)
    assert not beats(result.candidates[1], result.best, 0.01) or result.candidates[1].within_budget
