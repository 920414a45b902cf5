"""Optimization profiles: the manifest's buckets and AITune's saved profiles (generator/planning/profiles.py), the
config's instance groups and batching for them (generator/planning/config.py) and the contract's record of them."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generator.errors import GenRepoError
from generator.planning.config import config_problems
from generator.planning.contract import contract_from_plan
from generator.planning.plan import describe_plan
from generator.planning.profiles import _uncovered
from tests.manifest_helpers import REPO, plan_for, problems_of

BERT = str(REPO / "tests" / "zoo" / "specs" / "bert.graphspec.json")
INPUTS = ("input_input_ids", "input_attention_mask", "input_token_type_ids")
SEQ = "input_input_ids:1"


def _axis(low: int, opt: int, high: int) -> dict[str, int]:
    return {"min": low, "opt": opt, "max": high}


def _bucket(name: str, batch: tuple[int, int, int] | None, seq: tuple[int, int, int] | None) -> dict[str, Any]:
    axes = {**({"batch": _axis(*batch)} if batch else {}), **({SEQ: _axis(*seq)} if seq else {})}
    return {"name": name, "axes": axes}


#: The zoo BERT (batch 1..4, sequence 6..20) in two sequence buckets.
TWO = [_bucket("short", (1, 4, 4), (6, 8, 12)), _bucket("long", (1, 2, 4), (13, 16, 20))]
#: The same buckets as AITune's TensorRT backend saves them (written by its own TensorRTProfile: see the README there).
AITUNE_FILE = json.loads((REPO / "tests" / "data" / "aitune_profiles" / "bert_model_optimization_profiles.json")
                         .read_text())


def _bert(tmp: Path, **options: Any) -> Any:
    return plan_for(tmp, {"models": [{"name": "bert", "spec": BERT, **options}]}).models[0]


def _refused(tmp: Path, **options: Any) -> list[str]:
    with pytest.raises(GenRepoError) as info:
        _bert(tmp, **options)
    assert info.value.exit_code == 2
    return problems_of(info.value)


def test_two_sequence_buckets_give_two_profiles_every_group_lists_both(tmp_path: Path) -> None:
    groups = [{"kind": "KIND_GPU", "gpus": [0]}, {"kind": "KIND_GPU", "count": 2, "gpus": [1]}]
    model = _bert(tmp_path, target="tensorrt", profiles=TWO, instance_group=groups)
    assert [p.name for p in model.profiles] == ["short", "long"]
    for profile, shapes in zip(model.profiles, [((1, 6), (4, 8), (4, 12)), ((1, 13), (2, 16), (4, 20))], strict=True):
        assert [t.name for t in profile.inputs] == list(INPUTS)
        assert {(t.min_shape, t.opt_shape, t.max_shape) for t in profile.inputs} == {shapes}
    assert {(t.min_shape, t.max_shape) for t in model.inputs} == {((1, 6), (4, 20))}  # the contract keeps it all
    assert model.engine_profiles() == [p.inputs for p in model.profiles]
    assert [list(g.profile) for g in model.config.instance_group] == [["0", "1"], ["0", "1"]]
    assert list(model.config.dynamic_batching.preferred_batch_size) == [2, 4]  # the buckets' opt batches
    assert config_problems(model.config, "bert") == []
    words = "\n".join(model.decisions)
    for phrase in ("0 'short': batch 1..4 opt 4, input_input_ids:1 6..12 opt 8",
                   "together they cover the contract's range (batch 1..4 with input_input_ids:1 6..20): every batch "
                   "Triton's dynamic batcher can form, with every shape, has a profile",
                   "profiles 0, 1", "issue #8629", "PR #1987", "preferred_batch_size [2, 4]"):
        assert phrase in words, phrase
    contract = contract_from_plan(model)
    assert [(p["index"], p["name"]) for p in contract["optimization_profiles"]] == [(0, "short"), (1, "long")]
    assert contract["optimization_profiles"][1]["inputs"][0] == {
        "name": "input_input_ids", "min_shape": [1, 13], "opt_shape": [2, 16], "max_shape": [4, 20]}
    described = describe_plan(plan_for(tmp_path, {"models": [{"name": "bert", "spec": BERT, "profiles": TWO}]}))
    assert [p["name"] for p in described["models"][0]["profiles"]] == ["short", "long"]


def test_without_profiles_nothing_changes(tmp_path: Path) -> None:
    model = _bert(tmp_path, target="tensorrt")
    assert model.profiles == () and model.engine_profiles() == [model.inputs]
    assert [list(g.profile) for g in model.config.instance_group] == [["0"]]
    assert list(model.config.dynamic_batching.preferred_batch_size) == []  # one profile: no batch size to prefer
    assert "optimization_profiles" not in contract_from_plan(model)


def test_other_targets_take_the_cases_and_contract_only(tmp_path: Path) -> None:
    model = _bert(tmp_path, target="python", profiles=TWO)
    assert [p.name for p in model.profiles] == ["short", "long"]
    assert "optimization_profiles" in contract_from_plan(model)
    assert not any(g.profile for g in model.config.instance_group)
    assert list(model.config.dynamic_batching.preferred_batch_size) == []  # no TensorRT profiles to prefer
    assert any("target python builds no TensorRT plan" in d for d in model.decisions)


@pytest.mark.parametrize(("profiles", "expected"), [
    ([_bucket("short", (1, 4, 4), (6, 8, 12)), _bucket("short", (1, 2, 4), (13, 16, 20))],
     ["/models/0/profiles/1/name: profile name 'short' is used by /profiles/0 too"]),
    ([_bucket("short", (1, 4, 4), (6, 8, 12)), _bucket("long", (1, 2, 4), (13, 16, 24))],
     ["/models/0/profiles/1/axes/input_input_ids:1/max: profile 'long' input_input_ids:1 max 24 is outside the "
      "spec's range 6..20"]),
    ([_bucket("short", (1, 4, 4), (6, 8, 12)), _bucket("long", (1, 2, 8), (13, 16, 20))],
     ["/models/0/profiles/1/axes/batch/max: profile 'long' batch max 8 is outside the spec's range 1..max_batch_size "
      "4"]),
    ([_bucket("short", (1, 4, 2), (6, 8, 12))],
     ["/models/0/profiles/0/axes/batch/opt: profile 'short' batch: min 1, opt 4, max 2 must satisfy min <= opt"]),
    ([{"name": "a", "axes": {"seq": _axis(6, 8, 20)}}],
     ["/models/0/profiles/0/axes/seq: profile 'a': no dynamic axis 'seq' in this model (axes: batch = "
      "input_input_ids axis 0, input_attention_mask axis 0, input_token_type_ids axis 0: 1..4 opt 4; "
      "input_input_ids:1 = input_input_ids axis 1, input_attention_mask axis 1, input_token_type_ids axis 1: 6..20 "
      "opt 20)"]),
    ([{"name": "a", "axes": {"input_attention_mask:0": _axis(1, 2, 4)}}],
     ["/models/0/profiles/0/axes/input_attention_mask:0: profile 'a': 'input_attention_mask:0' is a batch axis; "
      "name it 'batch'"]),
    ([{"name": "a", "axes": {SEQ: _axis(6, 8, 20), "input_token_type_ids:1": _axis(6, 8, 20)}}],
     ["/models/0/profiles/0/axes/input_token_type_ids:1: profile 'a' names axis 'input_input_ids:1' twice (as "
      "'input_token_type_ids:1' too); linked axes are one dimension"]),
], ids=["name-twice", "seq-outside", "batch-outside", "min-opt-max", "unknown-axis", "batch-member", "axis-twice"])
def test_bucket_problems_are_located_in_the_manifest(tmp_path: Path, profiles: list[Any],
                                                      expected: list[str]) -> None:
    problems = _refused(tmp_path, profiles=profiles)
    assert len(problems) == len(expected), problems
    for problem, words in zip(problems, expected, strict=True):
        assert problem.startswith(words), problem


def test_buckets_that_leave_a_gap_are_refused_with_the_gap(tmp_path: Path) -> None:
    # "long" stops at batch 2: batch 3..4 of long sequences has no profile, though the batcher can form it.
    (problem,) = _refused(tmp_path, profiles=[_bucket("short", (1, 4, 4), (6, 8, 12)),
                                              _bucket("long", (1, 2, 2), (13, 16, 20))])
    assert problem.startswith("/models/0/profiles: the profiles do not cover the range the contract promises: no "
                              "profile holds batch 3..4 with input_input_ids:1 13..20 (Triton's dynamic batcher "
                              "forms any batch 1..4")
    assert "failed to find any Optimization Profile" in problem and "narrow_to_profiles: true" in problem
    (problem,) = _refused(tmp_path, profiles=[_bucket("short", None, (6, 8, 12))])
    assert "no profile holds batch 1..4 with input_input_ids:1 13..20" in problem


def test_max_batch_size_above_every_profile_is_refused_with_tritons_words(tmp_path: Path) -> None:
    (problem,) = _refused(tmp_path, profiles=[_bucket("short", (1, 2, 2), (6, 8, 12)),
                                              _bucket("long", (1, 2, 2), (13, 16, 20))])
    assert problem.startswith("/models/0/profiles: max_batch_size 4 exceeds the largest profile batch max 2")
    assert ("autofill failed for model 'bert': configuration specified max-batch 4 but TensorRT engine only supports "
            "max-batch 2") in problem
    # A lower max_batch_size fits them (and the profiles' batch is checked against it).
    model = _bert(tmp_path, max_batch_size=2, profiles=[_bucket("short", (1, 2, 2), (6, 8, 12)),
                                                        _bucket("long", (1, 2, 2), (13, 16, 20))])
    assert model.max_batch_size == 2 and len(model.profiles) == 2


def test_narrow_to_profiles_promises_only_their_union(tmp_path: Path) -> None:
    buckets = [_bucket("short", (1, 2, 2), (6, 8, 12)), _bucket("long", (1, 2, 2), (13, 16, 16))]
    model = _bert(tmp_path, target="tensorrt", profiles=buckets, narrow_to_profiles=True)
    assert model.max_batch_size == 2 and model.config.max_batch_size == 2
    assert {(t.min_shape, t.max_shape) for t in model.inputs} == {((1, 6), (2, 16))}
    contract = contract_from_plan(model)
    assert contract["max_batch_size"] == 2 and contract["inputs"][0]["max_shape"] == [2, 16]
    assert {t.max_shape[0] for t in model.outputs} == {2}
    assert any(d.startswith("narrow_to_profiles: the contract promises only the profiles' union, batch 1..2 with "
                            "input_input_ids:1 6..16 (the spec allows batch 1..4 with input_input_ids:1 6..20)")
               for d in model.decisions)
    (problem,) = _refused(tmp_path, narrow_to_profiles=True, profiles=[_bucket("short", (1, 4, 4), (6, 8, 12)),
                                                                       _bucket("long", (1, 2, 2), (13, 16, 20))])
    assert problem.startswith("/models/0/narrow_to_profiles: narrow_to_profiles: the profiles' union is not one box")
    (problem,) = _refused(tmp_path, narrow_to_profiles=True, profiles=[_bucket("big", (2, 4, 4), None)])
    assert "no profile holds batch 1, but Triton's dynamic batcher forms any batch from 1 up" in problem
    (problem,) = _refused(tmp_path, narrow_to_profiles=True)
    assert problem.startswith("/models/0/narrow_to_profiles: narrow_to_profiles needs profiles:")


def test_a_declared_dynamic_dim_names_its_axis(tmp_path: Path) -> None:
    declared = [{"path": name.removeprefix("input_"), "shape": [
        {"type": "BatchDim", "name": "batch", "min": 1, "max": 4},
        {"type": "DynamicDim", "name": "seq", "min": 6, "max": 20, "opt": 16}]} for name in INPUTS]
    buckets = [{"name": "short", "axes": {"seq": _axis(6, 8, 12)}}, {"name": "long", "axes": {SEQ: _axis(13, 16, 20)}}]
    model = _bert(tmp_path, dynamic_shapes=declared, profiles=buckets)
    assert [p.inputs[2].max_shape for p in model.profiles] == [(4, 12), (4, 20)]
    words = "\n".join(model.decisions)
    assert "1 'long': batch 1..4 opt 4, seq 13..20 opt 16" in words  # the plan names the axis by its DynamicDim
    assert "AITune's own TensorRT backend refuses profiles together with dynamic_shapes" in words


def test_overlapping_profiles_get_a_note_on_tritons_choice(tmp_path: Path) -> None:
    model = _bert(tmp_path, profiles=[_bucket("short", None, (6, 8, 14)), _bucket("long", None, (10, 16, 20))])
    (note,) = [d for d in model.decisions if "overlap" in d]
    assert note.startswith("profiles 'short' and 'long' overlap (batch 1..4 with input_input_ids:1 10..14)")
    assert "EvaluateTensorRTContext" in note


# --------------------------------------------------------------------------------------------------------------------
# AITune's saved profiles
# --------------------------------------------------------------------------------------------------------------------
def _aitune(tmp: Path, document: Any, **options: Any) -> Any:
    (tmp / "profiles.json").write_text(json.dumps(document))
    return _bert(tmp, profiles={"aitune": "profiles.json"}, **options)


def test_aitune_profiles_file_gives_the_same_profiles_as_the_buckets(tmp_path: Path) -> None:
    from_file = _aitune(tmp_path, AITUNE_FILE, target="tensorrt")
    from_manifest = _bert(tmp_path / "b", target="tensorrt", profiles=TWO)
    assert [p.name for p in from_file.profiles] == ["aitune_0", "aitune_1"]
    assert [p.inputs for p in from_file.profiles] == [p.inputs for p in from_manifest.profiles]
    assert list(from_file.config.instance_group[0].profile) == ["0", "1"]


@pytest.mark.parametrize(("document", "expected"), [
    ([{"input_input_ids": [[1, 6], [1, 6], [1, 6]], "x": [[1], [1], [1]]}],
     ["/models/0/profiles/aitune: AITune profiles file 'profiles.json' does not fit model 'bert'",
      "/0: TensorRT profile inputs ['input_input_ids', 'x'] do not match recorded tensor inputs "
      "['input_attention_mask', 'input_input_ids', 'input_token_type_ids'] (missing: ['input_attention_mask', "
      "'input_token_type_ids'], unknown: ['x'])."]),
    ([AITUNE_FILE[0], {**AITUNE_FILE[1], "input_attention_mask": [[1, 13], [2, 16], [4, 19]]}],
     ["/models/0/profiles/aitune: AITune profiles file 'profiles.json' does not fit model 'bert'",
      "/1/input_attention_mask/2/1: input 'input_attention_mask' axis 1 has [13, 16, 19], but the linked axis at "
      "/1/input_input_ids has [13, 16, 20]; linked axes are one dimension"]),
    ([{name: [[1, 6], [4, 8], [4, 12, 1]] for name in INPUTS}],
     ["/models/0/profiles/aitune: AITune profiles file 'profiles.json' does not fit model 'bert'",
      "/0/input_input_ids: input 'input_input_ids' has rank 2"]),
    ([[1, 2]], ["/models/0/profiles/aitune: AITune profiles file 'profiles.json' is invalid (see below)",
                "/0: [1, 2] is not of type 'object'"]),
], ids=["names", "linked", "rank", "schema"])
def test_aitune_file_problems_are_located_in_the_file(tmp_path: Path, document: Any, expected: list[str]) -> None:
    (tmp_path / "profiles.json").write_text(json.dumps(document))
    with pytest.raises(GenRepoError) as info:
        _bert(tmp_path, profiles={"aitune": "profiles.json"})
    problems = info.value.problems
    assert problems[0].file.endswith("gen-repo.yaml")
    assert all(p.file == str(tmp_path / "profiles.json") for p in problems[1:len(expected)])
    for problem, words in zip(problems_of(info.value), expected, strict=False):
        assert problem.startswith(words), problem


def test_aitune_samples_used_profiles_are_refused_with_why(tmp_path: Path) -> None:
    # ProfileMode.SAMPLES_USED: one static profile per recorded call (min = opt = max).
    samples = [{name: [[2, 12]] * 3 for name in INPUTS}, {name: [[3, 20]] * 3 for name in INPUTS}]
    with pytest.raises(GenRepoError) as info:
        _aitune(tmp_path, samples)
    (problem,) = problems_of(info.value)
    assert "these look like AITune ProfileMode.SAMPLES_USED profiles (one shape each)" in problem


def test_aitune_file_outside_the_manifest_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "profiles.json").write_text(json.dumps(AITUNE_FILE))
    manifest = tmp_path / "m"
    from generator.manifest.loading import load_manifest
    from tests.manifest_helpers import write_manifest

    manifest.mkdir()
    shutil.copyfile(BERT, manifest / "bert.json")
    path = write_manifest(manifest, {"models": [{"name": "bert", "spec": "bert.json",
                                                 "profiles": {"aitune": "../profiles.json"}}]})
    with pytest.raises(GenRepoError, match="leads outside the manifest's folder") as info:
        load_manifest(path)
    assert [p.pointer for p in info.value.problems] == ["/models/0/profiles/aitune"]


# --------------------------------------------------------------------------------------------------------------------
# The config's options for profiles
# --------------------------------------------------------------------------------------------------------------------
def test_execution_context_allocation_strategy_is_a_backend_parameter(tmp_path: Path) -> None:
    model = _bert(tmp_path, target="tensorrt", profiles=TWO, execution_context_allocation_strategy="ON_PROFILE_CHANGE")
    assert model.config.parameters["execution_context_allocation_strategy"].string_value == "ON_PROFILE_CHANGE"
    assert any("since Triton 25.05" in d for d in model.decisions)
    same = {"execution_context_allocation_strategy": "STATIC"}
    _bert(tmp_path, target="tensorrt", execution_context_allocation_strategy="STATIC", parameters=same)
    (problem,) = _refused(tmp_path, target="tensorrt", execution_context_allocation_strategy="ON_PROFILE_CHANGE",
                          parameters=same)
    assert problem.startswith("/models/0/parameters/execution_context_allocation_strategy: parameters sets")
    (problem,) = _refused(tmp_path, target="onnx", execution_context_allocation_strategy="STATIC")
    assert "applies to the tensorrt target only" in problem


def test_a_fragment_group_with_other_profiles_is_refused(tmp_path: Path) -> None:
    # One group per profile: requests reach either group whatever their shape (server PR #1987).
    (problem,) = _refused(tmp_path, target="tensorrt", profiles=TWO,
                          pbtxt='instance_group [ { kind: KIND_GPU profile: [ "1" ] } ]')
    assert "instance_group 1 lists optimization profiles ['1'], not ['0']" in problem
    (problem,) = _refused(tmp_path, target="tensorrt", profiles=TWO,
                          pbtxt='instance_group [ { kind: KIND_GPU profile: [ "0" ] } ]')
    assert ("instance_group 1 lists optimization profiles ['0'], instance_group 0 ['0', '1']: Triton hands a request "
            "to any instance") in problem


# --------------------------------------------------------------------------------------------------------------------
# Coverage
# --------------------------------------------------------------------------------------------------------------------
_range = st.tuples(st.integers(1, 6), st.integers(0, 3)).map(lambda r: (r[0], r[0] + r[1]))


@settings(max_examples=300)
@given(st.integers(1, 3).flatmap(lambda d: st.tuples(
    st.lists(_range, min_size=d, max_size=d), st.lists(st.lists(_range, min_size=d, max_size=d), max_size=5))))
def test_coverage_agrees_with_every_point(case: tuple[list[tuple[int, int]], list[list[tuple[int, int]]]]) -> None:
    box, buckets = case
    points = list(itertools.product(*(range(lo, hi + 1) for lo, hi in box)))
    covered = [any(all(lo <= x <= hi for x, (lo, hi) in zip(p, b, strict=True)) for b in buckets) for p in points]
    gap = _uncovered(box, buckets, [10_000])
    assert (gap is None) == all(covered)
    if gap is not None:  # a sub-box of the box that no bucket touches
        assert all(blo <= lo <= hi <= bhi for (lo, hi), (blo, bhi) in zip(gap, box, strict=True))
        for point in itertools.product(*(range(lo, hi + 1) for lo, hi in gap)):
            assert not covered[points.index(point)]


def test_the_documented_example_is_what_plan_and_config_give() -> None:
    """docs/tensorrt.md's walk-through of examples/profiles.yaml: its plan lines, config and contract excerpt."""
    from generator.manifest.loading import load_manifest
    from generator.planning.plan import plan_repository

    (model,) = plan_repository(load_manifest(REPO / "examples" / "profiles.yaml")).models
    doc = (REPO / "docs" / "tensorrt.md").read_text()
    block = doc.split("`plan` says what it decided about the profiles", 1)[1].split("```")[1]
    shown = [" ".join(item.split()).split("...")[0].removesuffix("(").strip() for item in block.split("  - ")[1:]]
    decisions = [" ".join(d.split()) for d in model.decisions]
    assert len(shown) == 5
    for line in shown:  # each line the doc quotes is the start of a decision plan makes
        assert any(d.startswith(line) for d in decisions), line
    assert [list(g.profile) for g in model.config.instance_group] == [["0", "1"]]
    assert list(model.config.dynamic_batching.preferred_batch_size) == [4, 16]
    assert model.config.parameters["execution_context_allocation_strategy"].string_value == "ON_PROFILE_CHANGE"
    profiles = contract_from_plan(model)["optimization_profiles"]
    assert profiles[1]["inputs"][0] == {"name": "input_input_ids", "min_shape": [1, 17], "opt_shape": [4, 48],
                                        "max_shape": [16, 64]}
