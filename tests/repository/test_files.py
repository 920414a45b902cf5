"""write_files (generator/repository/files.py): many small files under one folder, as ``gen-repo config`` writes."""

from __future__ import annotations

import os

import pytest

from generator.repository.files import write_files


# ---- write_files -------------------------------------------------------------------------------------------------
def test_write_files_creates_folders_once_and_writes_text_and_bytes(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "old.txt").write_text("x" * 100)
    files = {
        "a/config.pbtxt": 'name: "a"\n',
        "a/1/gen_repo/contract.json": "{}\n",
        "b/config.pbtxt": "caf\u00e9\n",
        "b/1/model.bin": bytes(range(256)) * 300,
        "a/old.txt": "short",  # replaced, not appended to or left longer
        "top.txt": "",
        "deep/er/est/file.txt": "three new folders at once",
    }
    write_files(tmp_path, files)
    for relative, content in files.items():
        expected = content.encode("utf-8") if isinstance(content, str) else content
        assert (tmp_path / relative).read_bytes() == expected


def test_write_files_modes_follow_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        write_files(tmp_path, {"m/config.pbtxt": "x"})
    finally:
        os.umask(old)
    assert (tmp_path / "m").stat().st_mode & 0o777 == 0o750
    assert (tmp_path / "m" / "config.pbtxt").stat().st_mode & 0o777 == 0o640


def test_write_files_into_a_missing_root_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        write_files(tmp_path / "missing", {"m/config.pbtxt": "x"})
