"""Names a manifest gives (generator/naming.py, the schema's name patterns): refused where they are, or safe.

Every place the manifest takes a name (a model's name, an ensemble's name, a tensor_names value, an ensemble step's
input and output maps, an ensemble's input and output lists) gets hostile names from hypothesis: control characters,
a final newline (``$`` in a pattern used to match before it), path pieces, gen-repo's own file names, very long or
non-ASCII text. Each is either refused with a problem located at that very place, or planned into a name Triton and a
file system take as it is and a repository path that stays in its model's folder.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.cli import main
from generator.errors import GenRepoError, json_pointer
from generator.manifest.loading import load_manifest
from generator.naming import MAX_MODEL_NAME_LENGTH, RESERVED_NAMES, model_name_problems
from generator.planning.model_files import CONTRACT_FILE, config_files
from generator.planning.plan import plan_repository
from generator.repository.lock import LOCK_FILE_NAME, STAGING_MARKER
from generator.repository.publish_lock import LOCK_OBJECT
from tests.manifest_helpers import batch_graph

#: What a planned name must be when a hostile one is accepted (gen-repo's own rules, stricter than Triton's).
MODEL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
TENSOR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
HOSTILE = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SPECIAL_NAMES = [
    "mlp\n", "mlp\r\n", "\n", "mlp\x00", "ml\x1b[31mp", "mlp\u2028", "mlp ", " mlp", "m l p", "", ".", "..",
    "../x", "a/b", "a\\b", "/abs", ".hidden", "-dash", "x" * (MAX_MODEL_NAME_LENGTH + 1),
    "\uff4d\uff4c\uff50", "mlp\ud800",
    "gen-repo.lock.json", "GEN-REPO.LOCK.JSON", "gen_repo", ".gen-repo-staging.json", ".gen-repo-publish.lock",
    "config.pbtxt", "1", "x.y-z_0",
]


def hostile_names() -> st.SearchStrategy[str]:
    control = st.characters(min_codepoint=0, max_codepoint=0x1F) | st.sampled_from(["\x7f", "\u2028", "\ufeff"])
    return st.one_of(
        st.sampled_from(SPECIAL_NAMES),
        st.text(max_size=40),
        st.builds(lambda base, end: base + end,
                  st.from_regex(TENSOR_NAME, fullmatch=True).filter(lambda s: len(s) < 60),
                  st.text(control, min_size=1, max_size=3)),
        st.from_regex(MODEL_NAME, fullmatch=True).filter(lambda s: len(s) < 60),
    )


def test_reserved_names_are_the_names_gen_repo_writes() -> None:
    written = {LOCK_FILE_NAME, STAGING_MARKER, LOCK_OBJECT, PurePosixPath(CONTRACT_FILE).parts[0]}
    assert written == RESERVED_NAMES


@pytest.mark.parametrize("name", ["mlp\n", "gen-repo.lock.json", "Gen_Repo", "mlp\r"])
def test_plan_and_config_refuse_the_names_of_the_attacks(tmp_path: Path, name: str) -> None:
    """A name ending in a newline used to make a folder named so; a lock file's name passed plan and config."""
    manifest = tmp_path / "gen-repo.json"
    manifest.write_text(json.dumps({"defaults": {"target": "onnx"}, "models": [{"name": name, "spec": batch_graph()}]}))
    for args in (["plan", str(manifest)], ["config", str(manifest), "-o", str(tmp_path / "out")]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, result.output
        assert f"error: {manifest}: /models/0/name: model name {name!r}" in result.output
    assert not (tmp_path / "out").exists()


def test_model_names_are_matched_whole() -> None:
    assert model_name_problems("mlp") == []
    assert model_name_problems("mlp\n") == ["model name 'mlp\\n' may only use letters, digits, '_', '-' and '.' "
                                            "(not first)"]


# ------------------------------------------------------------------------------------------------ the property
def _document(model: dict[str, Any] | None = None, ensemble: dict[str, Any] | None = None) -> dict[str, Any]:
    document: dict[str, Any] = {"defaults": {"target": "onnx"},
                                "models": [{"name": "mlp", "spec": batch_graph(), **(model or {})}]}
    if ensemble is not None:
        steps = [{"model": "mlp", "inputs": {"input_x": "x"}, "outputs": {"output": "y"}}]
        document["ensembles"] = [{"name": "ens", "steps": steps, **ensemble}]
    return document


def _judge(document: dict[str, Any], place: tuple[str | int, ...]) -> None:
    """Refused with a problem at ``place`` (or below it), or planned into safe names and confined paths."""
    pointer = json_pointer(place)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "gen-repo.json"
        path.write_text(json.dumps(document), encoding="utf-8")
        try:
            plan = plan_repository(load_manifest(path))
        except GenRepoError as error:
            assert any(p.pointer == pointer or p.pointer.startswith(pointer + "/") for p in error.problems), [
                str(p) for p in error.problems]
            return
    planned = [*plan.models, *plan.ensembles]
    for model in planned:
        assert MODEL_NAME.fullmatch(model.name) and len(model.name) <= MAX_MODEL_NAME_LENGTH, model.name
        assert model.name.casefold() not in {n.casefold() for n in RESERVED_NAMES}
        tensors = [*model.config.input, *model.config.output]
        assert all(TENSOR_NAME.fullmatch(t.name) and len(t.name) <= 256 for t in tensors), [t.name for t in tensors]
    for relative in config_files(plan):
        parts = PurePosixPath(relative).parts
        assert not PurePosixPath(relative).is_absolute() and ".." not in parts
        assert parts[0] in {m.name for m in planned}


@HOSTILE
@given(hostile_names())
def test_hostile_model_names(name: str) -> None:
    _judge(_document({"name": name}), ("models", 0, "name"))


@HOSTILE
@given(hostile_names())
def test_hostile_ensemble_names(name: str) -> None:
    _judge(_document(ensemble={"name": name}), ("ensembles", 0, "name"))


@HOSTILE
@given(hostile_names())
def test_hostile_tensor_names_values(name: str) -> None:
    _judge(_document({"tensor_names": {"input_x": name}}), ("models", 0, "tensor_names", "input_x"))


@HOSTILE
@given(hostile_names(), st.sampled_from(["inputs", "outputs"]))
def test_hostile_ensemble_tensor_names_in_step_maps(name: str, side: str) -> None:
    key = "input_x" if side == "inputs" else "output"
    ensemble = {"steps": [{"model": "mlp", "inputs": {"input_x": "x"}, "outputs": {"output": "y"}}]}
    ensemble["steps"][0][side][key] = name
    _judge(_document(ensemble=ensemble), ("ensembles", 0, "steps", 0, side, key))


@HOSTILE
@given(hostile_names(), st.sampled_from(["inputs", "outputs"]))
def test_hostile_keys_of_step_maps(name: str, side: str) -> None:
    """A step map's key names a step model's tensor: an unknown (hostile) one is refused where it stands."""
    ensemble = {"steps": [{"model": "mlp", "inputs": {"input_x": "x"}, "outputs": {"output": "y"}}]}
    ensemble["steps"][0][side] = {name: "x" if side == "inputs" else "y"}
    _judge(_document(ensemble=ensemble), ("ensembles", 0, "steps", 0, side))


@HOSTILE
@given(hostile_names())
def test_hostile_step_model_references(name: str) -> None:
    ensemble = {"steps": [{"model": name, "inputs": {"input_x": "x"}, "outputs": {"output": "y"}}]}
    _judge(_document(ensemble=ensemble), ("ensembles", 0, "steps", 0, "model"))


@HOSTILE
@given(hostile_names(), st.sampled_from(["inputs", "outputs"]))
def test_hostile_ensemble_input_and_output_lists(name: str, side: str) -> None:
    _judge(_document(ensemble={side: [name]}), ("ensembles", 0, side))
