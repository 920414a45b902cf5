"""The lock file (generator/repository/lock.py): deterministic bytes, and what build_lock refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from generator.errors import GenRepoError
from generator.repository.lock import LOCK_FILE_NAME, build_lock, render_lock
from generator.repository.staging import RepositoryWriter
from tests.small_repository import TOOLS, write_repo


def test_lock_is_deterministic_across_destinations(tmp_path: Path) -> None:
    first = tmp_path / "a" / "repo"
    second = tmp_path / "somewhere" / "else" / "other_name"
    write_repo(first, "same")
    write_repo(second, "same")
    text = (first / LOCK_FILE_NAME).read_bytes()
    assert text == (second / LOCK_FILE_NAME).read_bytes()
    assert str(tmp_path).encode() not in text
    assert text.endswith(b"}\n")
    lock = json.loads(text)
    assert list(lock["artifacts"]) == sorted(lock["artifacts"])
    assert render_lock(lock).encode() == text


def test_lock_refuses_absolute_paths_and_unlisted_folders(dest: Path) -> None:
    with RepositoryWriter(dest) as writer:
        writer.model_dir("alpha", 1)
        with pytest.raises(GenRepoError, match="absolute path"):
            build_lock(writer.root, TOOLS, {"alpha": {"source": str(dest.parent / "model.pt2")}})
        with pytest.raises(GenRepoError, match="not a model listed"):
            build_lock(writer.root, TOOLS, {})
        with pytest.raises(GenRepoError, match="has no folder"):
            build_lock(writer.root, TOOLS, {"alpha": {}, "ghost": {}})
        (writer.root / "alpha" / "link").symlink_to("/etc/hostname")
        with pytest.raises(GenRepoError, match="not a regular file"):
            build_lock(writer.root, TOOLS, {"alpha": {}})
