"""Ensembles: wiring rules (generator/triton/ensemble.py), manifest planning (ensemble_plan.py), lint, the real Triton.

The zoo's ``bert_classifier`` (a real BERT and a classification head, built, checked against the torch pipeline
and smoke-tested in a real Triton) is in tests/test_zoo.py. Here: every rule located in a manifest, the planted
defect corpus (tests/ensemble_corpus) in lint and in the real Triton, which must refuse each defect at load.
"""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from generator.cli import main
from generator.errors import GenRepoError
from generator.planning.model_files import config_files
from generator.triton.ensemble import (
    Step,
    StepModel,
    Wiring,
    WiringTensor,
    dims_compatible,
    step_order,
    wiring_problems,
)
from tests.lint_cases import lint_repository
from tests.manifest_helpers import REPO, graph, plan_for, problems_of, tensor, write_manifest

CORPUS = Path(__file__).parents[1] / "ensemble_corpus"
CASES = sorted(p.name for p in CORPUS.iterdir() if (p / "expected.json").is_file())
#: What the real Triton (2.51) says when it refuses each planted defect (its reply, or its log for the defects found
#: while polling the repository): a case broken another way fails the test.
TRITON_REFUSALS = {
    "ens_batch_size": "ensemble ens_batch_size allows maximum batch size 64, but it contains model mlp which only "
                      "allows maximum batch size to be 32",
    "ens_data_type": "in ensemble ens_data_type, ensemble tensor x: inconsistent data type: TYPE_INT64 is inferred "
                     "from model ens_data_type while TYPE_FP32 is inferred from model mlp",
    "ens_dims": "in ensemble ens_dims, ensemble tensor x: inconsistent shape: [-1,8] is inferred from model ens_dims "
                "while [-1,16] is inferred from model mlp",
    "ens_input_unmapped": "in ensemble ens_input_unmapped, input input_attention_mask in model text is not mapped to "
                          "any ensemble tensors",
    "ens_map_name": "in ensemble ens_map_name, ensemble tensor x is mapping to non-existing input x in model mlp",
    "ens_model_missing": "ensemble ens_model_missing contains models that are not available or ambiguous: nope",
    "ens_output_not_written": "Poll failed for model directory 'ens_output_not_written': ensemble output 'w' for "
                              "ensemble ens_output_not_written' is not used",
    "ens_two_producers": "Poll failed for model directory 'ens_two_producers': ensemble tensor 'y' can appear in an "
                         "output map only once for ensemble 'ens_two_producers' step 1",
    "ens_unused_input": "Poll failed for model directory 'ens_unused_input': ensemble input 'z' for ensemble "
                        "ens_unused_input' is not used",
    "ens_unused_tensor": "Poll failed for model directory 'ens_unused_tensor': ensemble tensor 'b' is unused in "
                         "ensemble 'ens_unused_tensor'",
}
EXAMPLES = REPO / "examples"


def _examples(ensembles: list[dict]) -> dict:
    """The example models (python target) and ``ensembles``, as a manifest document."""
    return {"defaults": {"target": "python"},
            "models": [{"name": "mlp", "spec": str(EXAMPLES / "specs" / "mlp.graphspec.json")},
                       {"name": "text", "spec": str(EXAMPLES / "specs" / "text.graphspec.json")}],
            "ensembles": ensembles}


MLP_STEP = {"model": "mlp", "inputs": {"input_x": "x"}, "outputs": {"output": "y"}}


