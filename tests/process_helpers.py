"""Running ``gen-repo`` in a real process with a time limit, a memory ceiling, and its own peak memory measured."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: Address space a command may map: a safety net, so that a regression that reads without bound fails the test with
#: a MemoryError instead of exhausting the (shared) machine. Far above what any command here needs.
ADDRESS_SPACE_CEILING = 6 << 30


def _ceiling() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_CEILING, ADDRESS_SPACE_CEILING))


def run_cli(args: list[str], env: dict[str, str] | None = None, timeout: float = 120.0) -> tuple[int, str, int]:
    """``gen-repo ARGS``: exit code, stdout and stderr together, and the process's peak memory (RSS, MiB).

    The peak comes from ``os.wait4`` on this child alone (not RUSAGE_CHILDREN, which keeps the largest of every
    child the test process ever had). A command still running after ``timeout`` seconds is killed: exit -9.
    """
    proc = subprocess.Popen([sys.executable, "-m", "generator.cli", *args], cwd=REPO, env={**os.environ, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=_ceiling)
    assert proc.stdout is not None
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        output = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
        proc.stdout.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, output, usage.ru_maxrss // 1024
