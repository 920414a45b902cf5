"""A small repository committed by RepositoryWriter, every file tagged: for the staging, lock and verify tests."""

from __future__ import annotations

from pathlib import Path

from generator.repository.lock import build_lock
from generator.repository.staging import RepositoryWriter

TOOLS = {"gen-repo": "0.1.0", "onnx": "1.17.0"}


def write_repo(dest: Path, tag: str, models: tuple[str, ...] = ("alpha", "beta"), files: int = 3) -> dict:
    """Commit a small repository whose every file carries ``tag``; return its lock."""
    with RepositoryWriter(dest) as writer:
        entries = {}
        for name in models:
            folder = writer.model_dir(name, 1)
            (folder.parent / "config.pbtxt").write_text(f'name: "{name}"  # {tag}\n')
            for i in range(files):
                (folder / f"part{i}.bin").write_bytes(f"{tag}:{name}:{i}\n".encode() * 50)
            entries[name] = {"spec_sha256": "0" * 64, "cache_key": tag, "target": "python"}
        lock = build_lock(writer.root, TOOLS, entries)
        writer.commit(lock)
    return lock
