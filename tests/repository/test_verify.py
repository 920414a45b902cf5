"""verify_repository (generator/repository/verify.py): a repository against its lock file, file by file."""

from __future__ import annotations

import json
import py_compile
import shutil
import sys
from pathlib import Path

import pytest

from generator.errors import json_pointer
from generator.repository.lock import LOCK_FILE_NAME, build_lock
from generator.repository.staging import RepositoryWriter
from generator.repository.verify import verify_repository
from tests.small_repository import TOOLS, write_repo


def test_verify_catches_modified_missing_and_extra(dest: Path) -> None:
    write_repo(dest, "v1")
    (dest / "alpha/1/part0.bin").write_bytes(b"tampered")  # size changes
    original = (dest / "alpha/1/part1.bin").read_bytes()
    (dest / "alpha/1/part1.bin").write_bytes(original[:-1] + b"X")  # same size, different content
    (dest / "beta/1/part2.bin").unlink()
    (dest / "beta/1/extra.bin").write_bytes(b"extra")
    (dest / "beta/1/link.bin").symlink_to(dest / "alpha/1/part2.bin")
    problems = {Path(p.file).relative_to(dest).as_posix(): p.message for p in verify_repository(dest)}
    assert problems.keys() == {
        "alpha/1/part0.bin",
        "alpha/1/part1.bin",
        "beta/1/part2.bin",
        "beta/1/extra.bin",
        "beta/1/link.bin",
    }
    assert problems["alpha/1/part0.bin"].startswith("modified")
    assert problems["alpha/1/part1.bin"].startswith("modified: sha256")
    assert problems["beta/1/part2.bin"].startswith("missing")
    assert problems["beta/1/extra.bin"].startswith("unexpected")


def test_verify_reports_missing_and_corrupt_lock(dest: Path) -> None:
    write_repo(dest, "v1")
    lock_path = dest / LOCK_FILE_NAME
    good = lock_path.read_text()
    lock_path.write_text(good[:-20])
    [problem] = verify_repository(dest)
    assert problem.file == str(lock_path) and "corrupt" in problem.message
    lock = json.loads(good)
    lock["artifacts"]["../../etc/passwd"] = {"sha256": "0" * 64, "size": 1}
    lock_path.write_text(json.dumps(lock))
    assert any("relative path" in p.message for p in verify_repository(dest))
    lock_path.unlink()
    [problem] = verify_repository(dest)
    assert problem.file == str(lock_path) and "missing" in problem.message


@pytest.mark.parametrize("key", ["alpha/1/x\ny.bin", "alpha/1/a\\b", "C:x", "alpha/./1/x", "alpha//x"],
                         ids=["newline", "backslash", "drive-letter", "dot", "empty"])
def test_verify_refuses_lock_keys_that_are_not_plain_paths_in_the_repository(dest: Path, key: str) -> None:
    """The lock's keys are paths the repository names: confinement's rule applies to them (control characters, a
    Windows separator or drive, and non-canonical names refused), located at the key's pointer."""
    write_repo(dest, "v1")
    lock_path = dest / LOCK_FILE_NAME
    lock = json.loads(lock_path.read_text())
    lock["artifacts"][key] = {"sha256": "0" * 64, "size": 1}
    lock_path.write_text(json.dumps(lock))
    [problem] = verify_repository(dest)
    assert problem.file == str(lock_path)
    assert problem.pointer == "/artifacts/" + key.replace("~", "~0").replace("/", "~1")
    assert problem.message.startswith("artifact path is not a plain relative path: it ")


