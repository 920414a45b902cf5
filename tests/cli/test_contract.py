"""``gen-repo contract REPO MODEL``: the contract as the client reads it, or the request schema the build wrote."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from generator.cli import main
from generator.client import ModelContract
from generator.contracts.request_schema import REQUEST_SCHEMA_FILE

GOOD = Path(__file__).resolve().parents[1] / "lint_corpus" / "good"


def test_jsonschema_prints_the_built_schema_byte_for_byte(example_repository: Path) -> None:
    for model in ("mlp", "text"):
        result = CliRunner().invoke(main, ["contract", str(example_repository), model, "--format", "jsonschema"])
        assert result.exit_code == 0, result.output
        assert result.stdout == (example_repository / model / "1" / REQUEST_SCHEMA_FILE).read_text(encoding="utf-8")


def test_json_prints_the_contract_the_client_reads(example_repository: Path) -> None:
    result = CliRunner().invoke(main, ["contract", str(example_repository), "text"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert printed == ModelContract.from_repository(example_repository, "text").to_dict()
    on_disk = json.loads((example_repository / "text" / "1" / "gen_repo" / "contract.json").read_text())
    assert [t["value_range"] for t in printed["inputs"] if "value_range" in t] == [
        t["value_range"] for t in on_disk["inputs"] if "value_range" in t] != []


def test_a_repository_gen_repo_did_not_build_gets_a_schema_from_its_config(tmp_path: Path) -> None:
    shutil.copytree(GOOD / "mlp_python", tmp_path / "mlp_python")
    result = CliRunner().invoke(main, ["contract", str(tmp_path), "mlp_python", "--format", "jsonschema"])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.stdout)
    batch = schema["$defs"]["input0"]["properties"]["shape"]["prefixItems"][0]
    assert (batch["minimum"], batch["maximum"]) == (1, 32)  # max_batch_size 32 in its config.pbtxt


def test_no_such_model_is_exit_2_naming_the_folder(example_repository: Path, tmp_path: Path) -> None:
    for model in ("nope", "../elsewhere"):
        result = CliRunner().invoke(main, ["contract", str(example_repository), model, "--format", "jsonschema"])
        assert result.exit_code == 2, result.output
        assert "not a model" in result.output or "must stay inside" in result.output
        assert "Traceback" not in result.output
        assert result.output.startswith(f"error: {example_repository}")
