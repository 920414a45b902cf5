"""Files written beside gen-repo's outputs (generator/atomic_write.py): exclusive temporary files renamed into place,
never written through a symlink someone planted, and no writer in the package that bypasses them."""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path

import pytest

from generator import atomic_write
from generator.atomic_write import replacing, write_atomically

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def precious(tmp_path: Path) -> Path:
    """A file outside the output folder that a planted link points at: its bytes must never change."""
    target = tmp_path / "elsewhere" / "precious"
    target.parent.mkdir()
    target.write_bytes(b"precious bytes")
    return target


def test_a_link_planted_at_the_temporary_name_is_skipped_not_followed(tmp_path: Path, precious: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Someone who could guess the temporary name plants a link there: the open refuses it (O_EXCL|O_NOFOLLOW),
    another name is taken, and the link's target keeps its bytes."""
    out = tmp_path / "out"
    out.mkdir()
    path = out / "page.html"
    planted = out / ".page.html.guessed.partial"
    planted.symlink_to(precious)
    names = iter([planted, out / ".page.html.fresh.partial"])
    monkeypatch.setattr(atomic_write, "_temporary_name", lambda _path: next(names))
    write_atomically(path, "the page")
    assert path.read_text() == "the page" and not path.is_symlink()
    assert precious.read_bytes() == b"precious bytes"
    assert planted.is_symlink() and sorted(p.name for p in out.iterdir()) == [".page.html.guessed.partial",
                                                                              "page.html"]


def test_a_link_at_the_final_name_is_replaced_and_its_target_unchanged(tmp_path: Path, precious: Path) -> None:
    path = tmp_path / "report.json"
    path.symlink_to(precious)
    write_atomically(path, b"{}\n")
    assert not path.is_symlink() and path.read_bytes() == b"{}\n"
    assert precious.read_bytes() == b"precious bytes"
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere" / "x")
    write_atomically(dangling, "x")
    assert not dangling.is_symlink() and not (tmp_path / "nowhere").exists()


def test_without_overwrite_an_existing_name_or_link_is_refused(tmp_path: Path, precious: Path) -> None:
    path = tmp_path / "gen-repo.yaml"
    write_atomically(path, "first", overwrite=False)
    with pytest.raises(FileExistsError):
        write_atomically(path, "second", overwrite=False)
    link = tmp_path / "link.yaml"
    link.symlink_to(tmp_path / "not-there")
    with pytest.raises(FileExistsError):
        write_atomically(link, "third", overwrite=False)
    assert path.read_text() == "first" and not (tmp_path / "not-there").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "gen-repo.yaml", "link.yaml"]


def test_modes_and_durable_writes(tmp_path: Path) -> None:
    umask = os.umask(0o027)
    try:
        default = write_atomically(tmp_path / "default", "x")
        exact = write_atomically(tmp_path / "exact", "x", mode=0o644, durable=True)
        script = write_atomically(tmp_path / "script.sh", "x", mode=0o755)
    finally:
        os.umask(umask)
    assert stat.S_IMODE(default.stat().st_mode) == 0o640  # 0o666 less the umask, as open(path, "w") makes it
    assert stat.S_IMODE(exact.stat().st_mode) == 0o644 and exact.read_text() == "x"
    assert stat.S_IMODE(script.stat().st_mode) == 0o755


def test_replacing_keeps_the_previous_file_when_the_writer_fails(tmp_path: Path, precious: Path) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError), replacing(path) as temporary:
        temporary.write_bytes(b"half")
        raise RuntimeError("the writer failed")
    assert path.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "model.onnx"]
    path.unlink()
    path.symlink_to(precious)
    with replacing(path) as temporary:
        temporary.write_bytes(b"new")
    assert not path.is_symlink() and path.read_bytes() == b"new" and precious.read_bytes() == b"precious bytes"


