"""BuildCache: keys, miss/put/hit, corrupt entries, concurrent puts from real processes."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from generator.atomic_write import write_atomically
from generator.errors import GenRepoError
from generator.repository.cache import (
    BuildCache,
    cache_key,
    cache_secret,
    canonical_json,
    secret_file,
)
from generator.repository.digest import hash_bytes, hash_file

PARTS: dict[str, dict[str, Any]] = {
    "spec": {"graph": {"inputs": [{"name": "x", "dims": [-1, 16]}], "max_batch_size": 32}},
    "source": {"kind": "onnx", "sha256": "ab" * 32},
    "options": {"target": "tensorrt", "precision": "fp16", "workspace": 1 << 30},
    "tools": {"gen-repo": "0.1.0", "tensorrt": "10.8.0"},
    "target": {"gpu": "NVIDIA H200", "compute_capability": "9.0"},
}


def test_hash_file_streams(tmp_path: Path) -> None:
    data = os.urandom(3 * (1 << 20) + 17)
    path = tmp_path / "big"
    path.write_bytes(data)
    assert hash_file(path) == hash_bytes(data) == hash_file(path, chunk_size=1000)


def test_miss_put_hit(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path / "cache")
    key = cache.key(**PARTS)
    assert cache.get(key) is None
    source = tmp_path / "model.onnx"
    source.write_bytes(b"onnx bytes" * 1000)
    stored = cache.put(key, {"model.onnx": source, "gen_repo/contract.json": b'{"a": 1}\n'})
    assert stored == tmp_path / "cache" / key[:2] / key / "files"
    hit = cache.get(key)
    assert hit == stored
    assert (hit / "model.onnx").read_bytes() == source.read_bytes()
    assert (hit / "gen_repo" / "contract.json").read_bytes() == b'{"a": 1}\n'
    assert sorted(p.name for p in (tmp_path / "cache" / key[:2]).iterdir()) == [key]  # no temp folders left


@pytest.mark.parametrize("damage", ["modify", "truncate", "delete", "extra", "manifest", "no-manifest"])
def test_corrupt_entry_is_a_miss_and_deleted(tmp_path: Path, damage: str) -> None:
    cache = BuildCache(tmp_path / "cache")
    key = cache.key(**PARTS)
    stored = cache.put(key, {"model.plan": b"plan" * 100, "gen_repo/reference.json": b"{}"})
    entry = stored.parent
    plan = stored / "model.plan"
    if damage == "modify":
        plan.write_bytes(b"PLAN" * 100)  # same size, other content
    elif damage == "truncate":
        plan.write_bytes(b"plan")
    elif damage == "delete":
        plan.unlink()
    elif damage == "extra":
        (stored / "gen_repo" / "extra").write_bytes(b"x")
    elif damage == "manifest":
        (entry / "manifest.json").write_text("{not json")
    else:
        (entry / "manifest.json").unlink()
    assert cache.get(key) is None
    assert not entry.exists()
    again = cache.put(key, {"model.plan": b"plan" * 100, "gen_repo/reference.json": b"{}"})
    assert cache.get(key) == again


def test_key_changes_when_any_part_changes() -> None:
    base = cache_key(**PARTS)
    assert base == cache_key(**dict(reversed(list(PARTS.items()))))  # order of parts and dict keys is irrelevant
    variants = []
    for part, value in PARTS.items():
        for field in value:
            changed = copy.deepcopy(PARTS)
            changed[part][field] = ["changed", changed[part][field]]
            variants.append(cache_key(**changed))
        dropped = {k: v for k, v in PARTS.items() if k != part}
        variants.append(cache_key(**dropped))
    nested = copy.deepcopy(PARTS)
    nested["spec"]["graph"]["inputs"][0]["dims"] = [-1, 17]  # deep inside the spec
    variants.append(cache_key(**nested))
    assert base not in variants
    assert len(set(variants)) == len(variants)
    assert len({cache_key(v=1), cache_key(v=1.0), cache_key(v=True), cache_key(v="1")}) == 4


@pytest.mark.parametrize("bad", [Path("/abs/model.onnx"), math.nan, math.inf, {1, 2}, {1: "int key"}, b"bytes"])
def test_key_refuses_ambiguous_parts(bad: object) -> None:
    with pytest.raises(TypeError):
        cache_key(source=bad)
    with pytest.raises(ValueError):
        cache_key()


def test_canonical_json_is_canonical() -> None:
    assert canonical_json({"b": [1, (2, 3)], "a": "é"}) == '{"a":"\\u00e9","b":[1,[2,3]]}'


@pytest.mark.parametrize("name", ["../escape", "/abs", "a//b", "a/./b", "", "a\\b", "nul\x00"])
def test_put_refuses_unsafe_names(tmp_path: Path, name: str) -> None:
    cache = BuildCache(tmp_path / "cache")
    with pytest.raises(GenRepoError):
        cache.put(cache.key(x=1), {name: b"x"})
    assert not (tmp_path / "escape").exists()
    with pytest.raises(GenRepoError, match="both a file and a folder"):
        cache.put(cache.key(x=1), {"a": b"x", "a/b": b"y"})


def test_bad_keys_refused(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path / "cache")
    for key in ["../../etc", "AB" * 32, "ab" * 31, ""]:
        with pytest.raises(ValueError):
            cache.get(key)


def test_dead_writers_temp_folders_are_cleaned(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path / "cache")
    key = cache.key(x=1)
    shard = tmp_path / "cache" / key[:2]
    shard.mkdir(parents=True)
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    (shard / f".tmp-{proc.pid}-abc123").mkdir()
    (shard / f".tmp-{os.getpid()}-def456").mkdir()  # a live writer's: kept
    cache.put(key, {"f": b"x"})
    assert sorted(p.name for p in shard.iterdir()) == sorted([key, f".tmp-{os.getpid()}-def456"])


CONCURRENT_PUT = r"""
import sys, time
from pathlib import Path
from generator.repository.cache import BuildCache
root, go, tag = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
cache = BuildCache(root)
while not go.exists():
    time.sleep(0.001)
