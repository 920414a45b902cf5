"""RepositoryWriter (generator/repository/staging.py): staging, atomic swap, crash recovery, a full disk.

The interruption tests kill a real writer process (SIGKILL and SIGINT) at chosen and at random points and check the
destination afterwards; nothing about the swap is mocked except, where named, making renameat2 "unavailable" to
exercise the portable fallback, and pausing (not changing) a rename so a kill lands at an exact point.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from generator.errors import GenRepoError
from generator.repository import staging as repository
from generator.repository.lock import (
    LOCK_FILE_NAME,
    OUTPUT_MARKER,
    STAGING_MARKER,
    build_lock,
    read_lock,
    render_lock,
)
from generator.repository.staging import RepositoryWriter
from generator.repository.verify import verify_repository
from tests.requirements import missing
from tests.small_repository import TOOLS, write_repo


def snapshot(root: Path) -> dict[str, str]:
    """Everything under ``root`` (hidden entries too): relative path -> kind and content hash."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = "link:" + os.readlink(path)
            elif path.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = "file:" + hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def leftovers(dest: Path) -> list[str]:
    """Entries beside ``dest`` that belong to a writer for it (staging, old, trash)."""
    return sorted(p.name for p in dest.parent.iterdir() if p.name.startswith(f".{dest.name}."))


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# -- basic behaviour ---------------------------------------------------------------------------------------------


def test_commit_creates_repository_with_lock(dest: Path) -> None:
    lock = write_repo(dest, "v1")
    assert (dest / LOCK_FILE_NAME).read_text() == render_lock(lock)
    assert set(lock["artifacts"]) == {
        f"{m}/{rel}" for m in ("alpha", "beta") for rel in ("config.pbtxt", "1/part0.bin", "1/part1.bin", "1/part2.bin")
    }
    assert verify_repository(dest) == []
    assert leftovers(dest) == []
    assert not (dest / STAGING_MARKER).exists()


def test_second_commit_swaps(dest: Path) -> None:
    write_repo(dest, "v1")
    inode_before = os.stat(dest).st_ino
    write_repo(dest, "v2", models=("gamma",))
    assert sorted(p.name for p in dest.iterdir()) == [OUTPUT_MARKER, "gamma", LOCK_FILE_NAME]
    assert b"v2" in (dest / "gamma/1/part0.bin").read_bytes()
    assert os.stat(dest).st_ino != inode_before  # a new tree was swapped in, not edited in place
    assert verify_repository(dest) == []
    assert leftovers(dest) == []


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_exception_inside_with_leaves_old_repository(dest: Path, error: BaseException) -> None:
    write_repo(dest, "v1")
    before = snapshot(dest.parent)
    with pytest.raises(type(error)), RepositoryWriter(dest) as writer:
        folder = writer.model_dir("alpha", 1)
        (folder / "part0.bin").write_bytes(b"half written")
        assert writer.root.parent == dest.parent and writer.root.name.startswith(".model_repository.staging-")
        raise error
    assert snapshot(dest.parent) == before
    assert leftovers(dest) == []


def test_leaving_without_commit_discards_staging(dest: Path) -> None:
    write_repo(dest, "v1")
    before = snapshot(dest.parent)
    with RepositoryWriter(dest) as writer:
        (writer.model_dir("alpha", 1) / "x.bin").write_bytes(b"x")
    assert snapshot(dest.parent) == before


def test_commit_refuses_files_changed_after_build_lock(dest: Path) -> None:
    write_repo(dest, "v1")
    before = snapshot(dest.parent)
    with pytest.raises(GenRepoError, match="not listed in the lock"), RepositoryWriter(dest) as writer:
        folder = writer.model_dir("alpha", 1)
        (folder / "model.onnx").write_bytes(b"onnx")
        lock = build_lock(writer.root, TOOLS, {"alpha": {}})
        (folder / "late.bin").write_bytes(b"written after the lock")
        writer.commit(lock)
    assert snapshot(dest.parent) == before


