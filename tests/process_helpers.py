"""Running ``gen-repo`` in a real process with a time limit, a memory ceiling, and its own peak memory measured."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: Address space a command may map: a safety net, so that a regression that reads without bound fails the test with
#: a MemoryError instead of exhausting the (shared) machine. Far above what any command here needs.
ADDRESS_SPACE_CEILING = 6 << 30


#: Runs the command as its own child and reports that child's peak RSS. The test process cannot measure its direct
#: child: a forked child's peak RSS counts the parent's pages before exec (pytest with torch loaded is hundreds of
#: MiB), so the figure would follow whatever the suite loaded earlier. This small launcher's child starts from the
#: launcher's few MiB instead. It applies the address-space ceiling, which its child inherits.
_LAUNCHER = """
import os, resource, signal, subprocess, sys
limit, peak_file = int(sys.argv[1]), sys.argv[2]
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
child = subprocess.Popen(sys.argv[3:])
_, status, usage = os.wait4(child.pid, 0)
with open(peak_file, "w") as out:
    out.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


def gen_repo_script() -> str:
    """The ``gen-repo`` console script of the running interpreter's environment."""
    import shutil

    found = shutil.which("gen-repo", path=str(Path(sys.executable).parent))
    assert found, "the gen-repo console script is not installed"
    return found


def run_cli(args: list[str], env: dict[str, str] | None = None, timeout: float = 120.0) -> tuple[int, str, int]:
    """``gen-repo ARGS``: exit code, stdout and stderr together, and the command's peak memory (RSS, MiB).

    The peak is the command's own (see ``_LAUNCHER``). A command still running after ``timeout`` seconds is killed
    with its launcher: exit -9.
    """
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        peak_file = os.path.join(scratch, "peak")
        proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, str(ADDRESS_SPACE_CEILING), peak_file,
             sys.executable, "-m", "generator.cli", *args],
            cwd=REPO, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )
        assert proc.stdout is not None
        timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, 9))
        timer.start()
        try:
            output = proc.stdout.read()
            proc.wait()
        finally:
            timer.cancel()
            proc.stdout.close()
        peak_kib = int(Path(peak_file).read_text() or 0) if os.path.exists(peak_file) else 0
    return proc.returncode, output, peak_kib // 1024