# --------------------------------------------------------------------------------------------------------------------
# Planning from the manifest
# --------------------------------------------------------------------------------------------------------------------
def test_a_planned_ensemble_derives_its_tensors_and_writes_a_triton_config(tmp_path):
    plan = plan_for(tmp_path, _examples([{"name": "pipe", "steps": [MLP_STEP]}]))
    (ensemble,) = plan.ensembles
    assert ensemble.max_batch_size == 32
    assert [(t.name, t.data_type, t.dims, t.min_shape, t.max_shape) for t in ensemble.inputs] == \
        [("x", "TYPE_FP32", (16,), (1, 16), (32, 16))]
    assert [(t.name, t.dims) for t in ensemble.outputs] == [("y", (4,))]
    assert "max_batch_size 32: the smallest of the steps'" in ensemble.decisions
    config = ensemble.config
    assert config.platform == "ensemble" and not config.backend and not config.instance_group
    (step,) = config.ensemble_scheduling.step
    assert (step.model_name, step.model_version, dict(step.input_map), dict(step.output_map)) == \
        ("mlp", -1, {"input_x": "x"}, {"output": "y"})
    files = config_files(plan)
    assert {"pipe/config.pbtxt", "pipe/1/gen_repo/contract.json"} <= set(files)
    contract = json.loads(files["pipe/1/gen_repo/contract.json"])
    assert contract["platform"] == "ensemble" and contract["inputs"][0]["max_shape"] == [32, 16]
    assert pickle.loads(pickle.dumps(ensemble)) == ensemble  # the same reduction as a ModelPlan's


def test_every_wiring_problem_is_located_in_the_manifest_at_once(tmp_path):
    bad = [
        {"name": "bad_key", "steps": [{"model": "mlp", "inputs": {"x": "x"}, "outputs": {"output": "y"}}]},
        {"name": "bad_model", "steps": [{**MLP_STEP, "model": "nope"}]},
        {"name": "too_big", "max_batch_size": 64, "steps": [MLP_STEP]},
        {"name": "unused", "outputs": ["y"], "steps": [
            MLP_STEP, {"model": "text", "inputs": {"input_input_ids": "ids", "input_attention_mask": "mask"},
                       "outputs": {"output_0": "a"}}]},
    ]
    with pytest.raises(GenRepoError) as caught:
        plan_for(tmp_path, _examples(bad))
    got = problems_of(caught.value)
    assert "/ensembles/0/steps/0/inputs/x: step 0 ('mlp') has no input 'x' (its inputs: 'input_x')" in got
    assert "/ensembles/0/steps/0: step 0 ('mlp'): input 'input_x' is not mapped to an ensemble tensor" in got
    assert "/ensembles/1/steps/0/model: step 0 ('nope'): no model 'nope' to run" in got
    assert ("/ensembles/2/steps/0/model: ensemble max_batch_size 64 is above the max_batch_size 32 of step 0 "
            "('mlp')") in got
    assert any(p.startswith("/ensembles/3/steps/1/outputs/output_0: ensemble tensor 'a' from step 1 ('text')")
               for p in got), got


IDS_STEP = {"model": "text", "inputs": {"input_input_ids": "ids", "input_attention_mask": "mask"},
            "outputs": {"output_0": "a", "output_1": "b"}}


@pytest.mark.parametrize(("ensemble", "expected"), [
    ({"name": "e", "steps": [MLP_STEP, MLP_STEP]},
     "/ensembles/0/steps/1/outputs/output: ensemble tensor 'y' is produced twice: by step 0 ('mlp') output 'output' "
     "and by step 1 ('mlp') output 'output'"),
    ({"name": "e", "steps": [MLP_STEP, {**IDS_STEP, "inputs": {"input_input_ids": "x", "input_attention_mask": "x"}}]},
     "/ensembles/0/steps/1/inputs/input_input_ids: ensemble tensor 'x': step 1 ('text') input 'input_input_ids' is "
     "TYPE_INT64, ensemble input 'x' is TYPE_FP32"),
    ({"name": "e", "inputs": ["x", "z"], "steps": [MLP_STEP]},
     "/ensembles/0/inputs/1: ensemble input 'z' is not used by any step"),
    ({"name": "e", "outputs": ["y", "w"], "steps": [MLP_STEP]},
     "/ensembles/0/outputs/1: ensemble output 'w' is not written by any step"),
], ids=["two-producers", "data-type", "unused-input", "output-not-written"])
def test_the_corpus_defects_are_refused_in_a_manifest_too(tmp_path, ensemble, expected):
    with pytest.raises(GenRepoError) as caught:
        plan_for(tmp_path, _examples([ensemble]))
    assert expected in problems_of(caught.value), problems_of(caught.value)


