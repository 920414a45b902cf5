"""The search: from the generated config, steepest ascent over neighbours, bounded in time, stopped by the noise.

A step moves only on a gain beyond both figures' noise, until "converged" or "budget"; candidates over the p99 budget
never become the best (docs/tune.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from generator.tuning.measure import Candidate
from generator.tuning.space import Setting, TuneFacts, grid, neighbours

__all__ = ["SearchResult", "beats", "exhaustive", "hill_climb"]


@dataclass(slots=True)
class SearchResult:
    """Every candidate measured (in order), the baseline, the best and why the search stopped."""

    baseline: Candidate
    best: Candidate
    candidates: list[Candidate] = field(default_factory=list)
    stopped: str = ""
    seconds: float = 0.0

    @property
    def kept(self) -> bool:
        """Whether no setting beat the generated one beyond the noise (the best is the baseline: nothing to write)."""
        return self.best is self.baseline

    def choose(self, tolerance: float) -> None:
        """The best: the highest candidate that beats the baseline beyond both figures' noise, else the baseline."""
        winners = [c for c in self.candidates if c is not self.baseline and beats(c, self.baseline, tolerance)]
        self.best = max(winners, key=lambda c: c.score, default=self.baseline)


def beats(challenger: Candidate, best: Candidate, tolerance: float) -> bool:
    """Whether ``challenger`` is better than ``best`` beyond both figures' noise (or ``best`` failed or is over budget).

    A figure's noise is its windows' spread, (max - min) / mean (at least the tolerance): its windows lay within
    half of it either side of the mean. The challenger's lowest must be above the best's highest.
    """
    if challenger.error is not None or not challenger.within_budget:
        return False
    if best.error is not None or not best.within_budget:
        return True
    low = challenger.score * (1.0 - max(challenger.noise, tolerance) / 2)
    return low > best.score * (1.0 + max(best.noise, tolerance) / 2)


def _better(candidate: Candidate, than: Candidate | None) -> bool:
    """Whether ``candidate`` measured more than ``than`` (any amount), both measured and within the p99 budget."""
    if candidate.error is not None or not candidate.within_budget:
        return False
    return than is None or than.error is not None or not than.within_budget or candidate.score > than.score


def hill_climb(facts: TuneFacts, measure: Callable[[Setting], Candidate], *, budget_s: float, tolerance: float,
               clock: Callable[[], float] = time.monotonic) -> SearchResult:
    """Search ``facts``' space with ``measure``; no candidate starts after ``budget_s`` seconds (the baseline's too).

    The climb goes on from the best neighbour only when it beats the current setting beyond the noise
    (:func:`beats`); the best is chosen by :meth:`SearchResult.choose`.
    """
    began = clock()
    deadline = began + budget_s
    baseline = measure(facts.baseline)
    result = SearchResult(baseline, baseline, [baseline])
    current = baseline
    seen = {facts.baseline}
    while not result.stopped:
        step_best: Candidate | None = None
        fresh = [s for s in neighbours(current.setting, facts) if s not in seen]
        if not fresh:
            result.stopped = "converged: every neighbour of the best was measured"
        for setting in fresh:
            if clock() >= deadline:
                result.stopped = f"budget: {budget_s:g} s spent"
                break
            seen.add(setting)
            candidate = measure(setting)
            result.candidates.append(candidate)
            if _better(candidate, step_best):
                step_best = candidate
        if result.stopped:
            break
        if step_best is None or not beats(step_best, current, tolerance):
            noise = max(current.noise, step_best.noise if step_best else 0.0, tolerance)
            result.stopped = f"converged: no neighbour beats the best beyond the noise ({noise:.1%})"
            break
        current = step_best
    result.choose(tolerance)
    result.seconds = clock() - began
    return result


def exhaustive(facts: TuneFacts, measure: Callable[[Setting], Candidate], *, budget_s: float = float("inf"),
               tolerance: float = 0.0, clock: Callable[[], float] = time.monotonic) -> SearchResult:
    """Every setting of the grid (:func:`generator.tuning.space.grid`), baseline first, bounded by ``budget_s``.

    What the climb is judged against (``bench/bench_tune.py``).
    """
    began = clock()
    settings = grid(facts)
    baseline = measure(settings[0])
    result = SearchResult(baseline, baseline, [baseline])
    for setting in settings[1:]:
        if clock() >= began + budget_s:
            result.stopped = f"budget: {budget_s:g} s spent"
            break
        result.candidates.append(measure(setting))
    result.choose(tolerance)
    result.stopped = result.stopped or f"grid: all {len(settings)} settings measured"
    result.seconds = clock() - began
    return result
