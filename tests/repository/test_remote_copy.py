"""The copy of a bucket's repository that ``smoke --repo`` and ``report`` read (generator/repository/remote_copy.py):
listing first, only locked objects fetched, within their locked sizes (issue 37's "memory on remote reads")."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings

from generator.repository.lock import LOCK_FILE_NAME
from generator.repository.remote_copy import download_repository
from generator.repository.storage_errors import StorageError
from generator.repository.storage_urls import parse_url
from generator.repository.verify import verify_published
from tests.object_stores import PLANTS, CountingFilesystem, ObjectStore, plant_objects

#: The kinds of object tests/object_stores.py PLANTS plants, and where an unlisted one goes: every one is drawn.
PLANT_KINDS = frozenset({"unlisted", "grown", "changed", "bytecode"})
PLANT_PLACES = frozenset({"", "x", "1/", "warmup/1/", "__pycache__/"})


@pytest.mark.slow
def test_the_copy_fetches_no_planted_object_and_holds_only_what_the_lock_lists(
        store: ObjectStore, tmp_path_factory, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Objects planted by the generator (unlisted anywhere, grown past the lock's size, changed at it, bytecode):
    the copy smoke and report make fetches not a byte of the unlisted and grown ones, says of each what verify says,
    removes the changed one after hashing it, and holds exactly the lock file and the locked objects that match.
    Every kind of object, and an unlisted one in every place, is planted (the explicit examples hold that)."""
    monkeypatch.setenv("GEN_REPO_MAX_BYTECODE_BYTES", "1MiB")
    drawn: set[tuple[str, str]] = set()

    @settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
              phases=[Phase.explicit, Phase.reuse, Phase.generate])  # no shrinking: each example uploads megabytes
    @given(plants=PLANTS)
    @example(plants=[("unlisted", "alpha/1/part0.bin", ""), ("grown", "alpha/1/part1.bin", "x"),
                     ("changed", "beta/1/part2.bin", "1/"), ("bytecode", "beta/1/part0.bin", "warmup/1/")])
    @example(plants=[("unlisted", "alpha/1/part0.bin", "x"), ("unlisted", "alpha/1/part1.bin", "1/"),
                     ("unlisted", "beta/1/part2.bin", "warmup/1/"), ("unlisted", "beta/1/part0.bin", "__pycache__/")])
    def run(plants: list[tuple[str, str, str]]) -> None:
        drawn.update((kind, where if kind == "unlisted" else "") for kind, _, where in plants)
        _copy_holds_only_what_the_lock_lists(plants, store, tmp_path_factory)

    run()
    assert {kind for kind, _ in drawn} == PLANT_KINDS, drawn
    assert {where for kind, where in drawn if kind == "unlisted"} == PLANT_PLACES, drawn


def _copy_holds_only_what_the_lock_lists(plants: list[tuple[str, str, str]], store: ObjectStore,
                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    prefix = f"copy-{os.getpid()}-{time.monotonic_ns()}"
    local = tmp_path_factory.mktemp("remote") / "repo"
    unread, changed = plant_objects(store, prefix, local, plants)
    url = store.url(prefix)
    counting = CountingFilesystem(store.fs())
    copy = download_repository(url, tmp_path_factory.mktemp("copy") / "repo", counting)
    for key in unread:
        assert counting.fetched.get(store.key(prefix, key), 0) == 0, (key, counting.fetched)
    assert sorted(map(str, copy.problems)) == sorted(map(str, verify_published(url, store.fs()).problems))
    target = parse_url(url)
    assert {p.file for p in copy.problems} == {target.object_url(k) for k in [*unread, *changed]}, copy.problems
    artifacts = json.loads((local / LOCK_FILE_NAME).read_bytes())["artifacts"]
    intact = {*artifacts, LOCK_FILE_NAME} - set(unread) - changed
    assert {p.relative_to(copy.folder).as_posix() for p in copy.folder.rglob("*") if p.is_file()} == intact
    for rel in intact:
        assert (copy.folder / rel).read_bytes() == (local / rel).read_bytes()
    assert copy.artifacts == len(artifacts)


@pytest.mark.slow
def test_smoke_and_report_refuse_or_show_planted_objects_unfetched(store: ObjectStore, tmp_path: Path) -> None:
    """Through the real CLI: ``smoke --repo URL`` refuses a bucket that differs from its lock (exit 2, each object
    named) before any server is asked; ``report URL`` shows each one as a difference from the lock."""
    import subprocess

    from tests.process_helpers import gen_repo_script

    prefix = f"cli-{os.getpid()}-{time.monotonic_ns()}"
    unread, _ = plant_objects(store, prefix, tmp_path / "repo", [("unlisted", "alpha/1/part0.bin", "1/"),
                                                                 ("grown", "beta/1/part2.bin", "")])
    url = store.url(prefix)
    objects = [parse_url(url).object_url(key) for key in unread]
    smoke = subprocess.run([gen_repo_script(), "smoke", "--url", "127.0.0.1:1", "--repo", url], capture_output=True,
                           text=True, timeout=120, env={**os.environ, **store.env})
    assert smoke.returncode == 2 and "Traceback" not in smoke.stderr, smoke.stdout + smoke.stderr
    assert all(f"error: {o}: " in smoke.stderr for o in objects), smoke.stderr
    page = tmp_path / "report.html"
    report = subprocess.run([gen_repo_script(), "report", url, "-o", str(page)], capture_output=True, text=True,
                            timeout=120, env={**os.environ, **store.env})
    assert report.returncode == 0, report.stdout + report.stderr
    assert all(o in page.read_text(encoding="utf-8") for o in objects)


def test_a_bucket_with_no_lock_is_not_copied(store: ObjectStore, tmp_path: Path) -> None:
    """Nothing bounds what to fetch from a bucket without a lock file: refused, located, nothing written."""
    prefix = f"nolock-{os.getpid()}-{time.monotonic_ns()}"
    store.fs().pipe_file(store.key(prefix, "mlp/config.pbtxt"), b'name: "mlp"')
    with pytest.raises(StorageError) as raised:
        download_repository(store.url(prefix), tmp_path / "copy")
    lock = parse_url(store.url(prefix)).object_url(LOCK_FILE_NAME)
    assert [str(p) for p in raised.value.problems] == [f"{lock}: /: missing: not a repository published by gen-repo"]
    assert not (tmp_path / "copy").exists()
