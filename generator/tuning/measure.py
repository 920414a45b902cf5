"""One candidate measured on a running server: loaded with its config override, put under load, judged stable.

Loaded through Triton's repository API with its whole config as an override (never a server restart), settings read
back, then measured by :func:`generator.serving.loadgen.measure` or perf_analyzer.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from generator.errors import GenRepoError, Problem, one_line
from generator.serving.loadgen import LoadGenerator, Windows, client_processes, measure
from generator.triton.connection import Connection
from generator.triton.proto import model_config_pb2
from generator.tuning.space import Setting, candidate_config, loaded_preferred

__all__ = ["Candidate", "LevelResult", "Measurer", "applied_setting"]

#: Seconds one load (a candidate's config override) may take: instances start, the python backend's stubs spawn.
LOAD_TIMEOUT_S = 120.0


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
    #: Whether the windows agreed within the tolerance (False: *unsettled*, the noise is above it).
    settled: bool = True
    window_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The tune report's result form."""
        return {"concurrency": self.concurrency, "throughput": round(self.throughput, 2),
                "throughput_noise": round(self.throughput_noise, 4), "p50_ms": round(self.p50_ms, 3),
                "p99_ms": round(self.p99_ms, 3), "windows": self.windows, "settled": self.settled,
                "window_s": round(self.window_s, 3)}


@dataclass(slots=True)
class Candidate:
    """A setting and what it measured; ``score`` is the mean throughput over the concurrencies (0 when it failed)."""

    setting: Setting
    results: list[LevelResult] = field(default_factory=list)
    score: float = 0.0
    within_budget: bool = True
    error: str | None = None
    #: The settings the server reports it loaded (None: not read, the load failed).
    applied: Setting | None = None

    @property
    def settled(self) -> bool:
        """Whether every level's windows agreed within the tolerance."""
        return all(r.settled for r in self.results)

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
               "score": round(self.score, 2), "within_budget": self.within_budget, "settled": self.settled,
               "applied": None if self.applied is None else self.applied.to_dict()}
        if self.error is not None:
            out["error"] = self.error  # Triton refused the config, or no request succeeded
        return out


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
        self._generators: dict[tuple[int, int], LoadGenerator] = {}
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

    def load(self, setting: Setting) -> Setting:
        """Load (or reload) the model with the candidate's config override; the settings the server reports."""
        from google.protobuf import json_format

        config = candidate_config(self.base_config, setting)
        self._connection.load(self.model, LOAD_TIMEOUT_S, config=json.dumps(json_format.MessageToDict(config)))
        return applied_setting(self._connection.config(self.model))

    def measure(self, setting: Setting, p99_budget_ms: float | None = None) -> Candidate:
        """Load ``setting``, measure it at every concurrency; a candidate Triton refuses is one with ``error``."""
        candidate = Candidate(setting)
        try:
            candidate.applied = self.load(setting)
        except Exception as error:  # tritonclient's InferenceServerException: the server refused this config
            candidate.error = f"load failed: {one_line(error)}"
            return candidate
        if not _as_asked(candidate.applied, setting):  # measuring it would credit the setting with another's figure
            candidate.error = f"the server loaded {candidate.applied}, not the candidate's settings"
            return candidate
        for level in self.levels:
            result = self._perf_analyzer_level(level) if self.engine == "perf_analyzer" else \
                self._loop_level(level, setting.instance_count)
            candidate.results.append(result)
            if result.throughput <= 0:
                candidate.error = f"no request succeeded at concurrency {level}: {result.first_error or 'no answer'}"
        if candidate.error is None:
            candidate.score = sum(r.throughput for r in candidate.results) / len(candidate.results)
            candidate.within_budget = p99_budget_ms is None or candidate.p99_ms <= p99_budget_ms
        return candidate

    def _generator(self, level: int, instances: int) -> LoadGenerator:
        """The load at ``level`` beside ``instances`` instances (reused while the process count stays the same)."""
        key = (level, client_processes(level, instances))
        if key not in self._generators:
            self._generators[key] = LoadGenerator(self.url, self.model, self.inputs, self.datatypes,
                                                  concurrency=level, timeout_s=self._timeout_s,
                                                  server_cores=instances)
        return self._generators[key]

    def _loop_level(self, level: int, instances: int) -> LevelResult:
        done = measure(self._generator(level, instances), self.windows, batch=self.batch)
        return LevelResult(level, done.throughput, done.noise, done.p50_ms or 0.0, done.p99_ms or 0.0, done.windows,
                           done.errors, done.first_error, done.settled, done.window_s)

    def _perf_analyzer_level(self, level: int) -> LevelResult:
        """perf_analyzer at one concurrency with gen-repo's arguments and the windows' stability rule."""
        from generator.serving.perf_analyzer import run_perf_analyzer

        if self._perf_analyzer is None or self._repo is None:
            raise GenRepoError([Problem("perf_analyzer", "", "perf_analyzer needs its binary and the repository")])
        w = self.windows
        _, rows = run_perf_analyzer(
            self._perf_analyzer, self._repo, self.model, self.url, protocol="grpc", shape="opt", concurrency=level,
            duration_s=w.window_s,
            extra=["--stability-percentage", f"{w.tolerance * 100:g}", "--max-trials", str(w.max_windows)])
        if not rows:
            return LevelResult(level, windows=w.agree, settled=False)
        return LevelResult(level, throughput=rows[0].throughput, throughput_noise=w.tolerance,
                           p50_ms=rows[0].p50_ms, p99_ms=rows[0].p99_ms, windows=w.agree, window_s=w.window_s)


def applied_setting(config: model_config_pb2.ModelConfig) -> Setting:
    """The tuned settings a loaded config holds (instances in all, the first group's kind, delay, preferred sizes)."""
    groups = list(config.instance_group)
    kind = model_config_pb2.ModelInstanceGroup.Kind.Name(groups[0].kind) if groups else "KIND_AUTO"
    return Setting(sum(int(g.count) for g in groups) or 1, kind,
                   int(config.dynamic_batching.max_queue_delay_microseconds), loaded_preferred(config))


def _as_asked(applied: Setting, setting: Setting) -> bool:
    """Whether the server loaded ``setting`` (KIND_AUTO is whatever kind the server resolved it to)."""
    kind = applied.kind if setting.kind == "KIND_AUTO" else setting.kind
    return applied == Setting(setting.instance_count, kind, setting.max_queue_delay_us, setting.preferred_batch_size)
