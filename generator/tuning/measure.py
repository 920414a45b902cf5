"""One candidate measured on a running server: loaded with its config override, put under load, judged stable.

Windows repeat until their throughputs agree within :data:`TOLERANCE` (or the window budget runs out); their spread
is the noise reported beside the throughput (docs/tune.md, "How a candidate is measured").
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from generator.errors import GenRepoError, Problem, one_line
from generator.triton.connection import Connection
from generator.triton.proto import model_config_pb2
from generator.tuning.loadgen import Completions, LoadGenerator
from generator.tuning.space import Setting, candidate_config

__all__ = ["TOLERANCE", "Candidate", "LevelResult", "Measurer", "Windows", "completion_rate", "percentile", "spread"]

#: The relative spread within which a measurement's windows must agree (and the least gain the search acts on when
#: the measured noise is smaller): repeats of one config here differed by up to 8% with single 8 s runs.
TOLERANCE = 0.05
#: Seconds one load (a candidate's config override) may take: instances start, the python backend's stubs spawn.
LOAD_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class Windows:
    """How one measurement is taken: warmup, window length, how many must agree, at most how many, tolerance."""

    window_s: float = 1.0
    warmup_s: float = 0.5
    agree: int = 3
    max_windows: int = 8
    tolerance: float = TOLERANCE


@dataclass(slots=True)
class LevelResult:
    """A candidate at one concurrency: inferences/s with their relative noise, p50/p99 latency, windows taken."""

    concurrency: int
    throughput: float = 0.0
    throughput_noise: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    windows: int = 0
    errors: int = 0
    first_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The tune report's result form."""
        return {"concurrency": self.concurrency, "throughput": round(self.throughput, 2),
                "throughput_noise": round(self.throughput_noise, 4), "p50_ms": round(self.p50_ms, 3),
                "p99_ms": round(self.p99_ms, 3), "windows": self.windows}