def test_gen_repo_plan_shows_the_steps_and_refuses_a_bad_ensemble_with_exit_2(tmp_path):
    document = _examples([{"name": "pipe", "steps": [MLP_STEP]},
                          {"name": "broken", "steps": [{**MLP_STEP, "outputs": {"nope": "y"}}]}])
    result = CliRunner().invoke(main, ["plan", str(write_manifest(tmp_path, document)), "--allow-outside"])
    assert result.exit_code == 2, result.output
    assert "ensemble 'pipe' version 1: max_batch_size 32" in result.output
    assert "step mlp: input_x <- x; output -> y" in result.output
    assert "model 'broken' (/ensembles/1): refused" in result.output
    assert "/ensembles/1/steps/0/outputs/nope: step 0 ('mlp') has no output 'nope'" in result.output


def test_an_ensemble_name_may_not_take_a_models_folder(tmp_path):
    with pytest.raises(GenRepoError) as caught:
        plan_for(tmp_path, _examples([{"name": "mlp", "steps": [MLP_STEP]}]))
    assert problems_of(caught.value) == ["/ensembles/0/name: ensemble name 'mlp' clashes with model 'mlp' (each "
                                         "needs its own folder)"]


def _chain(producer_high: int, consumer_high: int) -> dict:
    """Two models, a -> b, whose sequence axis ranges are 4..producer_high and 4..consumer_high."""
    def model(name: str, high: int) -> dict:
        spec = graph([tensor("x", ["batch0", "dim1"], [1, 4], [8, high])],
                     [tensor([], ["batch0", "dim1"], [1, 4], [8, high])], name=name)
        return {"name": name, "spec": spec, "target": "python"}

    return {"models": [model("a", producer_high), model("b", consumer_high)], "ensembles": [
        {"name": "ab", "steps": [{"model": "a", "inputs": {"input_x": "x"}, "outputs": {"output": "t"}},
                                 {"model": "b", "inputs": {"input_x": "t"}, "outputs": {"output": "y"}}]}]}


def test_a_producer_range_beyond_its_consumers_is_refused_before_triton_would_fail_a_request(tmp_path):
    assert plan_for(tmp_path / "fits", _chain(32, 64)).ensembles[0].step_order == (0, 1)
    with pytest.raises(GenRepoError) as caught:
        plan_for(tmp_path / "wide", _chain(64, 32))
    (problem,) = problems_of(caught.value)
    assert problem.startswith("/ensembles/0/steps/1/inputs/input_x: ensemble tensor 't': step 0 ('a') output "
                              "'output' makes shapes [1, 4]..[8, 64], which step 1 ('b') input 'input_x' does not "
                              "accept (axis 1: 4..64 produced, 4..32 accepted)"), problem


def test_an_input_whose_consumers_share_no_shape_is_refused(tmp_path):
    document = _chain(64, 32)
    document["models"][1]["spec"]["input_spec"]["tensor_data"][0].update(min_shape=[1, 40], max_shape=[8, 64])
    document["ensembles"] = [{"name": "fan", "steps": [
        {"model": "a", "inputs": {"input_x": "x"}, "outputs": {"output": "p"}},
        {"model": "b", "inputs": {"input_x": "x"}, "outputs": {"output": "q"}}]}]
    document["models"][0]["spec"]["input_spec"]["tensor_data"][0].update(max_shape=[8, 32])
    with pytest.raises(GenRepoError) as caught:
        plan_for(tmp_path, document)
    assert problems_of(caught.value) == ["/ensembles/0/steps: ensemble input 'x': its consumers accept no common "
                                         "shape (min [1, 40] is above max [8, 32] on some axis)"]