# -- no writer bypasses the helper -------------------------------------------------------------------------------
#: Every place in the package that writes a file by other means, and why it may: each writes into a folder gen-repo
#: created itself, exclusively (mkdtemp, os.mkdir of a fresh random name, TemporaryDirectory), which nobody else can
#: plant a link in; or opens with O_EXCL. (module, call) -> count.
_DIRECT_WRITES = {
    ("generator/building/artifacts.py", "write_bytes"): 1,  # the build's private work folder
    ("generator/building/engines.py", "write_bytes"): 1,  # TensorRT plans in the build's private work folder
    ("generator/building/pipeline.py", "write_text"): 1,  # <model>/config.pbtxt in the repository's staging folder
    ("generator/building/distributed.py", "write_bytes"): 1,  # a TemporaryDirectory on a Ray worker
    ("generator/contracts/reference_data.py", "write_text"): 1,  # gen_repo/reference.json in the build's work folder
    ("generator/repository/staging.py", "write_text"): 2,  # markers in the staging folder (os.mkdir of a random name)
    ("generator/repository/staging.py", "open"): 1,  # the lock file in the staging folder, fsynced before the swap
    ("generator/repository/files.py", "os.open"): 1,  # write_files: into a staging folder from mkdtemp
    ("generator/repository/cache.py", "open"): 3,  # "x" modes: entries staged in the cache's own .tmp- folders
    ("generator/serving/server.py", "write_text"): 1,  # .complete in a mkdtemp staging folder
    ("generator/serving/server.py", "open"): 1,  # appends to the log file mkstemp created
    ("generator/serving/perf_analyzer.py", "write_text"): 1,  # perf_analyzer's input data in a TemporaryDirectory
    ("generator/contracts/request_schema.py", "write_text"): 1,  # contract + request schema in the build's work folder
    # fs.open(..., "wb"): an object in the bucket (fsspec), not a file
    ("generator/repository/publish_files.py", "open"): 1,
    ("generator/atomic_write.py", "os.open"): 2,  # the helper itself; append_text (--summary-md, O_NOFOLLOW)
    # a bucket's locked objects and its lock, copied into a fresh folder gen-repo made ("x" mode: never through a
    # file already there)
    ("generator/repository/remote_copy.py", "open"): 1,
    ("generator/repository/remote_copy.py", "write_bytes"): 1,
    # a publish destination folder: O_EXCL | O_NOFOLLOW under a folder fd opened without following symlinks; a
    # replaced file (config, lock file) is written to a fresh name and renamed, as the helper does, but by fd
    ("generator/repository/local_store.py", "os.open"): 3,
}


def _writes(tree: ast.AST) -> list[str]:
    """The file-writing calls in ``tree``: ``.write_text``/``.write_bytes``, ``open`` with a w/a/x/+ mode,
    ``os.open`` with O_CREAT or O_WRONLY/O_RDWR (as names in its flags), ``os.fdopen`` excluded (it opens nothing)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in ("write_text", "write_bytes"):
            found.append(name)
        elif name == "open" and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id == "os":
            flags = ast.unparse(node.args[1]) if len(node.args) > 1 else ""
            if any(flag in flags for flag in ("O_CREAT", "O_WRONLY", "O_RDWR", "_FLAGS", "_APPEND")):
                found.append("os.open")
        elif name == "open":
            mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"),
                                                                None)
            if isinstance(mode, ast.Constant) and isinstance(mode.value, str) and set(mode.value) & set("wax+"):
                found.append("open")
    return found


def test_every_file_write_in_the_package_goes_through_the_helper_or_is_listed() -> None:
    """A new writer beside an output must use generator.atomic_write; one into a folder gen-repo made itself is
    listed above with the reason it is safe."""
    counts: dict[tuple[str, str], int] = {}
    for path in sorted((REPO / "generator").rglob("*.py")):
        module = path.relative_to(REPO).as_posix()
        for call in _writes(ast.parse(path.read_text(encoding="utf-8"))):
            counts[(module, call)] = counts.get((module, call), 0) + 1
    assert counts == _DIRECT_WRITES
