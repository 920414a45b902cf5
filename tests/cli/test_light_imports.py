"""Commands import only what they use: ``validate``, ``plan``, ``config`` and ``lint`` (and ``init``) never import
torch, onnx, onnxruntime or the build machinery, each checked in a fresh process after the command ran."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

#: Run the command like the console script, then print every module the process imported (stderr, last line).
_DRIVER = """
import json, sys
from generator.cli import main
try:
    main(sys.argv[1:], prog_name="gen-repo")
except SystemExit as exit:
    code = exit.code
else:
    code = 0
print(json.dumps({"exit": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""

#: Never imported by the light commands: deep-learning stacks and gen-repo's build (its export stages included).
FORBIDDEN = ("torch", "onnx", "onnxruntime", "tensorrt", "generator.building")


def _run(args: list[str], cwd: Path) -> tuple[int, list[str]]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", _DRIVER, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    result = json.loads(done.stderr.strip().splitlines()[-1])
    return result["exit"], result["modules"]


def _forbidden(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]


@pytest.fixture(scope="module")
def config_output(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("imports") / "model_repository"


@pytest.mark.parametrize("command", ["validate", "validate-json", "plan", "config", "lint", "init"])
def test_light_commands_never_import_torch_onnx_or_the_build(command: str, config_output: Path, tmp_path: Path,
                                                              aitune_fixture_dir: Path) -> None:
    specs = [str(p) for p in sorted(aitune_fixture_dir.glob("*.json"))]
    args = {
        "validate": ["validate", *specs],
        "validate-json": ["validate", "--json", specs[0]],
        "plan": ["plan", str(EXAMPLES / "gen-repo.yaml")],
        "config": ["config", str(EXAMPLES / "gen-repo.yaml"), "-o", str(config_output)],
        "lint": ["lint", str(config_output)],
        "init": ["init", *(str(shutil.copy(spec, tmp_path)) for spec in specs), "-o", str(tmp_path / "gen-repo.yaml")],
    }[command]
    if command == "lint" and not config_output.exists():
        assert _run(["config", str(EXAMPLES / "gen-repo.yaml"), "-o", str(config_output)], REPO)[0] == 0
    code, modules = _run(args, REPO)
    assert code == (1 if command == "lint" else 0), (command, code)  # lint: findings (a configs-only folder)
    assert _forbidden(modules) == [], command
    # The gRPC client stack is not needed either (generator.triton.proto loads model_config_pb2 alone).
    assert "tritonclient.grpc" not in modules and "grpc" not in modules, command


def test_valid_json_specs_need_neither_jsonschema_nor_numpy_nor_yaml(aitune_fixture_dir: Path) -> None:
    """jsonschema only judges invalid documents, PyYAML only reads .yaml: valid JSON specs never import them."""
    code, modules = _run(["validate", "--json", *map(str, sorted(aitune_fixture_dir.glob("*.json")))], REPO)
    assert code == 0
    assert not [m for m in modules if m.split(".")[0] in ("jsonschema", "numpy", "yaml", "rich")]


def test_the_guard_can_fail(tmp_path: Path) -> None:
    """The check sees a forbidden import when one happens: ``build`` imports generator.building.pipeline (then
    refuses the example's factories without --allow-code)."""
    code, modules = _run(["build", str(EXAMPLES / "gen-repo.yaml"), "-o", str(tmp_path / "out")], REPO)
    assert code == 2
    assert "generator.building.pipeline" in _forbidden(modules)