def test_verify_reads_no_locked_file_through_a_folder_linked_out_of_the_repository(dest: Path,
                                                                                  tmp_path: Path) -> None:
    """A version folder swapped for a symlink to an identical copy elsewhere (or to another folder of the
    repository): its files are refused by name, not hashed where the link leads (and the link itself is refused)."""
    write_repo(dest, "v1")
    elsewhere = tmp_path / "elsewhere"
    (dest / "alpha" / "1").rename(elsewhere)
    (dest / "alpha" / "1").symlink_to(elsewhere, target_is_directory=True)
    problems = {Path(p.file).relative_to(dest).as_posix(): p.message for p in verify_repository(dest)}
    assert problems["alpha/1"].startswith("refused: a symlink")
    locked = [rel for rel in json.loads((dest / LOCK_FILE_NAME).read_text())["artifacts"] if rel.startswith("alpha/1/")]
    assert locked and all(problems[rel] == "refused: not read through 'alpha/1', which is not a folder (a symlink "
                          "or a special file)" for rel in locked)
    (dest / "alpha" / "1").unlink()
    (dest / "alpha" / "1").symlink_to(dest / "beta" / "1", target_is_directory=True)  # inside: refused the same
    problems = {Path(p.file).relative_to(dest).as_posix(): p.message for p in verify_repository(dest)}
    assert problems["alpha/1"].startswith("refused: a symlink")
    assert all(problems[rel].startswith("refused: not read through 'alpha/1'") for rel in locked)


NOT_EXACTLY_A_VERSION = ["1\n", " 1", "1 ", "+1", "-1", "1abc", "01", "\u0661", "\uff11", "9" * 20]


@pytest.mark.parametrize("name", NOT_EXACTLY_A_VERSION)
def test_verify_reports_a_folder_that_is_not_exactly_a_version(dest: Path, name: str) -> None:
    """A model folder (or its warmup data's) that reads as a version to Triton's std::stoll or to Python's int()
    but is not exactly that version's name: one problem naming it, even empty and unlisted; and as a lock file's
    key, the lock itself is refused at that key. Before, the empty folders passed, and so did a lock whose keys
    named "1\n" (the folder a publish then uploaded nothing from)."""
    lock = write_repo(dest, "v1")
    (dest / "alpha" / name).mkdir()
    (dest / "beta" / "warmup" / name).mkdir(parents=True)
    problems = {p.file: p.message for p in verify_repository(dest)}
    assert problems.keys() == {str(dest / "alpha" / name), str(dest / "beta" / "warmup" / name)}, problems
    assert f"folder {name!a} " in problems[str(dest / "alpha" / name)]

    (dest / "alpha" / name).rmdir()
    shutil.rmtree(dest / "beta" / "warmup")
    (dest / "alpha" / "1").rename(dest / "alpha" / name)
    lock["artifacts"] = {k.replace("alpha/1/", f"alpha/{name}/"): v for k, v in lock["artifacts"].items()}
    (dest / LOCK_FILE_NAME).write_text(json.dumps(lock))
    problems = {p.pointer: p.message for p in verify_repository(dest)}
    assert problems.keys() == {json_pointer(["artifacts", f"alpha/{name}/part{i}.bin"]) for i in range(3)}, problems
    assert all(f"folder {name!a} " in message for message in problems.values())


def test_verify_passes_only_the_bytecode_a_locked_source_compiles_to(tmp_path: Path) -> None:
    """Triton's Python backend compiles model.py into __pycache__ when it loads the model: that passes; other bytes
    in __pycache__ do not (tests/repository/test_bytecode.py has the planted cases)."""
    dest = tmp_path / "repo"
    with RepositoryWriter(dest) as writer:
        (writer.model_dir("m", 1) / "model.py").write_text("x = 1\n")
        writer.commit(build_lock(writer.root, TOOLS, {"m": {"target": "python"}}))
    compiled = dest / "m" / "1" / "__pycache__" / f"model.{sys.implementation.cache_tag}.pyc"
    py_compile.compile(str(dest / "m" / "1" / "model.py"), cfile=str(compiled), doraise=True)
    assert verify_repository(dest) == []
    (dest / "m" / "1" / "__pycache__" / "notes.txt").write_text("not bytecode")
    assert [p.message for p in verify_repository(dest)] == ["unexpected: not listed in the lock file"]
    (dest / "m" / "1" / "__pycache__" / "notes.txt").unlink()
    compiled.write_bytes(b"\x00")
    assert [p.message for p in verify_repository(dest)] == [
        f"refused: not {sys.implementation.cache_tag} bytecode (wrong magic number) (source 'm/1/model.py')"]