# --------------------------------------------------------------------------------------------------------------------
# The rules on plain data
# --------------------------------------------------------------------------------------------------------------------
def _io(name: str, dims: tuple[int, ...] = (4,), data_type: str = "TYPE_FP32") -> WiringTensor:
    return WiringTensor(name, data_type, dims)


def test_a_cycle_is_a_step_that_never_runs():
    twice = StepModel("f", 8, (_io("in"),), (_io("out"),))
    wiring = Wiring("e", 8, (_io("x"),), (_io("y"),), (
        Step("f", {"in": "t2"}, {"out": "t1"}), Step("f", {"in": "t1"}, {"out": "t2"}),
        Step("f", {"in": "x"}, {"out": "y"})))
    messages = [p.message for p in wiring_problems(wiring, {"f": twice}) if p.rule == "ensemble-flow"]
    assert "step 0 ('f') never runs: 't2' is produced only by steps that wait themselves (a cycle)" in messages
    assert step_order(wiring) == [2]


def _passes(wiring: Wiring) -> list[int]:
    """The definition of the step order: passes over the steps in index order, each running every step whose
    inputs exist by then, until a pass runs none (what step_order computed before it was made linear)."""
    ready = {io.name for io in wiring.inputs}
    order: list[int] = []
    pending = list(range(len(wiring.steps)))
    progressed = True
    while pending and progressed:
        progressed = False
        for j in list(pending):
            if all(t in ready for t in wiring.steps[j].input_map.values()):
                order.append(j)
                pending.remove(j)
                ready.update(wiring.steps[j].output_map.values())
                progressed = True
    return order


_TENSORS = st.sampled_from([f"t{i}" for i in range(8)])
WIRINGS = st.builds(
    lambda inputs, steps: Wiring("e", 0, tuple(_io(n) for n in inputs), (), tuple(
        Step("f", {f"i{k}": t for k, t in enumerate(ins)}, {f"o{k}": t for k, t in enumerate(outs)})
        for ins, outs in steps)),
    st.lists(_TENSORS, max_size=3, unique=True),
    st.lists(st.tuples(st.lists(_TENSORS, max_size=3), st.lists(_TENSORS, min_size=1, max_size=2)), max_size=12),
)


@given(WIRINGS)
@settings(max_examples=300, deadline=None)
def test_the_step_order_is_the_order_of_passes_over_the_steps(wiring: Wiring) -> None:
    """Random wirings (cycles, tensors produced twice, unused and missing tensors, steps without inputs): the
    linear-time order is exactly the order of passes, so plans and their text are unchanged."""
    assert step_order(wiring) == _passes(wiring)


def test_dims_follow_tritons_wildcard_and_batching_rules():
    assert dims_compatible((-1, 4), True, (3, 4), True)
    assert dims_compatible((4,), True, (-1, 4), False)  # a batching and a non-batching model share a tensor
    assert dims_compatible((4,), True, (4,), False)  # Triton compares the dims first, then the full shapes
    assert not dims_compatible((4,), True, (3,), False)
    assert not dims_compatible((4, 4), True, (4,), True)


# --------------------------------------------------------------------------------------------------------------------
# Lint and the real Triton on the planted corpus
# --------------------------------------------------------------------------------------------------------------------
def _repository_with(example_repository: Path, folder: Path, *cases: str) -> Path:
    repo = folder / "repo"
    shutil.copytree(example_repository, repo)
    (repo / "gen-repo.lock.json").unlink()  # hand-written ensembles are no part of the locked build
    for case in cases:
        shutil.copytree(CORPUS / case, repo / case, ignore=shutil.ignore_patterns("expected.json", ".gitkeep"))
        (repo / case / "1").mkdir(exist_ok=True)
    return repo


