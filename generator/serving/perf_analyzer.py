"""perf_analyzer: whether a real binary runs here, and one run of it with gen-repo's arguments.

PyPI's ``perf-analyzer`` 0.1.0 is a placeholder without a binary; :func:`find_perf_analyzer` says why one cannot be
used, and :func:`run_perf_analyzer` reads the rows of its CSV report.
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

__all__ = ["PerfAnalyzerStatus", "find_perf_analyzer", "run_perf_analyzer"]


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
                f"glibc 2.38; this machine has {_glibc()}); using the built-in load loop",
            )
        return PerfAnalyzerStatus(None, False, "no perf_analyzer on PATH; using the built-in load loop")
    try:
        done = subprocess.run([path, "--help"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return PerfAnalyzerStatus(path, False, f"{path} does not run ({error}); using the built-in load loop")
    # perf_analyzer --help exits 0 or 1 depending on version; a loader failure (missing glibc symbols) exits 127.
    text = (done.stdout + done.stderr).decode("utf-8", "replace")
    if "perf_analyzer" not in text.lower() and "concurrency" not in text.lower():
        first = text.strip().splitlines()[0] if text.strip() else f"exit code {done.returncode}"
        return PerfAnalyzerStatus(path, False, f"{path} does not run: {first}; using the built-in load loop")
    return PerfAnalyzerStatus(path, True, f"perf_analyzer at {path}")


def run_perf_analyzer(
    binary: str, args: Sequence[str], *, duration_s: float, timeout_s: float | None = None
) -> list[dict[str, float]]:
    """Run perf_analyzer with ``args`` and a measurement window of ``duration_s``; one row per concurrency.

    Rows carry ``concurrency``, ``throughput`` (inferences/s), ``p50_ms``, ``p99_ms`` from its ``-f`` CSV.
    """
    with tempfile.TemporaryDirectory(prefix="gen-repo-perf-") as tmp:
        report = Path(tmp) / "report.csv"
        command = [binary, *args, "--measurement-interval", str(int(duration_s * 1000)), "-f", str(report)]
        done = subprocess.run(
            command, capture_output=True, timeout=timeout_s or max(60.0, duration_s * 20), check=False
        )
        if done.returncode != 0 or not report.is_file():
            tail = (done.stdout + done.stderr).decode("utf-8", "replace").strip().splitlines()[-5:]
            raise GenRepoError([Problem(binary, "", f"perf_analyzer failed ({done.returncode}): {' | '.join(tail)}")])
        rows = list(csv.DictReader(io.StringIO(read_text(report))))
    return [
        {
            "concurrency": float(row["Concurrency"]),
            "throughput": float(row["Inferences/Second"]),
            "p50_ms": float(row["p50 latency"]) / 1000.0,
            "p99_ms": float(row["p99 latency"]) / 1000.0,
        }
        for row in rows
    ]