for i in range(25):
    key = cache.key(model=i)
    path = cache.put(key, {"model.plan": (tag * 4096 * (i + 1)).encode(), f"meta/{i}.json": tag.encode()})
    assert cache.get(key) == path, i
print("done", flush=True)
"""


def test_concurrent_put_of_same_key_from_two_processes(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT_PUT, str(root), str(go), tag],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("A", "B")
    ]
    go.touch()
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    cache = BuildCache(root)
    for i in range(25):
        stored = cache.get(cache.key(model=i))
        assert stored is not None
        plan = (stored / "model.plan").read_bytes()
        writer = plan[:1].decode()
        assert plan == (writer * 4096 * (i + 1)).encode()  # an entry is wholly one writer's, never a mix
        assert (stored / "meta" / f"{i}.json").read_bytes() == writer.encode()
    leftovers = [p for shard in root.iterdir() for p in shard.iterdir() if p.name.startswith(".")]
    assert leftovers == []


def test_timing_cache_path(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path / "cache")
    path = cache.timing_cache_path("10.8.0", "NVIDIA H200/sm_90")
    assert path.parent.is_dir() and tmp_path / "cache" in path.parents
    assert path != cache.timing_cache_path("10.9.0", "NVIDIA H200/sm_90")
    assert cache.timing_cache_path().name == "timing.cache"
    write_atomically(path, b"timing", durable=True)
    write_atomically(path, b"timing 2", durable=True)
    assert path.read_bytes() == b"timing 2"
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_manifest_is_plain_json(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path / "cache")
    key = cache.key(x=1)
    stored = cache.put(key, {"a": b"x"})
    manifest = json.loads((stored.parent / "manifest.json").read_text())
    files = {"a": {"sha256": hash_bytes(b"x"), "size": 1}}
    body = canonical_json({"format": "gen-repo-cache/2", "key": key, "files": files}).encode("ascii")
    secret = os.environ["GEN_REPO_CACHE_SECRET"].encode()
    assert manifest == {
        "format": "gen-repo-cache/2",
        "key": key,
        "files": files,
        "mac": hmac.new(secret, body, hashlib.sha256).hexdigest(),
    }


def test_clean_leftovers_removes_work_folders_of_killed_builds_only(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    cache = BuildCache(tmp_path)
    killed = [tmp_path / f".build-{dead_pid}-ab12_x", tmp_path / f".scratch-{dead_pid}-zz9"]
    alive = [tmp_path / f".build-{os.getpid()}-cd34", tmp_path / "ab"]  # ours, and a shard folder
    for folder in killed + alive:
        folder.mkdir()
        (folder / "file").write_bytes(b"x")
    cache.clean_leftovers()
    assert [p.exists() for p in killed] == [False, False]
    assert [p.exists() for p in alive] == [True, True]


# ---- signed entries: whoever writes the cache cannot smuggle bytes (issue 21) --------------------------------------
def _poison(stored: Path, name: str, data: bytes, *, secret: bytes | None = None) -> None:
    """Replace an entry's file and recompute its manifest, as someone who can write the cache would."""
    (stored / name).write_bytes(data)
    manifest_path = stored.parent / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["files"][name] = {"sha256": hash_bytes(data), "size": len(data)}
    if secret is not None:  # signed too, but with a secret of their own
        body = canonical_json({k: manifest[k] for k in ("format", "key", "files")}).encode("ascii")
        manifest["mac"] = hmac.new(secret, body, hashlib.sha256).hexdigest()
    manifest_path.write_text(json.dumps(manifest))


