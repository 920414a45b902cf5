"""generator/tuning/manifest_block.py: the tuned: block written into the manifest's text, everything else kept."""

from __future__ import annotations

import datetime
import hashlib
import shutil
from pathlib import Path

import pytest
import yaml

from generator.errors import GenRepoError
from generator.manifest.loading import load_manifest
from generator.tuning.manifest_block import tuned_block, write_tuned
from generator.tuning.measure import Candidate, LevelResult
from generator.tuning.space import Setting

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _project(tmp_path: Path, extra: str = "") -> Path:
    shutil.copytree(EXAMPLES / "specs", tmp_path / "specs")
    manifest = tmp_path / "gen-repo.yaml"
    manifest.write_text((EXAMPLES / "gen-repo.yaml").read_text() + extra)
    return manifest


def _block(count: int, delay: int = 500, preferred: tuple[int, ...] = ()) -> dict:
    best = Candidate(Setting(count, "KIND_CPU", delay, preferred), [LevelResult(8, 412.04, 0.0412, 3.0, 12.34, 3)],
                     412.04)
    return tuned_block(best, hardware="2 CPUs (Intel: x), no GPU", engine="loop", concurrency=[8],
                       at=datetime.datetime(2026, 12, 6, 8, 0, tzinfo=datetime.timezone.utc))


def test_the_block_lands_in_the_entry_and_the_manifest_loads_it_back(tmp_path):
    manifest = _project(tmp_path)
    before = manifest.read_text()
    write_tuned(manifest, {"text": _block(2)})
    after = manifest.read_text()
    # Only lines were added: every comment and line of the user's file is still there, in order.
    assert [line for line in after.splitlines() if line in before.splitlines()] == before.splitlines()
    loaded = {m.name: m for m in load_manifest(manifest).models}
    assert loaded["mlp"].tuned is None
    assert loaded["text"].tuned == {
        "instance_group": [{"kind": "KIND_CPU", "count": 2}],
        "dynamic_batching": {"max_queue_delay_microseconds": 500, "preferred_batch_size": []},
        "measured": {"at": "2026-12-06T08:00:00Z", "hardware": "2 CPUs (Intel: x), no GPU", "engine": "loop",
                     "concurrency": [8], "throughput": 412.0, "noise": 0.041, "p99_ms": 12.3,
                     "gen_repo": loaded["text"].tuned["measured"]["gen_repo"],
                     # The schema's definition: sha256 of the settings as canonical JSON, 16 hex digits.
                     "settings_digest": "sha256:" + hashlib.sha256(
                         b'{"dynamic_batching":{"max_queue_delay_microseconds":500,"preferred_batch_size":[]},'
                         b'"instance_group":[{"count":2,"kind":"KIND_CPU"}]}').hexdigest()[:16]},
    }


def test_tuning_again_replaces_the_block_and_is_byte_stable(tmp_path):
    manifest = _project(tmp_path)
    write_tuned(manifest, {"mlp": _block(3), "text": _block(2)})
    once = manifest.read_bytes()
    write_tuned(manifest, {"mlp": _block(3), "text": _block(2)})
    assert manifest.read_bytes() == once  # same settings, same bytes
    write_tuned(manifest, {"mlp": _block(1, 0, (4, 8))})
    doc = yaml.safe_load(manifest.read_text())
    assert doc["models"][0]["tuned"]["instance_group"] == [{"kind": "KIND_CPU", "count": 1}]
    assert doc["models"][0]["tuned"]["dynamic_batching"]["preferred_batch_size"] == [4, 8]
    assert doc["models"][1]["tuned"]["instance_group"] == [{"kind": "KIND_CPU", "count": 2}]
    assert manifest.read_text().count("tuned:") == 2


def test_a_flow_style_entry_gets_a_flow_block(tmp_path):
    manifest = _project(tmp_path, "  - {name: mlp2, spec: specs/mlp.graphspec.json}  # flow\n")
    write_tuned(manifest, {"mlp2": _block(2)})
    doc = yaml.safe_load(manifest.read_text())
    assert doc["models"][2]["tuned"]["instance_group"] == [{"kind": "KIND_CPU", "count": 2}]
    assert manifest.read_text().rstrip().endswith("# flow")


def test_an_unknown_model_writes_nothing(tmp_path):
    manifest = _project(tmp_path)
    before = manifest.read_bytes()
    with pytest.raises(GenRepoError) as caught:
        write_tuned(manifest, {"text": _block(2), "nope": _block(2)})
    assert caught.value.problems[0].pointer == "/models" and "'nope'" in caught.value.problems[0].message
    assert manifest.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gen-repo.yaml", "specs"]  # no temporary file left