@pytest.mark.parametrize("case", CASES)
def test_lint_reports_exactly_the_planted_wiring_defect(case, example_repository, tmp_path):
    expected = json.loads((CORPUS / case / "expected.json").read_text())
    repo = _repository_with(example_repository, tmp_path, case)
    got = [(f.rule, f.file, f.line, f.severity) for f in lint_repository(repo)]
    assert got == [(e["rule"], f"{case}/config.pbtxt", e["line"], e["severity"]) for e in expected], got


def test_lint_passes_a_well_wired_ensemble(example_repository, tmp_path):
    assert lint_repository(_repository_with(example_repository, tmp_path, "ens_good")) == []


@pytest.mark.triton
def test_the_real_triton_refuses_every_planted_defect_and_serves_the_good_ensemble(
    example_repository, triton_server_factory, tmp_path
):
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    repo = _repository_with(example_repository, tmp_path, "ens_good", *CASES)
    server = triton_server_factory(repo, model_control="explicit", disable_auto_complete_config=True)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    refusals = {}
    for case in CASES:
        seen = len(server.log_text())
        try:
            client.load_model(case, client_timeout=60)
            refusals[case] = "loaded"
        except InferenceServerException as refused:
            # Errors found while polling the repository are in the server's log; the reply only says "failed to poll".
            refusals[case] = f"{refused.message()}\n{server.log_text()[seen:]}"
    # Every defect lint reports, Triton refuses too, and for that defect (a case broken another way fails here).
    assert sorted(TRITON_REFUSALS) == CASES
    wrong = {case: message for case, message in refusals.items() if TRITON_REFUSALS[case] not in message}
    assert wrong == {}, wrong
    client.load_model("ens_good", client_timeout=60)
    with np.load(example_repository / "mlp" / "1" / "gen_repo" / "reference.npz") as stored:
        x, y = stored["opt/input/input_x"][:4], stored["opt/output/output"][:4]  # within the ensemble's 8
    request = grpcclient.InferInput("x", list(x.shape), "FP32")
    request.set_data_from_numpy(x)
    ids = grpcclient.InferInput("ids", [x.shape[0], 4], "INT64")
    ids.set_data_from_numpy(np.ones((x.shape[0], 4), np.int64))
    mask = grpcclient.InferInput("mask", [x.shape[0], 4], "INT64")
    mask.set_data_from_numpy(np.ones((x.shape[0], 4), np.int64))
    result = client.infer("ens_good", [request, ids, mask], client_timeout=60)
    np.testing.assert_allclose(result.as_numpy("y"), y, rtol=1e-4, atol=1e-5)


def test_a_size_the_data_decides_fits_only_a_consumer_without_an_upper_bound():
    """A filter's row count has no upper bound (contract max -1): a consumer bounded on that axis may get more rows
    than it accepts, one unbounded there takes any count."""
    rows = WiringTensor("rows", "TYPE_FP32", (-1, 4), min_shape=(0, 4), max_shape=(-1, 4))
    bounded = WiringTensor("boxes", "TYPE_FP32", (-1, 4), min_shape=(0, 4), max_shape=(64, 4))
    unbounded = WiringTensor("boxes", "TYPE_FP32", (-1, 4), min_shape=(0, 4), max_shape=(-1, 4))
    steps = (Step("filter", {"x": "x"}, {"rows": "t"}), Step("head", {"boxes": "t"}, {"y": "y"}))
    wiring = Wiring("e", 0, (_io("x"),), (_io("y"),), steps)
    models = {"filter": StepModel("filter", 0, (_io("x"),), (rows,)), "head": StepModel("head", 0, (bounded,),
                                                                                       (_io("y"),))}
    (problem,) = [p for p in wiring_problems(wiring, models) if p.rule == "ensemble-shape-range"]
    assert "axis 0: 0.. (no upper bound) produced, 0..64 accepted" in problem.message
    models["head"] = StepModel("head", 0, (unbounded,), (_io("y"),))
    assert [p for p in wiring_problems(wiring, models) if p.rule == "ensemble-shape-range"] == []