@pytest.mark.parametrize("resigned", [False, True], ids=["recomputed-sha256", "resigned-with-another-secret"])
def test_an_entry_with_recomputed_metadata_is_not_served(tmp_path: Path, resigned: bool) -> None:
    cache = BuildCache(tmp_path / "cache")
    key = cache.key(x=1)
    stored = cache.put(key, {"model.onnx": b"the real model", "gen_repo/contract.json": b"{}"})
    _poison(stored, "model.onnx", b"smuggled bytes!", secret=b"not the cache's secret at all" if resigned else None)
    assert cache.get(key) is None  # a miss: the build makes it again
    assert not cache.entry_path(key).exists()  # and the bad entry is gone
    assert not cache.copy_entry(key, tmp_path / "staged")


def test_copy_entry_hashes_what_it_copies(tmp_path: Path) -> None:
    """A file swapped after get() checked the entry is caught by the copy itself (nothing is read twice)."""
    cache = BuildCache(tmp_path / "cache")
    key = cache.key(x=2)
    stored = cache.put(key, {"model.onnx": b"the real model", "sub/ref.npz": b"ref"})
    assert cache.get(key) == stored
    assert cache.copy_entry(key, tmp_path / "good")
    assert (tmp_path / "good" / "model.onnx").read_bytes() == b"the real model"
    assert (tmp_path / "good" / "sub" / "ref.npz").read_bytes() == b"ref"
    (stored / "model.onnx").write_bytes(b"the fake model")  # same size, after the check
    assert not cache.copy_entry(key, tmp_path / "bad")
    (stored / "model.onnx").unlink()
    (stored / "model.onnx").symlink_to(tmp_path / "good" / "model.onnx")  # the real bytes, through a symlink
    assert not cache.copy_entry(key, tmp_path / "linked")


def test_the_per_user_secret_is_made_once_private_and_outside_the_cache(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEN_REPO_CACHE_SECRET")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    path = secret_file()
    assert path == tmp_path / "config" / "gen-repo" / "cache-secret"
    first = cache_secret(tmp_path / "cache")
    assert len(first) == 64 and path.stat().st_mode & 0o777 == 0o600
    assert cache_secret(tmp_path / "cache") == first
    assert sorted(os.listdir(path.parent)) == ["cache-secret"]  # no temp file left
    # An entry signed with it is served; with another secret it is not.
    cache = BuildCache(tmp_path / "cache")
    key = cache.key(x=3)
    cache.put(key, {"a": b"x"})
    assert cache.get(key) is not None
    assert BuildCache(tmp_path / "cache", secret=b"another secret of 32 bytes......").get(key) is None


def test_a_secret_others_can_read_or_that_lies_in_the_cache_is_refused(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEN_REPO_CACHE_SECRET")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    cache_secret(tmp_path / "cache")
    path = secret_file()
    path.chmod(0o644)
    with pytest.raises(GenRepoError, match=r"cache secret file is open to others \(mode 644\)"):
        cache_secret(tmp_path / "cache")
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").write_text("x" * 64)
    with pytest.raises(GenRepoError, match="a symlink is refused"):
        cache_secret(tmp_path / "cache")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cache" / "config"))
    with pytest.raises(GenRepoError, match="lies inside the cache folder"):
        BuildCache(tmp_path / "cache").put(cache_key(x=1), {"a": b"x"})
    monkeypatch.setenv("GEN_REPO_CACHE_SECRET", "short")
    with pytest.raises(GenRepoError, match="at least 16 bytes"):
        cache_secret(tmp_path / "cache")
