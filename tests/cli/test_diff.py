"""``gen-repo diff OLD NEW`` (generator/cli/diff.py): exit codes, the JSON schema (docs/diff.md), Markdown outputs,
and repositories in object storage; on the example models and their rebuild with known changes
(``variant_example_repository``, tests/diff_helpers.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from generator.repository.publish import publish
from tests.contracts.test_diff import REBUILD_CHANGES
from tests.object_stores import ObjectStore
from tests.process_helpers import gen_repo_script


def _diff(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([gen_repo_script(), "diff", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_json_is_the_documented_schema_and_exit_1_for_breaking(example_repository: Path,
                                                                variant_example_repository: Path,
                                                                tmp_path: Path) -> None:
    old, new = str(example_repository), str(variant_example_repository)
    done = _diff(old, new, "--json", "--markdown", str(tmp_path / "diff.md"), "--summary-md", str(tmp_path / "s.md"))
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert set(doc) == {"schema", "old", "new", "breaking", "compatible", "models", "changes", "unknown"}
    assert (doc["schema"], doc["old"], doc["new"], doc["breaking"], doc["compatible"]) == (
        "gen-repo-diff/1", old, new, 5, 3)
    assert doc["models"] == {"added": [], "removed": [], "changed": ["mlp", "text"], "unchanged": []}
    assert all(set(c) == {"model", "kind", "subject", "axis", "old", "new", "classification", "message"}
               for c in doc["changes"])
    assert [(c["model"], c["kind"], c["subject"], c["axis"], c["classification"]) for c in doc["changes"]] == \
        REBUILD_CHANGES
    assert done.stdout == json.dumps(doc, indent=2, sort_keys=True) + "\n"  # keys sorted, indent 2
    markdown = (tmp_path / "diff.md").read_text()
    assert "| text | breaking | input\\_removed | input:input\\_attention\\_mask |" in markdown  # as text, escaped
    summary = (tmp_path / "s.md").read_text()
    assert summary.startswith("### ❌ gen-repo diff") and "**5** breaking" in summary
    # Breaking rows come first in the summary.
    rows = [line for line in summary.splitlines() if line.startswith("| text") or line.startswith("| mlp")]
    assert [("breaking" in row) for row in rows] == [True] * 5 + [False] * 3
    assert "[diff (Markdown)](" in summary
    # --summary-md appends: a second run adds a second section.
    again = _diff(str(example_repository / "mlp" / "1"), str(variant_example_repository / "mlp" / "1"),
                  "--summary-md", str(tmp_path / "s.md"))
    assert again.returncode == 0, again.stdout + again.stderr
    text = (tmp_path / "s.md").read_text()
    assert text.startswith(summary) and text.count("### ") == 2 and "### ✅ gen-repo diff" in text


def test_table_output_and_exit_0_for_compatible_changes(example_repository: Path,
                                                        variant_example_repository: Path) -> None:
    done = _diff(str(example_repository / "mlp" / "1"), str(variant_example_repository / "mlp" / "1"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "output_added" in done.stdout and "max_batch_size_raised" in done.stdout
    assert "0 breaking, 2 compatible change(s)" in " ".join(done.stdout.split())
    same = _diff(str(example_repository), str(example_repository), "--json")
    assert same.returncode == 0 and json.loads(same.stdout)["models"]["unchanged"] == ["mlp", "text"]


def test_bad_input_is_exit_2_located_without_a_traceback(example_repository: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(example_repository, broken)
    (broken / "text" / "1" / "gen_repo" / "contract.json").write_text("[]")
    done = _diff(str(tmp_path / "missing"), str(broken), "--summary-md", str(tmp_path / "summary.txt"))
    assert done.returncode == 2, done.stdout + done.stderr
    section = (tmp_path / "summary.txt").read_text()  # bad input gets its section too, every problem in it
    assert section.startswith("### ❌ gen-repo diff") and "not a gen-repo contract" in section
    assert "Traceback" not in done.stderr
    assert f"error: {tmp_path / 'missing'}: /: not a folder" in done.stderr
    assert f"error: {broken / 'text' / '1' / 'gen_repo' / 'contract.json'}: /: not a gen-repo contract" in done.stderr
    assert not list(tmp_path.glob("*.md"))
    unwritable = _diff(str(broken / "mlp" / "1"), str(broken / "mlp" / "1"), "--markdown",
                       str(tmp_path / "no-such-folder" / "diff.md"))
    assert unwritable.returncode == 2 and "cannot write" in unwritable.stderr, unwritable.stderr


def test_a_contract_naming_another_model_is_exit_2_at_its_model_field(example_repository: Path,
                                                                        tmp_path: Path) -> None:
    """A contract describes the model of its own folder: text's contract claiming to be mlp (or a path) is bad input
    located at its /model, not a comparison of the wrong model."""
    for named in ("mlp", "../mlp"):
        renamed = tmp_path / f"renamed-{len(named)}"
        shutil.copytree(example_repository, renamed)
        contract = renamed / "text" / "1" / "gen_repo" / "contract.json"
        contract.write_text(json.dumps({**json.loads(contract.read_text()), "model": named}))
        done = _diff(str(example_repository), str(renamed))
        assert done.returncode == 2, done.stdout + done.stderr
        assert f"error: {contract}: /model: names the model {named!r}, but the contract lies in the model folder " \
               "'text'" in done.stderr
        assert "Traceback" not in done.stderr


def test_markdown_replaces_a_planted_symlink_and_a_symlinked_summary_is_refused(example_repository: Path,
                                                                                tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.write_text("precious")
    markdown = tmp_path / "diff.md"
    markdown.symlink_to(target)
    old = str(example_repository / "mlp" / "1")
    done = _diff(old, old, "--markdown", str(markdown))
    assert done.returncode == 0, done.stdout + done.stderr
    assert not markdown.is_symlink() and "gen-repo diff" in markdown.read_text()
    summary = tmp_path / "summary.md"
    summary.symlink_to(target)
    done = _diff(old, old, "--summary-md", str(summary))
    assert done.returncode == 2 and f"error: {summary}: /: --summary-md: cannot write this file: it is a " \
                                   "symlink" in done.stderr, done.stderr
    assert target.read_text() == "precious"


@pytest.mark.slow
def test_a_published_repository_is_compared_in_place(store: ObjectStore, example_repository: Path,
                                                      variant_example_repository: Path) -> None:
    """s3:// and gs:// on the loopback stores: the served version's contracts are read from the bucket (only configs
    and contracts are fetched, each within its limit), and an endpoint nobody answers on is exit 3."""
    url = store.url("diffed")
    publish(example_repository, url)
    done = _diff(url, str(variant_example_repository), "--json")
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert doc["old"] == url
    assert [(c["model"], c["kind"], c["subject"], c["axis"], c["classification"]) for c in doc["changes"]] == \
        REBUILD_CHANGES
    version = _diff(f"{url}/mlp/1", str(variant_example_repository / "mlp" / "1"))
    assert version.returncode == 0, version.stdout + version.stderr
    too_large = _diff(url, str(variant_example_repository), env={"GEN_REPO_MAX_CONFIG_BYTES": "64"})
    assert too_large.returncode == 2, too_large.stdout + too_large.stderr
    assert f"error: {url}/mlp/config.pbtxt: /: file is " in too_large.stderr
    assert f"error: {url}/text/config.pbtxt: /: file is " in too_large.stderr  # every problem at once
    # gcsfs retries an unreachable endpoint for about 35 s: tests/repository/test_storage.py covers it.
    if store.kind == "s3":
        dead = _diff(store.dead_url("diffed"), str(variant_example_repository), env=store.dead_env())
        assert dead.returncode == 3, dead.stdout + dead.stderr
        assert "Traceback" not in dead.stderr


def test_a_tuned_rebuild_is_compatible_and_says_so(example_repository: Path, tuned_example_repository: Any) -> None:
    done = _diff(str(example_repository), str(tuned_example_repository.repo), env={"COLUMNS": "400"})
    assert done.returncode == 0, done.stdout + done.stderr
    flat = " ".join(done.stdout.split())
    assert "0 breaking, 2 compatible change(s)" in flat
    assert "instance_group KIND_CPU x2 -> KIND_CPU x3" in flat
    assert "max_queue_delay_microseconds 100 -> 500" in flat
