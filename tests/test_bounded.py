"""Bounded input (generator/bounded.py): regular files only, a byte limit that does not trust st_size, one table.

The CLI cases run ``gen-repo`` in a real process with a time limit and report its peak memory (``os.wait4``), so a
reader that hangs on a FIFO or reads ``/dev/zero`` until memory runs out fails the test instead of the machine.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from generator.bounded import LIMITS, UnreadableFileError, limit, read_bytes, read_text
from generator.errors import GenRepoError
from tests.process_helpers import REPO, run_cli

SPEC = REPO / "examples" / "specs" / "mlp.graphspec.json"


# ------------------------------------------------------------------------------------------------ CLI, real process
def test_validate_refuses_a_device_before_reading_it() -> None:
    """``validate /dev/zero`` used to read until memory ran out (st_size is 0); now: refused unread, exit 2."""
    code, output, peak = run_cli(["validate", "/dev/zero"])
    assert code == 2, output
    assert "Traceback" not in output
    assert "/dev/zero: /: a character device, not a regular file" in output
    assert peak < 400, f"{peak} MiB"


def test_validate_refuses_a_fifo_without_waiting_for_a_writer(tmp_path: Path) -> None:
    """A FIFO used to hang ``validate`` (the open waits for a writer); now it is refused before any open."""
    fifo = tmp_path / "spec.graphspec.json"
    os.mkfifo(fifo)
    code, output, _ = run_cli(["validate", str(fifo)], timeout=60)
    assert code == 2, output
    assert "Traceback" not in output
    assert f"{fifo}: /: a FIFO (named pipe), not a regular file" in output


# ------------------------------------------------------------------------------------------------ the reader
def test_a_fifo_is_refused_by_the_reader_itself(tmp_path: Path) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    with pytest.raises(UnreadableFileError, match="a FIFO"):
        read_bytes(fifo)
    with pytest.raises(UnreadableFileError, match="a folder"):
        read_bytes(tmp_path)


def test_the_limit_does_not_trust_st_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """/proc files say they hold 0 bytes; the reader stops one byte past the limit whatever st_size says."""
    status = Path("/proc/self/status")
    assert status.stat().st_size == 0 and len(status.read_bytes()) > 200
    monkeypatch.setenv("GEN_REPO_MAX_DOCUMENT_BYTES", "200")
    with pytest.raises(UnreadableFileError) as caught:
        read_bytes(status)
    assert caught.value.problems[0].message.startswith("file holds more than 200 bytes; at most 200 are accepted")
    assert isinstance(caught.value, OSError) and isinstance(caught.value, GenRepoError)


def test_a_file_at_the_limit_is_read_and_one_byte_more_is_refused(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEN_REPO_MAX_CONFIG_BYTES", "1k")
    path = tmp_path / "config.pbtxt"
    path.write_bytes(b"#" * 1024)
    assert read_text(path, "config_bytes") == "#" * 1024
    path.write_bytes(b"#" * 1025)
    with pytest.raises(UnreadableFileError, match=r"file is 1025 bytes; at most 1024 are accepted \(limit "
                                                  r"config_bytes; GEN_REPO_MAX_CONFIG_BYTES changes it\)"):
        read_bytes(path, "config_bytes")


def test_missing_files_stay_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_bytes(tmp_path / "nothing")


@pytest.mark.parametrize(("value", "expected"), [("123", 123), ("8MiB", 8 << 20), ("512k", 512 << 10),
                                                 ("2G", 2 << 30), ("1_000", 1000)])
def test_limits_are_overridden_by_environment_variables(value: str, expected: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEN_REPO_MAX_ARRAY_ELEMENTS", value)
    assert limit("array_elements") == expected


@pytest.mark.parametrize("value", ["0", "-5", "1x", "lots", "1.5M"])
def test_a_limit_that_is_not_a_positive_number_is_refused(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEN_REPO_MAX_NESTING", value)
    with pytest.raises(GenRepoError) as caught:
        limit("nesting")
    assert caught.value.problems[0].file == "GEN_REPO_MAX_NESTING"


def test_validate_names_the_variable_that_lifts_the_limit() -> None:
    code, output, _ = run_cli(["validate", str(SPEC)], env={"GEN_REPO_MAX_DOCUMENT_BYTES": "100"})
    assert code == 2, output
    assert "at most 100 are accepted (limit document_bytes; GEN_REPO_MAX_DOCUMENT_BYTES changes it)" in output


def test_the_docs_list_every_limit_with_its_default_and_variable() -> None:
    """docs/security.md's "Bounded input" table is this module's table: same names, defaults and variables."""
    text = (REPO / "docs" / "security.md").read_text(encoding="utf-8")
    section = text.split("## Bounded input", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| `(GEN_REPO_MAX_\w+)` \| ([^|]+) \|", section, re.MULTILINE)
    documented = {name: (variable, default.strip()) for name, variable, default in rows}
    assert documented == {name: (entry.variable, _human(entry.default, entry.unit)) for name, entry in LIMITS.items()}


def _human(value: int, unit: str) -> str:
    for size, suffix in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if unit == "bytes" and value % size == 0:
            return f"{value // size} {suffix}"
    return f"{value:,} {unit}"


# ------------------------------------------------------------------------------------------------ one reader
#: Files gen-repo reads without generator/bounded.py, and why each is safe. Anything else that reads a file whole
#: (``read_text``, ``read_bytes``, ``open`` for reading, ``json.load``, ``np.load``, ``onnx.load``) must go through
#: the bounded reader; a new raw read fails this test until it does, or is listed here with its reason.
RAW_READS = {
    "generator/planning/config.py": (1, "gen-repo's own templates/ (package data)"),
    "generator/repository/files.py": (2, "/proc/<pid>/stat and /proc/sys/kernel/random/boot_id of this machine"),
    "generator/repository/staging.py": (1, "--keep-going's copy of the previous build (streamed, hashed against its "
                                        "lock)"),
    "generator/serving/server.py": (3, "the server's own log, and the Python backend stub gen-repo installs"),
    "generator/repository/cache.py": (4, "the build cache: streamed copies, its own entry manifests (bounded) and "
                                      "/proc (its trust model: docs/security.md)"),
    "generator/repository/digest.py": (1, "a file streamed into its sha256 in chunks, never read whole (callers "
                                       "confine the path)"),
    "generator/building/export/tensorrt.py": (1, "the TensorRT timing cache kept in the build cache"),
    "generator/building/distributed.py": (1, "artifacts this build has just written, sent back from a Ray worker"),
    "generator/tuning/results.py": (1, "/proc/cpuinfo of this machine (the hardware a tune result names)"),
    "generator/serving/ceiling.py": (1, "the served TensorRT plan, handed whole to TensorRT's runtime (GPU machines "
                                     "only; the build wrote it and verify checks it against the lock)"),
}


def _raw_reads(path: Path) -> int:
    import ast

    count = 0
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
        method_read = name in ("read_text", "read_bytes") and isinstance(func, ast.Attribute) and owner != "bounded"
        if method_read or (name == "load" and owner in ("json", "np", "numpy", "onnx")):
            count += 1
        elif name == "open" and isinstance(func, ast.Name):
            modes = [a.value for a in node.args[1:2] if isinstance(a, ast.Constant)]
            modes += [k.value.value for k in node.keywords if k.arg == "mode" and isinstance(k.value, ast.Constant)]
            count += not modes or "r" in str(modes[0])
    return count


def test_every_file_read_goes_through_the_bounded_reader() -> None:
    found = {str(path.relative_to(REPO)): _raw_reads(path) for path in sorted((REPO / "generator").rglob("*.py"))}
    found = {name: count for name, count in found.items() if count and name != "generator/bounded.py"}
    assert found == {name: count for name, (count, _) in RAW_READS.items()}
