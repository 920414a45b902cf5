"""Output sinks (issue 44): every file option that writes takes a regular file or a new name, checked before the work.

Generated over every writing option of every command (each option typed ``OutputFile``, found by walking the CLI):
a FIFO, a folder, a character device (``/dev/full``), a name in a missing folder and, for the appended
``--summary-md``, a symlink are each refused at once (exit 2, the option named), nothing blocks (a FIFO with no
reader would block an ``open``), and nothing is written. A full disk after the work (``build --summary-md`` with the
summary at the process's file-size limit: the append fails with EFBIG as on ENOSPC) exits 1 naming what was written.
``report`` run with an empty HOME leaves it empty (matplotlib's cache goes to a temporary folder).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator.cli import LazyGroup, main
from generator.cli._common import OutputFile

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "specs" / "mlp.graphspec.json"
MANIFEST = ROOT / "examples" / "gen-repo.yaml"


def _base(command: str, repo: Path, scratch: Path) -> list[str]:
    """Arguments that get ``command`` past its own parsing, so only the planted sink can stop it."""
    return {
        "init": [str(SPEC)],
        "build": [str(MANIFEST), "-o", str(scratch / "built"), "--allow-code", "--target", "python"],
        "diff": [str(repo), str(repo)],
        "lint": [str(repo)],
        "perf": ["--url", "127.0.0.1:1", "--timeout", "1"],
        "report": [str(repo)],
        "smoke": ["--url", "127.0.0.1:1", "--timeout", "1"],
        "tune": [str(repo)],
        "verify": [str(repo)],
    }[command]


def _sinks() -> list[tuple[str, str, bool]]:
    """(command, option, appended) for every option of every command that names a file the command writes."""
    group = LazyGroup()
    ctx = main.make_context("gen-repo", ["--help"], resilient_parsing=True)
    out = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        out += [(name, p.opts[-1] if p.opts[-1].startswith("--") else p.opts[0], p.type.append)
                for p in command.params if isinstance(p.type, OutputFile)]
    return out


SINKS = _sinks()
#: What can be planted at a sink; a symlink only where it is refused (an appended file: a whole-file output replaces
#: a link, never following it, as tests/test_atomic_write.py shows).
KINDS = ("fifo", "folder", "device", "missing-folder", "symlink")
CASES = [(c, o, a, k) for c, o, a in SINKS for k in KINDS if a or k != "symlink"]


def test_every_writing_option_is_an_output_file() -> None:
    """The generated test below reaches every option that writes a file: none is a plain click.Path any more."""
    assert {(c, o) for c, o, _ in SINKS} == {
        ("init", "--output"), ("build", "--summary-md"), ("diff", "--markdown"), ("diff", "--summary-md"),
        ("lint", "--summary-md"), ("perf", "--json"), ("perf", "--summary-md"), ("report", "--output"),
        ("smoke", "--json"),
        ("smoke", "--junit-xml"), ("smoke", "--summary-md"), ("tune", "--report"), ("tune", "--summary-md"),
        ("verify", "--summary-md")}


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("command", "option", "appended", "kind"), CASES, ids=[f"{c}{o}-{k}" for c, o, _, k in CASES])
def test_a_sink_that_is_not_a_regular_file_is_refused_before_the_work(
        command: str, option: str, appended: bool, kind: str, example_repository: Path, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    sink = scratch / "sink"
    if kind == "fifo":
        os.mkfifo(sink)
    elif kind == "folder":
        sink.mkdir()
    elif kind == "device":
        sink = Path("/dev/full")
    elif kind == "missing-folder":
        sink = scratch / "missing" / "sink"
    else:
        (scratch / "precious").write_text("precious\n")
        sink.symlink_to(scratch / "precious")
    before = _listing(scratch)
    result = CliRunner().invoke(main, [command, *_base(command, example_repository, scratch), option, str(sink)])
    assert result.exit_code == 2, result.output
    assert f"{sink}: /: {option}: cannot write this file" in result.output, result.output
    assert _listing(scratch) == before  # nothing written: not the sink, not the command's other outputs
    if kind == "fifo":
        assert sink.is_fifo()
    if kind == "symlink":
        assert (scratch / "precious").read_text() == "precious\n"


def _limit_file_size(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.slow
def test_a_summary_that_fails_after_the_build_says_the_repository_was_written(example_repository: Path,
                                                                              tmp_path: Path) -> None:
    """The disk fills after the repository is written: the summary's append fails (EFBIG at the file-size limit,
    as ENOSPC would), and the command exits 1, not 2 (which promises nothing was written), naming the repository."""
    limit = 64 << 20  # above every file the build writes; the summary already reaches it (a sparse file)
    summary, out = tmp_path / "summary.md", tmp_path / "built"
    with open(summary, "wb") as handle:
        handle.truncate(limit)
    done = subprocess.run(
        [sys.executable, "-m", "generator.cli", "build", str(MANIFEST), "--allow-code", "--target", "python",
         "--cache-dir", str(example_repository.parent / "cache"), "-o", str(out), "--summary-md", str(summary)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, preexec_fn=lambda: _limit_file_size(limit))
    assert done.returncode == 1, done.stderr
    assert f"{summary}: /: --summary-md: cannot write this file: File too large; written before it: the " \
           f"repository {out}" in done.stderr, done.stderr
    assert (out / "mlp" / "config.pbtxt").is_file() and summary.stat().st_size == limit
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_report_writes_nothing_into_home(example_repository: Path, tmp_path: Path) -> None:
    """matplotlib's font cache (MPLCONFIGDIR, else ~/.config or ~/.cache) lands in a temporary folder of the run."""
    home, page = tmp_path / "home", tmp_path / "page.html"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")}
    done = subprocess.run([sys.executable, "-m", "generator.cli", "report", str(example_repository), "-o", str(page)],
                          cwd=ROOT, env={**env, "HOME": str(home)}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert page.is_file() and list(home.iterdir()) == []
