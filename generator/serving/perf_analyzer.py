"""perf_analyzer: whether a real binary runs here, and the one runner of it with gen-repo's arguments.

PyPI's ``perf-analyzer`` 0.1.0 is a placeholder without a binary; :func:`find_perf_analyzer` says why one cannot be
used, and :func:`run_perf_analyzer` measures a model (``perf`` and ``tune`` both call it) and reads its CSV report.
"""

from __future__ import annotations

import csv
import importlib.metadata
import io
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from generator.bounded import read_text
from generator.errors import GenRepoError, Problem

__all__ = ["PerfAnalyzerStatus", "PerfAnalyzerRow", "find_perf_analyzer", "run_perf_analyzer"]


@dataclass(frozen=True, slots=True)
class PerfAnalyzerStatus:
    """Whether a working perf_analyzer binary exists; ``reason`` says why not (or which one runs)."""

    path: str | None
    usable: bool
    reason: str


def _glibc() -> str:
    import platform

    lib, version = platform.libc_ver()
    return f"{lib} {version}" if lib else "an unknown C library"


def find_perf_analyzer(explicit: str | None = None) -> PerfAnalyzerStatus:
    """Find a perf_analyzer that actually runs (``--help`` exits 0 within 10 s).

    Detects PyPI's ``perf-analyzer`` 0.1.0, a placeholder package without a binary that pip installs where the real
    wheels (manylinux_2_38) do not fit this machine's glibc, and says so.
    """
    path = explicit or shutil.which("perf_analyzer")
    try:
        installed = importlib.metadata.version("perf-analyzer")
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if path is None:
        if installed == "0.1.0":
            return PerfAnalyzerStatus(
                None, False,
                "the installed PyPI perf-analyzer is the 0.1.0 placeholder without a binary (the real wheels need "
                f"glibc 2.38; this machine has {_glibc()})",
            )
        return PerfAnalyzerStatus(None, False, "no perf_analyzer on PATH")
    try:
        done = subprocess.run([path, "--help"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return PerfAnalyzerStatus(path, False, f"{path} does not run ({error})")
    # perf_analyzer --help exits 0 or 1 depending on version; a loader failure (missing glibc symbols) exits 127.
    text = (done.stdout + done.stderr).decode("utf-8", "replace")
    if "perf_analyzer" not in text.lower() and "concurrency" not in text.lower():
        first = text.strip().splitlines()[0] if text.strip() else f"exit code {done.returncode}"
        return PerfAnalyzerStatus(path, False, f"{path} does not run: {first}")
    return PerfAnalyzerStatus(path, True, f"perf_analyzer at {path}")


@dataclass(frozen=True, slots=True)
class PerfAnalyzerRow:
    """One concurrency of a perf_analyzer report: inferences/s and p50/p99 latency (ms)."""

    concurrency: int
    throughput: float
    p50_ms: float
    p99_ms: float


def run_perf_analyzer(
    binary: str, repo: Path | str, model: str, url: str, *, protocol: str, shape: str, concurrency: int,
    duration_s: float, extra: Sequence[str] = (),
) -> tuple[int, list[PerfAnalyzerRow]]:
    """(batch size, rows): perf_analyzer on ``model`` with gen-repo's arguments and input data for ``shape``.

    ``extra`` arguments follow gen-repo's (tune's stability rule); the window is ``duration_s``.
    """
    from generator.serving.perf_config import perf_analyzer_args, perf_config_files
    from generator.serving.perf_models import models_from_repository, variants

    (perf_model,) = models_from_repository(repo, [model])
    variant = {v.name: v for v in variants(perf_model)}[shape]
    files = perf_config_files([perf_model], str(repo), url=url, protocol=protocol)
    with tempfile.TemporaryDirectory(prefix="gen-repo-perf-") as tmp:
        data = Path(tmp) / "input_data.json"
        data.write_text(files[f"{model}/input_data.{shape}.json"], encoding="utf-8")
        report = Path(tmp) / "report.csv"
        args = perf_analyzer_args(perf_model, variant, str(data), url=url, protocol=protocol,
                                  concurrency=(concurrency, concurrency, 1))
        command = [binary, *args, *extra, "--measurement-interval", str(int(duration_s * 1000)), "-f", str(report)]
        done = subprocess.run(command, capture_output=True, timeout=max(60.0, duration_s * 20), check=False)
        if done.returncode != 0 or not report.is_file():
            tail = (done.stdout + done.stderr).decode("utf-8", "replace").strip().splitlines()[-5:]
            raise GenRepoError([Problem(binary, "", f"perf_analyzer failed ({done.returncode}): {' | '.join(tail)}")])
        rows = list(csv.DictReader(io.StringIO(read_text(report))))
    return variant.batch_size, [
        PerfAnalyzerRow(int(float(row["Concurrency"])), float(row["Inferences/Second"]),
                        float(row["p50 latency"]) / 1000.0, float(row["p99 latency"]) / 1000.0)
        for row in rows
    ]