def test_nothing_written_outside_destination_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "keep.txt").write_text("keep")
    out = tmp_path / "out"
    out.mkdir()
    (out / "sibling.txt").write_text("sibling")
    temp = tmp_path / "tempdir"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    dest = out / "repo"
    before = snapshot(tmp_path)
    write_repo(dest, "v1")
    write_repo(dest, "v2")
    with pytest.raises(RuntimeError), RepositoryWriter(dest) as writer:
        writer.model_dir("alpha", 1)
        raise RuntimeError
    after = snapshot(tmp_path)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert changed and all(k == "out/repo" or k.startswith("out/repo/") for k in changed), sorted(changed)
    assert list(temp.iterdir()) == []


@pytest.mark.parametrize(
    "name",
    ["../escape", "a/b", "..", ".", ".hidden", "a\\b", "nul\x00byte", "", "x" * 200, LOCK_FILE_NAME, "/abs"],
)
def test_bad_model_names_refused(dest: Path, name: str) -> None:
    with RepositoryWriter(dest) as writer:
        root_before = snapshot(writer.root)
        with pytest.raises(GenRepoError):
            writer.model_dir(name, 1)
        with pytest.raises(GenRepoError):
            writer.adopt_previous(name)
        assert snapshot(writer.root) == root_before
    assert not dest.exists()
    assert leftovers(dest) == []


def test_bad_versions_and_case_collisions_refused(dest: Path) -> None:
    with RepositoryWriter(dest) as writer:
        for version in (0, -1, True, "1", 1.0):
            with pytest.raises(GenRepoError, match="version"):
                writer.model_dir("alpha", version)  # type: ignore[arg-type]
        writer.model_dir("Model", 1)
        with pytest.raises(GenRepoError, match="only by case"):
            writer.model_dir("model", 1)


