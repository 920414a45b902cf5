"""``gen-repo tune``'s work: one server in explicit model-control mode, each model searched in turn, one report.

Each model is loaded only with its candidates' configs and unloaded before the next, so models never compete.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from generator.contracts.served import ServedModel
from generator.errors import GenRepoError, Problem
from generator.serving.ceiling import measure_ceiling
from generator.serving.loadgen import Windows
from generator.tuning.measure import Candidate, Measurer
from generator.tuning.results import ModelTune, TuneReport, describe_hardware, load_average
from generator.tuning.search import exhaustive, hill_climb
from generator.tuning.space import Setting, TuneFacts, default_concurrency, facts_from_repository

__all__ = ["DEFAULT_BUDGET_S", "DEFAULT_SETTLE_S", "KEPT", "TuneRun", "models_to_write", "tune_repository"]

#: Seconds of search per model by default (its baseline included): about 15-25 candidates of ~4 s each on a small
#: CPU model whose figures settle at once, fewer where windows must be lengthened.
DEFAULT_BUDGET_S = 120.0
#: Seconds one measurement (a candidate at one concurrency) may take lengthening its windows until they agree.
DEFAULT_SETTLE_S = 15.0
#: What tune says of a model whose best is not distinguishable from its generated setting (nothing is written).
KEPT = "no setting beat the generated one beyond the noise: kept"


@dataclass(frozen=True, slots=True)
class TuneRun:
    """What to tune and how.

    The repository, models (all when empty), the per-model time budget, a p99 budget, concurrencies (Triton's rule
    when empty), the windows, the engine (``auto``, ``loop``, ``perf_analyzer``).
    """

    repo: Path
    models: tuple[str, ...] = ()
    budget_s: float = DEFAULT_BUDGET_S
    p99_ms: float | None = None
    concurrency: tuple[int, ...] = ()
    windows: Windows = field(default_factory=lambda: Windows(settle_s=DEFAULT_SETTLE_S))
    engine: str = "auto"
    perf_analyzer: str | None = None
    tritonserver: str | None = None
    timeout_s: float = 30.0
    #: ``climb`` (the search) or ``grid`` (every setting: the benchmark's reference).
    strategy: str = "climb"
    #: Seconds per batch size to measure the model's runtime alone (the ceiling); 0 skips it.
    ceiling_s: float = 3.0


def _choose_engine(run: TuneRun) -> tuple[str, str | None, str]:
    """(engine, perf_analyzer binary or None, why): perf_analyzer where one runs here (or is asked for), else loop."""
    from generator.serving.perf_analyzer import find_perf_analyzer

    if run.engine == "loop":
        return "loop", None, "the built-in load loop (asked for)"
    status = find_perf_analyzer(run.perf_analyzer)
    if status.usable:
        return "perf_analyzer", status.path, status.reason
    if run.engine == "perf_analyzer":
        raise GenRepoError([Problem(run.perf_analyzer or "perf_analyzer", "", status.reason)])
    return "loop", None, status.reason


def _request(served: ServedModel, facts: TuneFacts) -> tuple[dict, dict[str, str], int]:
    """The request every client sends: one item of the opt shape (the opt batch where one item is out of range)."""
    from generator.client import ModelContract

    contract = ModelContract.from_served(served)
    try:
        inputs = contract.example_inputs("opt", batch_size=1) if facts.max_batch_size > 0 else \
            contract.example_inputs("opt")
    except ValueError:
        inputs = contract.example_inputs("opt")
    batch = int(next(iter(inputs.values())).shape[0]) if facts.max_batch_size > 0 and inputs else 1
    return inputs, {t.name: t.datatype for t in contract.inputs}, batch


def tune_repository(run: TuneRun, progress: Callable[[str], None] = lambda line: None) -> TuneReport:
    """Tune every model of ``run``; GenRepoError for bad input (no such model, no repository, no server)."""
    from generator.serving.server import launch

    entries = facts_from_repository(run.repo, run.models)
    engine, binary, why = _choose_engine(run)
    progress(f"engine: {engine} ({why})")
    report = TuneReport(str(run.repo), engine, describe_hardware(), load_average(), run.windows.tolerance)
    if engine == "loop":
        report.notes.append(f"measured with the built-in load loop: {why}")
    for facts, _ in entries:
        if facts.tunable and (short := _too_short(run, list(run.concurrency) or default_concurrency(facts))):
            progress(f"{facts.name}: {short}")
            report.notes.append(f"{facts.name}: {short}")
    with launch(run.repo, tritonserver=run.tritonserver, model_control="explicit") as server:
        for facts, served in entries:
            config = served.config
            assert config is not None, "facts_from_repository reads only models with a config"
            progress(served.describe())
            levels = list(run.concurrency) or default_concurrency(facts)
            tune = ModelTune(facts.name, levels, run.p99_ms)
            report.models.append(tune)
            if not facts.tunable:
                tune.skipped = facts.why_not
                report.notes.append(f"{facts.name}: not tuned: {facts.why_not}")
                continue
            tune.ceiling = measure_ceiling(run.repo, facts.name, seconds=run.ceiling_s) if run.ceiling_s > 0 else None
            if tune.ceiling is not None:
                progress(f"{facts.name}: {tune.ceiling.describe()}")
            inputs, datatypes, batch = _request(served, facts)
            progress(f"{facts.name}: concurrency {', '.join(map(str, levels))}, budget {run.budget_s:g} s")
            with Measurer(server.grpc_url, facts.name, config, inputs, datatypes, batch=batch, levels=levels,
                          windows=run.windows, engine=engine, perf_analyzer=binary, repo=run.repo,
                          timeout_s=run.timeout_s) as measurer:

                def measure(setting: Setting, measurer: Measurer = measurer, name: str = facts.name) -> Candidate:
                    candidate = measurer.measure(setting, run.p99_ms)
                    progress(_line(name, candidate))
                    return candidate

                tolerance = run.windows.tolerance
                tune.search = exhaustive(facts, measure, budget_s=run.budget_s, tolerance=tolerance) \
                    if run.strategy == "grid" else hill_climb(facts, measure, budget_s=run.budget_s,
                                                              tolerance=tolerance)
            if not tune.measured:
                report.notes.append(f"{facts.name}: no candidate could be measured")
            elif tune.search.kept:
                report.notes.append(f"{facts.name}: {KEPT}")
            unsettled = sum(not c.settled for c in tune.search.candidates if c.error is None)
            if unsettled:
                report.notes.append(
                    f"{facts.name}: {unsettled} of {len(tune.search.candidates)} figures unsettled (their windows "
                    f"did not agree within {tolerance:.0%} in {run.windows.settle_s:g} s): the machine is too noisy "
                    "to tell them apart; tune on a quieter machine, or give --settle more seconds")
    report.load_after = load_average()
    return report


def _too_short(run: TuneRun, levels: list[int]) -> str:
    """What to say up front when ``--budget`` cannot hold even the baseline's settled measurement ('' when it can)."""
    least = len(levels) * run.windows.least_s
    if run.budget_s >= least:
        return ""
    return (f"--budget {run.budget_s:g} s is too short for even the baseline to settle (at least {least:g} s: a "
            f"{run.windows.warmup_s:g} s warmup and {run.windows.agree} windows of {run.windows.window_s:g} s per "
            "concurrency): only the baseline is measured, and nothing is written")


def _line(model: str, candidate: Candidate) -> str:
    s = candidate.setting
    what = (f"{model}: {s.instance_count} x {s.kind}, delay {s.max_queue_delay_us} us, preferred "
            f"{list(s.preferred_batch_size) or 'none'}")
    if candidate.error:
        return f"{what}: {candidate.error}"
    flag = "" if candidate.settled else " (unsettled)"
    return f"{what}: {candidate.score:.1f}/s +-{candidate.noise:.1%}{flag}, p99 {candidate.p99_ms:.1f} ms"


def models_to_write(report: TuneReport) -> Sequence[ModelTune]:
    """The models whose best is measured and beat the generated setting beyond the noise (what ``--write`` keeps)."""
    return [m for m in report.models if m.measured and m.search is not None and not m.search.kept]