@dataclass(slots=True)
class Candidate:
    """A setting and what it measured; ``score`` is the mean throughput over the concurrencies (0 when it failed)."""

    setting: Setting
    results: list[LevelResult] = field(default_factory=list)
    score: float = 0.0
    within_budget: bool = True
    error: str | None = None

    @property
    def noise(self) -> float:
        """The largest relative noise of its levels."""
        return max((r.throughput_noise for r in self.results), default=0.0)

    @property
    def p99_ms(self) -> float:
        """The worst p99 latency of its levels."""
        return max((r.p99_ms for r in self.results), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        """The tune report's CANDIDATE form."""
        out = {**self.setting.to_dict(), "results": [r.to_dict() for r in self.results],
               "score": round(self.score, 2), "within_budget": self.within_budget}
        if self.error is not None:
            out["error"] = self.error  # Triton refused the config, or no request succeeded
        return out


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def completion_rate(done: Completions, elapsed: float) -> float:
    """Requests per second of closed-loop clients: the sum of each client's rate over its own completions.

    A client completing ``k`` requests between its first and last completion ran ``k - 1`` whole cycles in that
    span; summing those rates does not depend on where the window cut a batch (a plain count over the window
    jumps by a whole batch when one completes just inside or outside it). Where a client completed fewer than 2
    requests (requests longer than the window) the plain count over ``elapsed`` is the rate.
    """
    firsts: dict[int, float] = {}
    lasts: dict[int, float] = {}
    counts: dict[int, int] = {}
    for client, end in zip(done.clients, done.ends, strict=True):
        firsts[client] = min(firsts.get(client, end), end)
        lasts[client] = max(lasts.get(client, end), end)
        counts[client] = counts.get(client, 0) + 1
    if not counts or any(n < 2 or lasts[c] <= firsts[c] for c, n in counts.items()):
        return len(done.ends) / elapsed if elapsed > 0 else 0.0
    return sum((n - 1) / (lasts[c] - firsts[c]) for c, n in counts.items())


def spread(values: Sequence[float]) -> float:
    """Relative spread: (max - min) / mean (inf for a zero mean)."""
    mean = sum(values) / len(values)
    return (max(values) - min(values)) / mean if mean > 0 else math.inf


class Measurer:
    """Measures candidates of one model on one server: the built-in load or perf_analyzer, one per concurrency.

    ``inputs`` is the request every client sends (``batch`` items); ``engine`` is ``loop`` or ``perf_analyzer``
    (with ``perf_analyzer``: the binary, and ``repo`` whose contracts give its arguments).
    """

    def __init__(self, url: str, model: str, base_config: model_config_pb2.ModelConfig,
                 inputs: Mapping[str, np.ndarray[Any, Any]], datatypes: Mapping[str, str], *, batch: int,
                 levels: Sequence[int], windows: Windows, engine: str = "loop", perf_analyzer: str | None = None,
                 repo: Path | None = None, timeout_s: float = 30.0) -> None:
        self.url, self.model, self.base_config = url, model, base_config
        self.inputs, self.datatypes, self.batch = dict(inputs), dict(datatypes), batch
        self.levels, self.windows, self.engine = list(levels), windows, engine
        self._perf_analyzer, self._repo, self._timeout_s = perf_analyzer, repo, timeout_s
        self._generators: dict[int, LoadGenerator] = {}
        self._connection = Connection(url, "grpc", timeout_s)

    def close(self) -> None:
        """End the load workers and the connection; unload the model."""
        for generator in self._generators.values():
            generator.close()
        self._generators.clear()
        with contextlib.suppress(Exception):
            self._connection.unload(self.model)
        self._connection.close()

    def __enter__(self) -> Measurer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def load(self, setting: Setting) -> None:
        """Load (or reload) the model with the candidate's config override."""
        from google.protobuf import json_format

        config = candidate_config(self.base_config, setting)
        self._connection.load(self.model, LOAD_TIMEOUT_S, config=json.dumps(json_format.MessageToDict(config)))

    def measure(self, setting: Setting, p99_budget_ms: float | None = None) -> Candidate:
        """Load ``setting``, measure it at every concurrency; a candidate Triton refuses is one with ``error``."""
        candidate = Candidate(setting)
        try:
            self.load(setting)
        except Exception as error:  # tritonclient's InferenceServerException: the server refused this config
            candidate.error = f"load failed: {one_line(error)}"
            return candidate
        for level in self.levels:
            result = self._perf_analyzer_level(level) if self.engine == "perf_analyzer" else self._loop_level(level)
            candidate.results.append(result)
            if result.throughput <= 0:
                candidate.error = f"no request succeeded at concurrency {level}: {result.first_error or 'no answer'}"
        if candidate.error is None:
            candidate.score = sum(r.throughput for r in candidate.results) / len(candidate.results)
            candidate.within_budget = p99_budget_ms is None or candidate.p99_ms <= p99_budget_ms
        return candidate

    def _generator(self, level: int) -> LoadGenerator:
        if level not in self._generators:
            self._generators[level] = LoadGenerator(self.url, self.model, self.inputs, self.datatypes,
                                                    concurrency=level, timeout_s=self._timeout_s)
        return self._generators[level]

    def _loop_level(self, level: int) -> LevelResult:
        w = self.windows
        load = self._generator(level)
        load.start()
        time.sleep(w.warmup_s)
        load.take()
        rates: list[float] = []
        spans: list[Completions] = []
        result = LevelResult(level)
        began = time.monotonic()
        while len(rates) < w.max_windows:
            time.sleep(w.window_s)
            done = load.take()
            now = time.monotonic()
            rates.append(completion_rate(done, now - began) * self.batch)
            spans.append(done)
            began = now
            result.errors += done.errors
            result.first_error = result.first_error or done.first_error
            if len(rates) >= w.agree and spread(rates[-w.agree:]) <= w.tolerance:
                break
        load.pause()
        # Agreeing windows: the last ``agree``; otherwise every window, and their (larger) spread is the noise.
        agreed = len(rates) >= w.agree and spread(rates[-w.agree:]) <= w.tolerance
        keep = w.agree if agreed else len(rates)
        kept = rates[-keep:]
        latencies = [v for span in spans[-keep:] for v in span.latencies_ms]
        result.throughput = sum(kept) / len(kept)
        result.throughput_noise = spread(kept) if result.throughput > 0 else 0.0
        result.p50_ms, result.p99_ms = percentile(latencies, 50), percentile(latencies, 99)
        result.windows = len(rates)
        return result

    def _perf_analyzer_level(self, level: int) -> LevelResult:
        """perf_analyzer at one concurrency with gen-repo's arguments and the windows' stability rule."""
        from generator.serving.perf_analyzer import run_perf_analyzer
        from generator.serving.perf_config import perf_analyzer_args, perf_config_files
        from generator.serving.perf_models import models_from_repository, variants

        if self._perf_analyzer is None or self._repo is None:
            raise GenRepoError([Problem("perf_analyzer", "", "perf_analyzer needs its binary and the repository")])
        import tempfile

        (perf_model,) = models_from_repository(self._repo, [self.model])
        variant = {v.name: v for v in variants(perf_model)}["opt"]
        w = self.windows
        with tempfile.TemporaryDirectory(prefix="gen-repo-tune-") as tmp:
            files = perf_config_files([perf_model], str(self._repo), url=self.url, protocol="grpc")
            data = Path(tmp) / "input_data.json"
            data.write_text(files[f"{self.model}/input_data.opt.json"], encoding="utf-8")
            args = [*perf_analyzer_args(perf_model, variant, str(data), url=self.url, protocol="grpc",
                                        concurrency=(level, level, 1)),
                    "--stability-percentage", f"{w.tolerance * 100:g}", "--max-trials", str(w.max_windows)]
            rows = run_perf_analyzer(self._perf_analyzer, args, duration_s=w.window_s)
        row = rows[0] if rows else {"throughput": 0.0, "p50_ms": 0.0, "p99_ms": 0.0}
        return LevelResult(level, throughput=row["throughput"], throughput_noise=w.tolerance, p50_ms=row["p50_ms"],
                           p99_ms=row["p99_ms"], windows=w.agree)
