"""The pre-commit hooks in ``.pre-commit-hooks.yaml`` run as pre-commit would run them (no pre-commit, no network):
the ``entry`` command, the hook's ``args`` and, unless ``pass_filenames: false``, the staged files its ``files``
pattern selects; checked on a good and a bad input."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
HOOKS = {hook["id"]: hook for hook in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))}


def _run_hook(hook: dict[str, Any], staged: list[str], cwd: Path, args: list[str] | None = None) -> int:
    """Run ``hook`` in ``cwd`` like pre-commit: entry + args (the user's, else the hook's) + the selected files."""
    entry = shlex.split(hook["entry"])
    assert entry[0] == "gen-repo"  # the console script; run here as this checkout's module
    command = [sys.executable, "-m", "generator.cli", *entry[1:], *(args if args is not None else hook.get("args", []))]
    if hook.get("pass_filenames", True):
        pattern = re.compile(hook.get("files", ""))
        command += [name for name in staged if pattern.search(name)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert "Traceback" not in done.stderr
    return done.returncode


def test_hooks_are_declared() -> None:
    assert set(HOOKS) == {"gen-repo-validate", "gen-repo-lint"}
    for hook in HOOKS.values():
        assert hook["language"] == "python" and hook["entry"].startswith("gen-repo ")


def test_validate_hook_passes_good_specs_and_fails_a_bad_one(tmp_path: Path, aitune_fixture_dir: Path) -> None:
    hook = HOOKS["gen-repo-validate"]
    specs = tmp_path / "specs"
    shutil.copytree(aitune_fixture_dir, specs)
    (tmp_path / "README.md").write_text("not a spec\n")
    good = [*sorted(f"specs/{p.name}" for p in specs.iterdir()), "README.md"]
    assert [n for n in good if re.search(hook["files"], n)] == \
           sorted(f"specs/{p.name}" for p in specs.glob("*.graphspec.json"))  # the tune report needs `files:`
    assert _run_hook(hook, good, tmp_path) == 0
    broken = json.loads((specs / "mlp.graphspec.json").read_text())
    broken["graph"]["input_spec"]["tensor_data"][0]["dtype"] = 42
    (specs / "broken.graphspec.json").write_text(json.dumps(broken))
    assert _run_hook(hook, [*good, "specs/broken.graphspec.json"], tmp_path) == 2


def test_lint_hook_passes_a_good_repository_and_fails_a_bad_one(tmp_path: Path) -> None:
    hook = HOOKS["gen-repo-lint"]
    assert hook["pass_filenames"] is False
    corpus = REPO / "tests" / "lint_corpus"
    shutil.copytree(corpus / "good", tmp_path / "model_repository")  # the hook's default folder
    staged = ["model_repository/simple_add/config.pbtxt"]
    assert re.search(hook["files"], staged[0])
    assert _run_hook(hook, staged, tmp_path) == 0
    assert _run_hook(hook, staged, tmp_path, args=[str(corpus / "bad" / "config-parse")]) == 1
    shutil.rmtree(tmp_path / "model_repository")
    assert _run_hook(hook, staged, tmp_path) != 0  # no folder at all: an error, not a silent pass


@pytest.mark.parametrize("hook_id", ["gen-repo-validate", "gen-repo-lint"])
def test_hook_commands_exist(hook_id: str) -> None:
    """The entry names a real gen-repo command (its --help exits 0)."""
    command = shlex.split(HOOKS[hook_id]["entry"])[1:]
    done = subprocess.run([sys.executable, "-m", "generator.cli", *command, "--help"], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0
