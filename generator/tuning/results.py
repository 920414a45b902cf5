"""A tune run's plain data: per model the search's candidates, and the run's machine; the ``--json`` form.

The JSON form is the tune report ``gen-repo report`` charts (``schemas/report_tune.schema.json``):
``{"kind": "tune", "repository", "engine", "hardware", "load", "load_after", "tolerance", "models": [...]}``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from generator.serving.ceiling import Ceiling, fraction
from generator.tuning.search import SearchResult

__all__ = ["ModelTune", "TuneReport", "describe_hardware", "load_average"]


@dataclass(slots=True)
class ModelTune:
    """One model's tuning: the concurrencies, the latency budget and the search; ``skipped`` why it was not tuned."""

    model: str
    concurrency: list[int]
    p99_budget_ms: float | None
    search: SearchResult | None = None
    skipped: str = ""
    #: The model's runtime alone on this machine (:mod:`generator.serving.ceiling`); None where not measured.
    ceiling: Ceiling | None = None

    @property
    def measured(self) -> bool:
        """Whether a candidate of this model could be measured (the best has no error)."""
        return self.search is not None and self.search.best.error is None

    def to_dict(self) -> dict[str, Any]:
        """The report's model entry (a skipped model has no candidates)."""
        assert self.search is not None
        return {"model": self.model, "concurrency": list(self.concurrency), "p99_budget_ms": self.p99_budget_ms,
                "baseline": self.search.baseline.to_dict(), "best": self.search.best.to_dict(),
                "candidates": [c.to_dict() for c in self.search.candidates], "stopped": self.search.stopped,
                "seconds": round(self.search.seconds, 2), "kept": self.search.kept,
                "unsettled": sum(not c.settled for c in self.search.candidates if c.error is None),
                **self._ceiling_fields()}

    def _ceiling_fields(self) -> dict[str, Any]:
        """``ceiling``, and the baseline's and best's fractions of it (absent where no ceiling was measured)."""
        if self.ceiling is None or self.search is None:
            return {}
        return {"ceiling": self.ceiling.to_dict(),
                "baseline_of_ceiling": fraction(self.search.baseline.score, self.ceiling),
                "best_of_ceiling": fraction(self.search.best.score, self.ceiling)}


@dataclass(slots=True)
class TuneReport:
    """What one ``gen-repo tune`` measured, where and with which engine."""

    repository: str
    engine: str
    hardware: str
    load: list[float]
    tolerance: float
    models: list[ModelTune] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: The load averages when the run ended (``load``: when it started): what the machine did beside the measurements.
    load_after: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The tune report (models that were skipped or never measured are left out; ``notes`` say why)."""
        out = {"kind": "tune", "repository": self.repository, "engine": self.engine, "hardware": self.hardware,
               "load": [round(v, 2) for v in self.load], "tolerance": self.tolerance,
               "models": [m.to_dict() for m in self.models if m.search is not None]}
        if self.load_after:
            out["load_after"] = [round(v, 2) for v in self.load_after]
        return out


def load_average() -> list[float]:
    """The machine's 1, 5 and 15 minute load averages (zeros where the OS has none)."""
    try:
        return [float(v) for v in os.getloadavg()]
    except OSError:
        return [0.0, 0.0, 0.0]


def describe_hardware() -> str:
    """``"<n> CPUs (<model>), <GPUs or no GPU>"``: what the measurements hold for."""
    from generator.gpu import detect_gpus

    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "")
    except OSError:
        pass
    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0
    gpus = detect_gpus()
    gpu_text = ", ".join(g.name for g in gpus) if gpus else "no GPU"
    return f"{count} CPUs" + (f" ({cpu})" if cpu else "") + f", {gpu_text}"