def test_symlink_out_of_staging_refused(dest: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    with RepositoryWriter(dest) as writer:
        (writer.root / "evil").symlink_to(outside)
        with pytest.raises(GenRepoError, match="outside the repository"):
            writer.model_dir("evil", 1)
    assert list(outside.iterdir()) == []


def test_destination_symlink_or_file_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(GenRepoError, match="symlink"), RepositoryWriter(link):
        pass
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(GenRepoError, match="not a folder"), RepositoryWriter(afile):
        pass


def test_adopt_previous_keeps_failed_model(dest: Path) -> None:
    old_lock = write_repo(dest, "v1")
    old_beta = {k: v for k, v in snapshot(dest).items() if k.startswith("beta")}
    with RepositoryWriter(dest) as writer:
        folder = writer.model_dir("alpha", 1)
        (folder / "model.onnx").write_bytes(b"new alpha")
        (writer.model_dir("beta", 1) / "partial.bin").write_bytes(b"failed half way")  # the build failed here
        assert writer.adopt_previous("beta") == writer.root / "beta"
        assert writer.adopt_previous("never-built") is None
        previous = writer.previous_lock()
        assert previous is not None
        models = {"alpha": {"cache_key": "v2"}, "beta": previous["models"]["beta"]}
        writer.commit(build_lock(writer.root, TOOLS, models))
    assert {k: v for k, v in snapshot(dest).items() if k.startswith("beta")} == old_beta
    assert read_lock(dest)["models"]["beta"] == old_lock["models"]["beta"]
    assert verify_repository(dest) == []


def test_adopt_previous_copies_only_what_the_previous_lock_vouches_for(dest: Path) -> None:
    """Bytecode planted beside the previous build is left behind, and a previous build that no longer matches its
    lock is not adopted: the new lock never lists bytes nobody checked (issue 21)."""
    write_repo(dest, "v1")
    planted = dest / "beta" / "1" / "__pycache__" / f"model.{sys.implementation.cache_tag}.pyc"
    planted.parent.mkdir()
    planted.write_bytes(b"planted bytecode")
    with RepositoryWriter(dest) as writer:
        assert writer.adopt_previous("beta") == writer.root / "beta"
        assert not (writer.root / "beta" / "1" / "__pycache__").exists()
        assert sorted(p.name for p in (writer.root / "beta" / "1").iterdir()) == ["part0.bin", "part1.bin",
                                                                                  "part2.bin"]
    (dest / "alpha" / "1" / "part1.bin").write_bytes(b"v1:alpha:1\n".replace(b"1", b"X") * 50)  # same size
    with RepositoryWriter(dest) as writer:
        assert writer.adopt_previous("alpha") is None
        assert not (writer.root / "alpha").exists()


# -- crash recovery (states built by hand) -----------------------------------------------------------------------


def test_fallback_swap_without_renameat2(dest: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Simulates a kernel/libc without renameat2; every rename is real.
    monkeypatch.setattr(repository, "renameat2", lambda source, target, flags: False)
    write_repo(dest, "v1")
    write_repo(dest, "v2")
    assert b"v2" in (dest / "alpha/1/part0.bin").read_bytes()
    assert verify_repository(dest) == []
    assert leftovers(dest) == []


def test_recovery_restores_aside_when_destination_missing(dest: Path) -> None:
    write_repo(dest, "v1")
    before = snapshot(dest)
    pid = dead_pid()
    aside = dest.parent / f".{dest.name}.old-{pid}-abcdef"
    os.rename(dest, aside)  # the state a writer killed between its two fallback renames leaves
    stale = dest.parent / f".{dest.name}.staging-{pid}-123456"
    stale.mkdir()
    (stale / "junk").write_text("junk")
    with RepositoryWriter(dest) as writer:
        assert snapshot(dest) == before  # restored before anything else happens
        assert leftovers(dest) == [writer.root.name]
    assert snapshot(dest) == before
    assert leftovers(dest) == []


def test_recovery_keeps_live_writers_staging_and_removes_dead(dest: Path) -> None:
    write_repo(dest, "v1")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = dest.parent / f".{dest.name}.staging-{sleeper.pid}-aaaaaa"
        live.mkdir()
        dead = dest.parent / f".{dest.name}.staging-{dead_pid()}-bbbbbb"
        dead.mkdir()
        other_host = dest.parent / f".{dest.name}.staging-{sleeper.pid}-cccccc"
        other_host.mkdir()
        (other_host / STAGING_MARKER).write_text(json.dumps({"pid": sleeper.pid, "host": "elsewhere"}))
        old = time.time() - repository.STALE_AGE_SECONDS - 60
        reused = dest.parent / f".{dest.name}.staging-{sleeper.pid}-dddddd"
        reused.mkdir()  # the pid is alive, but it is not the process that made the folder
        (reused / STAGING_MARKER).write_text(
            json.dumps({"pid": sleeper.pid, "host": __import__("socket").gethostname(), "start_time": "1"})
        )
        write_repo(dest, "v2")
        assert leftovers(dest) == [live.name, other_host.name]
        os.utime(other_host, (old, old))
        write_repo(dest, "v3")
        assert leftovers(dest) == [live.name]
    finally:
        sleeper.kill()
        sleeper.wait()
    write_repo(dest, "v4")
    assert leftovers(dest) == []


# -- real processes killed mid-write -----------------------------------------------------------------------------

HELPER = r"""
import os, sys, time
from pathlib import Path
from generator.repository import staging as repository
from generator.repository.lock import build_lock
from generator.repository.staging import RepositoryWriter

dest, mode, pause_at, pause_s = Path(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
files, size = int(sys.argv[5]), int(sys.argv[6])

def say(message):
    print(message, flush=True)

def pause(label):
    if label == pause_at:
        say("PAUSE " + label)
        time.sleep(pause_s)

if os.environ.get("GEN_REPO_TEST_NO_RENAMEAT2") == "1":
    repository.renameat2 = lambda source, target, flags: False  # a kernel without renameat2
real_renameat2 = repository.renameat2
def renameat2(source, target, flags):
    done = real_renameat2(source, target, flags)
    if done and flags == 2:
        pause("exchanged")
    return done
repository.renameat2 = renameat2
real_rename = os.rename
def rename(source, target, *args, **kwargs):
    real_rename(source, target, *args, **kwargs)
    if ".old-" in os.fspath(target):
        pause("aside")
os.rename = rename

def write_version(tag):
    with RepositoryWriter(dest) as writer:
        pause("staged")
        models = {}
        for name in ("alpha", "beta"):
            folder = writer.model_dir(name, 1)
            (folder.parent / "config.pbtxt").write_text(f'name: "{name}"  # {tag}\n')
            models[name] = {"cache_key": tag}
            for i in range(files):
                (folder / f"part{i:03d}.bin").write_bytes(f"{tag}:{name}:{i};".encode() * (size // 16 + 1))
                if name == "beta" and i == files // 2:
                    pause("mid")
        lock = build_lock(writer.root, {"helper": "1"}, models)
        pause("locked")
        writer.commit(lock)
    say("committed " + tag)

if mode == "once":
    write_version("new")
else:
    for i in range(100000):
        write_version(f"v{i}")
"""


def start_helper(
    dest: Path,
    mode: str,
    pause_at: str = "-",
    pause_s: float = 0,
    files: int = 20,
    size: int = 4096,
    no_renameat2: bool = False,
) -> subprocess.Popen[str]:
    """Start the helper writer; it prints ``PAUSE <point>`` and sleeps when it reaches ``pause_at``."""
    env = dict(os.environ, GEN_REPO_TEST_NO_RENAMEAT2="1" if no_renameat2 else "0")
    argv = [sys.executable, "-c", HELPER, str(dest), mode, pause_at, str(pause_s), str(files), str(size)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def wait_for_line(proc: subprocess.Popen[str], prefix: str) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(prefix):
            return
    raise AssertionError(
        f"helper ended before printing {prefix!r}: {proc.wait()} {proc.stderr.read() if proc.stderr else ''}"
    )


def assert_consistent(dest: Path) -> str:
    """The repository matches its lock and every file comes from one and the same build; return that build's tag."""
    assert verify_repository(dest) == []
    lock = read_lock(dest)
    tags = {entry["cache_key"] for entry in lock["models"].values()}
    assert len(tags) == 1, tags
    [tag] = tags
    for rel in lock["artifacts"]:
        assert tag in (dest / rel).read_text(), rel
    return tag


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
@pytest.mark.parametrize("point", ["staged", "mid", "locked"])
def test_killed_writer_leaves_previous_repository(dest: Path, sig: signal.Signals, point: str) -> None:
    write_repo(dest, "v1")
    before = snapshot(dest)
    proc = start_helper(dest, "once", pause_at=point, pause_s=120)
    try:
        wait_for_line(proc, "PAUSE")
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode != 0
    assert snapshot(dest) == before
    if sig == signal.SIGKILL:
        assert len(leftovers(dest)) == 1  # the dead writer's staging folder, cleaned by the next writer
    else:
        assert leftovers(dest) == []  # Ctrl-C cleans up in-process
    write_repo(dest, "v2")
    assert leftovers(dest) == []
    assert assert_consistent(dest) == "v2"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("point", "no_renameat2"), [("exchanged", False), ("aside", True)], ids=["exchange", "fallback"]
)
def test_kill_inside_the_swap(dest: Path, point: str, no_renameat2: bool) -> None:
    write_repo(dest, "v1")
    before = snapshot(dest)
    proc = start_helper(dest, "once", pause_at=point, pause_s=120, no_renameat2=no_renameat2)
    try:
        wait_for_line(proc, "PAUSE")
        if point == "exchanged":
            assert assert_consistent(dest) == "new"  # already swapped, old tree not yet deleted
        else:
            assert not dest.exists()  # the one instant the fallback has no destination
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    with RepositoryWriter(dest) as writer:  # the next writer recovers before doing anything
        expected = "new" if point == "exchanged" else "v1"
        assert assert_consistent(dest) == expected
        if expected == "v1":
            assert snapshot(dest) == before
        assert leftovers(dest) == [writer.root.name]
    assert leftovers(dest) == []


@pytest.mark.slow
@pytest.mark.parametrize("no_renameat2", [False, True], ids=["exchange", "fallback"])
def test_sigint_inside_the_swap_is_deferred(dest: Path, no_renameat2: bool) -> None:
    write_repo(dest, "v1")
    point = "aside" if no_renameat2 else "exchanged"
    proc = start_helper(dest, "once", pause_at=point, pause_s=2, no_renameat2=no_renameat2)
    try:
        wait_for_line(proc, "PAUSE")
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert "KeyboardInterrupt" in err  # interrupted, but only after the swap finished
    assert assert_consistent(dest) == "new"
    assert leftovers(dest) == []


@pytest.mark.slow
@pytest.mark.parametrize("no_renameat2", [False, True], ids=["exchange", "fallback"])
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_killed_at_random_points_never_breaks_repository(dest: Path, sig: signal.Signals, no_renameat2: bool) -> None:
    rng = random.Random(f"{sig}-{no_renameat2}")
    write_repo(dest, "v1")
    for _round in range(5):
        proc = start_helper(dest, "loop", files=30, size=8192, no_renameat2=no_renameat2)
        try:
            wait_for_line(proc, "committed v0")
            time.sleep(rng.uniform(0, 0.4))
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
        if sig == signal.SIGINT:
            assert leftovers(dest) == [], (out[-300:], err[-3000:])  # Ctrl-C cleans up wherever it lands
            assert_consistent(dest)
        with RepositoryWriter(dest) as writer:
            assert_consistent(dest)
            assert leftovers(dest) == [writer.root.name]
    write_repo(dest, "final")
    assert assert_consistent(dest) == "final"
    assert leftovers(dest) == []


# -- full disk ---------------------------------------------------------------------------------------------------


@pytest.fixture
def small_tmpfs(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A 1 MiB tmpfs: a real file system that runs out of space."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0:
        raise missing("root", "mounting a tmpfs needs root")
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(mnt)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise missing("root", f"cannot mount a tmpfs here: {result.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_full_disk_while_writing_gives_clear_error(small_tmpfs: Path) -> None:
    dest = small_tmpfs / "repo"
    write_repo(dest, "v1")
    before = snapshot(small_tmpfs)
    with pytest.raises(GenRepoError, match="ENOSPC") as caught, RepositoryWriter(dest) as writer:
        (writer.model_dir("alpha", 1) / "model.onnx").write_bytes(b"\0" * (2 << 20))
    assert "no space left" in str(caught.value)
    assert snapshot(small_tmpfs) == before
    write_repo(dest, "v2")  # the space was given back
    assert assert_consistent(dest) == "v2"


def test_full_disk_during_commit_gives_clear_error(small_tmpfs: Path) -> None:
    dest = small_tmpfs / "repo"
    write_repo(dest, "v1")
    before = snapshot(small_tmpfs)
    with pytest.raises(GenRepoError, match=f"ENOSPC.*{LOCK_FILE_NAME}"), RepositoryWriter(dest) as writer:
        folder = writer.model_dir("alpha", 1)
        for i in range(160):  # each file takes a page; their lock entries take several more
            (folder / f"f{i:03d}").write_bytes(b"x")
        filler = folder / "filler"
        with open(filler, "wb", buffering=0) as stream:
            try:
                while True:
                    stream.write(b"\0" * 4096)
            except OSError as error:
                assert error.errno == errno.ENOSPC
        os.truncate(filler, max(0, filler.stat().st_size - 8192))  # room for 2 pages; the lock needs more
        lock = build_lock(writer.root, TOOLS, {"alpha": {}})
        assert len(render_lock(lock)) > 4 * 4096
        writer.commit(lock)
    assert snapshot(small_tmpfs) == before
    assert leftovers(dest) == []


def test_destination_that_is_a_mount_point_gives_clear_error(small_tmpfs: Path) -> None:
    (small_tmpfs / "keep.txt").write_text("previous content")
    before = snapshot(small_tmpfs)
    with pytest.raises(GenRepoError, match="not made by gen-repo"):  # refused before it is even tried
        write_repo(small_tmpfs, "v1")
    assert snapshot(small_tmpfs) == before
    repository.write_output_marker(small_tmpfs)  # a repository gen-repo made there earlier, say
    before = snapshot(small_tmpfs)
    with pytest.raises(GenRepoError, match="mount point"):
        write_repo(small_tmpfs, "v1")
    assert snapshot(small_tmpfs) == before
    assert leftovers(small_tmpfs) == []
