"""A smoke run's results as plain data: the checks, each result, the report and its exit code.

What ``gen-repo smoke`` prints and the JUnit, JSON, Markdown and HTML reports are made from; the checks themselves:
:mod:`generator.serving.smoke`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from generator.errors import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE

__all__ = ["CHECKS", "SERVER", "STATUSES", "CheckResult", "SmokeOptions", "SmokeReport"]

#: Checks in the order they run for each model.
CHECKS = ("ready", "config", "inference", "reference", "reject_batch", "reject_shape", "burst")
STATUSES = ("passed", "failed", "skipped", "error")

#: Pseudo model name for results about the server itself (unreachable, nothing to check).
SERVER = "(server)"


@dataclass(frozen=True, slots=True)
class SmokeOptions:
    """How hard to check.

    ``timeout_s`` bounds every network call; ``load_timeout_s`` a model load through the repository API. ``rtol`` /
    ``atol`` (when set) replace the dtype-aware defaults for every output. ``perf`` adds throughput and latency
    figures to the burst's details.
    """

    timeout_s: float = 10.0
    load_timeout_s: float = 120.0
    burst: int = 64
    concurrency: int = 16
    rtol: float | None = None
    atol: float | None = None
    perf: bool = False
    seed: int = 0


@dataclass(slots=True)
class CheckResult:
    """One check of one model: ``status`` is ``passed``, ``failed``, ``skipped`` or ``error`` (could not run)."""

    model: str
    check: str
    status: str
    duration_s: float = 0.0
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (plain types only)."""
        return {
            "model": self.model,
            "check": self.check,
            "status": self.status,
            "duration_s": round(self.duration_s, 4),
            "message": self.message,
            "details": _jsonable(self.details),
        }


@dataclass(slots=True)
class SmokeReport:
    """Every result of a smoke run, and where it ran."""

    results: list[CheckResult]
    server_url: str
    protocol: str
    reachable: bool = True
    #: Non-empty when the server stopped answering during the run: where and why.
    server_lost: str = ""

    @property
    def exit_code(self) -> int:
        """0 when every check passed or was skipped, 1 when one failed or errored, 3 when the server was unreachable."""
        if not self.reachable:
            return EXIT_UNREACHABLE
        if any(r.status in ("failed", "error") for r in self.results):
            return EXIT_FAILED
        return EXIT_OK

    @property
    def models(self) -> list[str]:
        """Model names in the order they were checked."""
        return list(dict.fromkeys(r.model for r in self.results))

    def counts(self) -> dict[str, int]:
        """Count the results per status (every status present, zero when none)."""
        return {status: sum(r.status == status for r in self.results) for status in STATUSES}

    def for_model(self, model: str) -> dict[str, CheckResult]:
        """Return the results of one model, by check name."""
        return {r.check: r for r in self.results if r.model == model}

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``--json``)."""
        return {
            "format": "gen-repo-smoke/1",
            "server_url": self.server_url,
            "protocol": self.protocol,
            "reachable": self.reachable,
            "server_lost": self.server_lost,
            "exit_code": self.exit_code,
            "counts": self.counts(),
            "results": [r.to_dict() for r in self.results],
        }


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)
