"""The search: from the generated config, steepest ascent over neighbours, bounded in time, stopped by the noise.

Each step measures every not yet measured neighbour of the best setting (:func:`generator.tuning.space.neighbours`)
and moves to the best of them only when it beats the best by more than the noise: the larger of the two
measurements' relative spreads, and never less than the tolerance. A gain inside the noise is not a gain, so the
search stops there ("converged"), when the time budget is spent before a step ends ("budget"), or when a neighbour
cannot be measured at all and none is left. Candidates over the p99 budget never become the best (the baseline
stays the best when every candidate is over it; the report says so).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from generator.tuning.measure import Candidate
from generator.tuning.space import ModelFacts, Setting, neighbours

__all__ = ["SearchResult", "beats", "hill_climb"]


@dataclass(slots=True)
class SearchResult:
    """Every candidate measured (in order), the baseline, the best and why the search stopped."""

    baseline: Candidate
    best: Candidate
    candidates: list[Candidate] = field(default_factory=list)
    stopped: str = ""
    seconds: float = 0.0


def beats(challenger: Candidate, best: Candidate, tolerance: float) -> bool:
    """Whether ``challenger`` is better than ``best`` by more than the noise (or ``best`` failed or is over budget)."""
    if challenger.error is not None or not challenger.within_budget:
        return False
    if best.error is not None or not best.within_budget:
        return True
    noise = max(challenger.noise, best.noise, tolerance)
    return challenger.score > best.score * (1.0 + noise)


def hill_climb(facts: ModelFacts, measure: Callable[[Setting], Candidate], *, budget_s: float, tolerance: float,
               clock: Callable[[], float] = time.monotonic) -> SearchResult:
    """Search ``facts``' space with ``measure``; at most ``budget_s`` seconds once the baseline is measured."""
    began = clock()
    deadline = began + budget_s
    baseline = measure(facts.baseline)
    result = SearchResult(baseline, baseline, [baseline])
    seen = {facts.baseline}
    while True:
        step_best: Candidate | None = None
        fresh = [s for s in neighbours(result.best.setting, facts) if s not in seen]
        if not fresh:
            result.stopped = "converged: every neighbour of the best was measured"
            break
        for setting in fresh:
            if clock() >= deadline:
                result.stopped = f"budget: {budget_s:g} s spent"
                break
            seen.add(setting)
            candidate = measure(setting)
            result.candidates.append(candidate)
            if candidate.error is None and candidate.within_budget and (
                    step_best is None or candidate.score > step_best.score):
                step_best = candidate
        if result.stopped:
            if step_best is not None and beats(step_best, result.best, tolerance):
                result.best = step_best
            break
        if step_best is None or not beats(step_best, result.best, tolerance):
            noise = max(result.best.noise, step_best.noise if step_best else 0.0, tolerance)
            result.stopped = f"converged: no neighbour beats the best by more than the noise ({noise:.1%})"
            break
        result.best = step_best
    result.seconds = clock() - began
    return result
