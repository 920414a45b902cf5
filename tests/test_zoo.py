"""The real-architecture zoo (tests/zoo): AITune recordings of transformers and diffusers models, built, served, smoked.

Every model of ``tests/zoo/gen-repo.yaml`` is built once per session for the python target (a BERT encoder with
token_type_ids and real samples, the same BERT with explicit ranges on only some inputs, GPT-2, ViT, a ResNet, a
diffusers UNet2DConditionModel called plainly with a per-item timestep, and the same UNet stacked for guidance with
a 0-d timestep and sample calls from a factory; a Wav2Vec2 CTC model whose declared audio range is wider than
its recording, a Llama decoder on real left-padded prompt batches compared with a padding mask, a T5
encoder-decoder, a CLIP model whose text and image towers take batches of their own, a bidirectional LSTM tagger
without and with an initial state (AITune's two graphs), and an ``nn.TransformerEncoder`` with a bool key-padding
mask). onnxruntime must match torch on every stored case, the real Triton must pass every smoke check, every
stored reference case of every test repository must be a valid request, and every stored output must lie inside
its contract's range. A bfloat16 ViT recording is refused by ``validate`` and ``plan``, before anything is
exported.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from click.testing import CliRunner

from generator.building.export.onnx_checks import compare_with_onnxruntime
from generator.client import ModelContract
from generator.contracts.reference_data import read_reference
from generator.planning.contract import to_model
from generator.serving.smoke import run_smoke
from generator.serving.smoke_results import CHECKS, SmokeOptions
from tests.manifest_helpers import REPO
from tests.repository_checks import outputs_outside_contract, recording_problems

ZOO = REPO / "tests" / "zoo"
ZOO_MODELS = ("bert", "bert_partial_ranges", "gpt2", "vit", "resnet", "unet", "unet_guided", "head", "wav2vec2",
              "llama", "t5", "clip", "rnn_tagger", "rnn_tagger_state", "padding_mask_encoder")
#: Every recording in tests/zoo/specs (the RNN tagger's two graphs are rnn_tagger.0 and rnn_tagger.1).
ZOO_SPECS = sorted(p.name.removesuffix(".graphspec.json") for p in (ZOO / "specs").glob("*.graphspec.json"))
#: The zoo's ensemble: bert's pooled output into the classification head, one Triton endpoint.
ZOO_ENSEMBLES = ("bert_classifier",)


def _plans():
    from generator.manifest.loading import load_manifest
    from generator.planning.plan import plan_repository

    return {m.name: m for m in plan_repository(load_manifest(ZOO / "gen-repo.yaml")).models}


@pytest.mark.parametrize("stem", ZOO_SPECS)
def test_zoo_specs_are_aitune_recordings_and_keep_aitunes_answers(stem):
    assert recording_problems(ZOO / "specs" / f"{stem}.graphspec.json") == []


def test_every_zoo_model_builds(zoo_build):
    repository, report = zoo_build
    assert report.ok, json.dumps(report.to_dict(), indent=1)
    assert [m.name for m in report.models] == [*ZOO_MODELS, *ZOO_ENSEMBLES]
    for name in ZOO_MODELS:
        assert {"config.pbtxt", "1"} <= {p.name for p in (repository / name).iterdir()}, name
    notes = {m.name: m.notes for m in report.models}
    assert "input 'input_token_type_ids' takes 0..1: index into the 2-row table " \
           "'module.embeddings.token_type_embeddings.weight'" in notes["bert"]
    assert "reference case 'opt' uses sample 'a'" in notes["bert"]
    assert "3 of 3 sample calls fit the plan" in notes["unet_guided"]
    # Every multiplier of unet_guided is declared in the manifest: nothing assumed. (The AITune recording's own
    # assumption is in tests/manifest/test_overrides.py.)
    assert not any(n.startswith("assumed: ") for n in notes["unet_guided"])
    # wav2vec2 declares 400..8000 samples, recorded 2000..4000: its logits' frames follow the model, not the recording.
    assert "output 'output_logits': shapes [1, 39, 12]..[4, 799, 12] over the input range (the reference cases at " \
           "min, opt and max and the samples); from the recording alone [1, 199, 12]..[4, 399, 12]" in notes["wav2vec2"]
    # llama's left-padded samples: torch and onnxruntime disagree at padded positions; the manifest leaves them out.
    assert "3 of 3 sample calls fit the plan" in notes["llama"]
    padded = next(n for n in notes["llama"] if n.startswith("check: "))
    assert re.fullmatch(r"check: [1-9]\d* output elements at positions 'input_attention_mask' marks as padding "
                        r"\(value 0\) left out of the comparison", padded), padded


def test_onnxruntime_matches_torch_on_every_stored_case(zoo_repository):
    plans = _plans()
    for name in ZOO_MODELS:
        version = zoo_repository / name / "1"
        cases = read_reference(version / "gen_repo")
        plan = plans[name]
        results, problems = compare_with_onnxruntime(version / "model.onnx", cases, inputs=plan.inputs,
                                                     outputs=plan.outputs, compare=plan.compare)
        assert not problems, (name, problems)
        assert len(results) == len(cases) * len(plan.outputs), name


def test_index_inputs_stay_inside_their_tables(zoo_repository):
    # BERT's token_type_ids index a 2-row table: the graph says so, and every stored request respects it.
    contract = ModelContract.from_repository(zoo_repository, "bert")
    types = contract.input("input_token_type_ids")
    assert (types.values.low, types.values.high) == (0, 1) and "2-row table" in types.values.source
    assert (contract.input("input_input_ids").values.high, contract.input("input_attention_mask").values) == (98, None)
    for case in read_reference(zoo_repository / "bert" / "1" / "gen_repo"):
        assert set(np.unique(case.inputs["input_token_type_ids"])) <= {0, 1}
    bad = {n: a.copy() for n, a in read_reference(zoo_repository / "bert" / "1" / "gen_repo")[0].inputs.items()}
    bad["input_token_type_ids"][0, 0] = 2
    (problem,) = contract.validate(bad)
    assert problem.kind.value == "value_out_of_range" and "value 2 is above 0..1" in problem.message


def test_samples_feed_the_reference_cases(zoo_repository):
    cases = {c.name: c for c in read_reference(zoo_repository / "bert" / "1" / "gen_repo")}
    assert list(cases) == ["min", "opt", "max", "sample_a", "sample_b"]
    with np.load(ZOO / "samples" / "bert.npz") as samples:
        real = samples["a/input_input_ids"]
        np.testing.assert_array_equal(cases["sample_a"].inputs["input_input_ids"], real)
        # opt is [4, 20]: sample a (2 x 20) with its batch resized the way AITune's make_batch does it.
        np.testing.assert_array_equal(cases["opt"].inputs["input_input_ids"], np.repeat(real[:1], 4, axis=0))
    guided = {c.name: c for c in read_reference(zoo_repository / "unet_guided" / "1" / "gen_repo")}
    assert list(guided) == ["min", "opt", "max", "sample_0", "sample_1", "sample_2"]
    assert guided["sample_0"].inputs["input_timestep"].tolist() == [981.0]


def test_scalars_travel_as_triton_allows(zoo_repository):
    # A per-item timestep [b] of a batching model: dims [1] + empty reshape, the request carries [b, 1]; a 0-d
    # timestep of a model that cannot batch: [1], reshaped by the exported graph.
    unet = ModelContract.from_repository(zoo_repository, "unet")
    assert unet.input("input_timestep").dims == (1,) and unet.input("input_timestep").max_shape == (4, 1)
    assert all(c.inputs["input_timestep"].shape[1:] == (1,) for c in read_reference(zoo_repository / "unet/1/gen_repo"))
    guided = ModelContract.from_repository(zoo_repository, "unet_guided")
    assert guided.max_batch_size == 0 and guided.input("input_timestep").max_shape == (1,)
    import onnx

    graph_input = onnx.load(str(zoo_repository / "unet_guided/1/model.onnx"), load_external_data=False).graph.input
    timestep = next(i for i in graph_input if i.name == "input_timestep")
    assert [d.dim_value for d in timestep.type.tensor_type.shape.dim] == [1]


def test_model_side_reference_matches_what_the_model_sees(zoo_repository):
    plan = _plans()["unet"]
    timestep = next(t for t in plan.inputs if t.name == "input_timestep")
    case = read_reference(zoo_repository / "unet" / "1" / "gen_repo")[1]
    assert to_model(timestep, case.inputs["input_timestep"]).shape == (case.batch_size,)


def test_warmup_data_is_the_opt_cases_first_item(zoo_repository):
    """Triton warms every zoo model up with real data: one request item of the opt case, raw, in warmup/1/."""
    from generator.planning.config import parse_config

    for name in ZOO_MODELS:
        config = parse_config((zoo_repository / name / "config.pbtxt").read_text())
        (warmup,) = config.model_warmup
        opt = next(c for c in read_reference(zoo_repository / name / "1" / "gen_repo") if c.name == "opt")
        assert warmup.batch_size == (opt.batch_size or 1), name
        assert sorted(warmup.inputs) == sorted(opt.inputs), name
        for tensor, entry in warmup.inputs.items():
            assert entry.input_data_file == f"1/{tensor}", (name, tensor)
            item = opt.inputs[tensor][0] if config.max_batch_size > 0 else opt.inputs[tensor]
            assert list(entry.dims) == list(item.shape), (name, tensor)
            data = (zoo_repository / name / "warmup" / entry.input_data_file).read_bytes()
            assert data == np.ascontiguousarray(item).tobytes(), (name, tensor)
    # bert's opt case is its real sample 'a', so its warmup holds real token ids, not zeros.
    ids = np.frombuffer((zoo_repository / "bert" / "warmup" / "1" / "input_input_ids").read_bytes(), np.int64)
    with np.load(ZOO / "samples" / "bert.npz") as samples:
        np.testing.assert_array_equal(ids, samples["a/input_input_ids"][0])


@pytest.mark.triton
def test_zoo_passes_every_smoke_check_in_a_real_triton(zoo_repository, triton_server_factory):
    # Auto-complete off: every generated config (the ensemble's included) is complete as written.
    # Verbose log: Triton says when an instance runs its warmup sample (the files test_warmup_data_... checks).
    server = triton_server_factory(zoo_repository, disable_auto_complete_config=True, log_verbose=1)
    report = run_smoke(server.grpc_url, "grpc", zoo_repository, options=SmokeOptions(burst=32, concurrency=8))
    explained = "\n".join(f"{r.model} {r.check} {r.status}: {r.message}" for r in report.results)
    assert report.exit_code == 0, explained
    log = server.log_text()
    assert [m for m in ZOO_MODELS if not re.search(rf"model '{m}' instance \S+ is running warmup sample", log)] == []
    assert sorted(report.models) == sorted([*ZOO_MODELS, *ZOO_ENSEMBLES])
    skipped = {(r.model, r.check) for r in report.results if r.status == "skipped"}
    # The models that cannot batch: a stacked batch with a 0-d timestep, two towers' own batches, a state [4, b, h].
    assert skipped == {(name, "reject_batch") for name in ("unet_guided", "clip", "rnn_tagger_state")}, explained
    passed = {(r.model, r.check) for r in report.results if r.status == "passed"}
    assert ("bert", "burst") in passed and ("unet_guided", "reference") in passed
    # The ensemble is checked like any model: through Triton's ensemble scheduler, against the chained reference.
    assert {check for model, check in passed if model == "bert_classifier"} == set(CHECKS), explained


def test_the_ensemble_agrees_with_the_torch_pipeline(zoo_build):
    """bert -> head chained in onnxruntime (the stored reference) matches the whole torch pipeline at the build, and
    here again, computed independently from the stored inputs."""
    import sys

    import torch

    repository, report = zoo_build
    notes = next(m.notes for m in report.models if m.name == "bert_classifier")
    assert any("match the torch pipeline zoo_models:make_bert_classifier on every case" in n for n in notes), notes
    sys.path.insert(0, str(ZOO))
    try:
        import zoo_models
    finally:
        sys.path.remove(str(ZOO))
    pipeline = zoo_models.make_bert_classifier()
    cases = read_reference(repository / "bert_classifier" / "1" / "gen_repo")
    assert [c.name for c in cases] == ["min", "opt", "max"]
    for case in cases:
        with torch.no_grad():
            logits = pipeline(**{k: torch.from_numpy(v) for k, v in case.inputs.items()}).numpy()
        np.testing.assert_allclose(case.outputs["logits"], logits, rtol=1e-4, atol=1e-5)
        assert set(np.unique(case.inputs["token_type_ids"])) <= {0, 1}  # bert's domain, found by its build


def test_every_stored_reference_case_is_a_valid_request(zoo_repository, example_repository):
    """check-request accepts every case gen-repo stored, in every test repository (request-side shapes)."""
    from generator.cli import main

    runner = CliRunner()
    checked = 0
    for repository in (zoo_repository, example_repository):
        for model in sorted(p.name for p in repository.iterdir() if (p / "config.pbtxt").is_file()):
            npz = repository / model / "1" / "gen_repo" / "reference.npz"
            result = runner.invoke(main, ["check-request", "--repo", str(repository), "--json", model, str(npz)])
            assert result.exit_code == 0, (model, result.output)
            payload = json.loads(result.output)
            assert payload["ok"] and len(payload["cases"]) >= 3, (model, payload)
            checked += len(payload["cases"])
    assert checked >= 3 * (len(ZOO_MODELS) + len(ZOO_ENSEMBLES) + 2)


def test_every_stored_reference_output_lies_inside_its_contract_range(zoo_repository, example_repository):
    """Contract output ranges come from the model over its whole input range, never narrower than what it produces:
    every output of every stored case (min, opt, max, samples) of every test model, ensembles included, fits, and
    the config's dims are -1 wherever the range varies (tests/repository_checks.py)."""
    checked = 0
    for repository in (zoo_repository, example_repository):
        count, problems = outputs_outside_contract(repository)
        assert problems == [], problems
        checked += count
    assert checked >= 3 * (len(ZOO_MODELS) + len(ZOO_ENSEMBLES) + 2)
    # The rows of issue 22: the audio model's frames (the recording saw 199..399) and the decoder's prompt lengths
    # (recorded 6..20, declared 2..48).
    (wav2vec2,) = ModelContract.from_repository(zoo_repository, "wav2vec2").outputs
    assert (wav2vec2.min_shape, wav2vec2.max_shape) == ((1, 39, 12), (4, 799, 12))
    (llama,) = ModelContract.from_repository(zoo_repository, "llama").outputs
    assert (llama.min_shape, llama.max_shape) == ((1, 2, 99), (4, 48, 99))


# --------------------------------------------------------------------------------------------------------------------
# Unseen architectures (issue 22)
# --------------------------------------------------------------------------------------------------------------------
def _zoo_models_module():
    import sys

    sys.path.insert(0, str(ZOO))
    try:
        import zoo_models
    finally:
        sys.path.remove(str(ZOO))
    return zoo_models


def test_what_each_unseen_architecture_needed_is_in_its_build_notes(zoo_build):
    notes = {m.name: m.notes for m in zoo_build[1].models}
    # torch.export specialises the LSTM's sequence axis (a constraint violation, or a graph whose output fixes it:
    # tests/building/export/test_onnx.py::test_an_rnn_pinned_to_dynamo_still_loses_its_sequence_axis), so the build goes
    # straight to the TorchScript-based exporter, which keeps it dynamic; the notes say why dynamo was not tried.
    for name in ("rnn_tagger", "rnn_tagger_state"):
        exports = [n for n in notes[name] if n.startswith(("torch.onnx.export(", "the TorchScript-based exporter",
                                                           "exported with "))]
        assert len(exports) == 2, notes[name]
        assert exports[0] == ("torch.onnx.export(dynamo=True): not tried: the module holds nn.LSTM ('lstm') and input "
                              "'input_input_ids' axis 1 is dynamic; torch.export fixes an RNN's sequence axis")
        assert exports[1].startswith("exported with the TorchScript-based exporter torch.onnx.export(dynamo=False) "
                                     "in "), notes[name]
    # The bool key-padding mask: all true pads every position (the forward raises), the graph shows true drops one.
    assert ("input 'input_padding_mask' is a mask: true drops a position (Where(input_padding_mask, -inf, x) in the "
            "graph); synthetic data keeps every position (all false)") in notes["padding_mask_encoder"]
    assert any(n.startswith("export example: input 'input_padding_mask' is a mask: forward fails with it all true "
                            "(RuntimeError: to_padded_tensor") for n in notes["padding_mask_encoder"])


def test_the_rnn_taggers_keep_their_dynamic_sequence_axis_and_match_torch_at_other_lengths(zoo_repository):
    import onnxruntime as ort
    import torch

    tagger = _zoo_models_module().make_rnn_tagger()
    generator = torch.Generator().manual_seed(1)
    for name, with_state in (("rnn_tagger", False), ("rnn_tagger_state", True)):
        session = ort.InferenceSession(str(zoo_repository / name / "1" / "model.onnx"),
                                       providers=["CPUExecutionProvider"])
        assert isinstance(session.get_inputs()[0].shape[1], str)  # the sequence axis of input_ids is dynamic
        for batch, seq in ((1, 7), (3, 11), (2, 17)):  # lengths no reference case has
            ids = torch.randint(0, 99, (batch, seq), generator=generator)
            state = tuple(torch.randn(4, batch, 12, generator=generator) for _ in range(2)) if with_state else None
            with torch.no_grad():
                want = tagger(ids, state).numpy()
            feed = {"input_input_ids": ids.numpy()}
            if state is not None:
                feed.update(input_state_0=state[0].numpy(), input_state_1=state[1].numpy())
            np.testing.assert_allclose(session.run(None, feed)[0], want, rtol=1e-4, atol=1e-5)


def test_a_bool_padding_mask_is_filled_with_the_value_that_keeps_every_position(zoo_repository):
    contract = ModelContract.from_repository(zoo_repository, "padding_mask_encoder")
    mask = contract.input("input_padding_mask")
    assert mask.values is not None and mask.values.mask_keep is False
    assert not contract.example_inputs("max")["input_padding_mask"].any()  # the client's example keeps every position
    for case in read_reference(zoo_repository / "padding_mask_encoder" / "1" / "gen_repo"):
        assert not case.inputs["input_padding_mask"].any(), case.name
    padded = dict(read_reference(zoo_repository / "padding_mask_encoder" / "1" / "gen_repo")[0].inputs)
    padded["input_padding_mask"][:, -1:] = True  # real padding is a valid request
    assert contract.validate(padded) == []


def test_two_towers_and_two_sequences_vary_independently(zoo_repository):
    """CLIP's texts and images come in batches of their own (AITune records the texts' batch only), so the model
    does not batch and each axis has its own range; T5's encoder and decoder lengths differ in its reference cases."""
    clip = ModelContract.from_repository(zoo_repository, "clip")
    assert clip.max_batch_size == 0 and clip.input("input_pixel_values").dims == (-1, 3, 32, 32)
    opt = next(c for c in read_reference(zoo_repository / "clip" / "1" / "gen_repo") if c.name == "opt")
    assert (opt.inputs["input_input_ids"].shape[0], opt.inputs["input_pixel_values"].shape[0]) == (4, 5)
    assert opt.outputs["output_logits_per_image"].shape == (5, 4)
    t5 = {c.name: c for c in read_reference(zoo_repository / "t5" / "1" / "gen_repo")}
    assert t5["opt"].inputs["input_input_ids"].shape == (4, 16)
    assert t5["opt"].inputs["input_decoder_input_ids"].shape == (4, 9)


def test_a_bfloat16_recording_is_refused_before_any_export(tmp_path):
    """validate, plan and build refuse AITune's bf16 ViT recording at once, naming why no target serves bfloat16 here
    and what does; the build imports nothing (the factory is never called)."""
    import shutil

    from generator.cli import main

    runner = CliRunner()
    reason = ("dtype 'torch.bfloat16' cannot be served by {who} gen-repo builds: onnxruntime's CPU kernels have no "
              "bfloat16 (a bfloat16 Gemm or MatMul fails to load: NOT_IMPLEMENTED), and numpy, which holds the "
              "build's reference data, has no bfloat16; record and serve the model in float16 (model.half(): "
              "onnxruntime's CPU kernels run it) or float32")
    spec = ZOO / "specs" / "vit_bf16.graphspec.json"
    validated = runner.invoke(main, ["validate", str(spec)])
    assert validated.exit_code == 2
    assert (f"error: {spec}: /graph/input_spec/tensor_data/0/dtype: " + reason.format(who="any target")
            in validated.stderr.splitlines())
    shutil.copy(spec, tmp_path / "vit_bf16.graphspec.json")
    shutil.copy(ZOO / "zoo_models.py", tmp_path / "zoo_models.py")
    for target in ("python", "onnx", "tensorrt", "auto"):
        manifest = tmp_path / "gen-repo.yaml"
        manifest.write_text(f"models:\n  - name: vit_bf16\n    spec: vit_bf16.graphspec.json\n    target: {target}\n"
                            "    source: {factory: 'zoo_models:make_vit_bf16'}\n", encoding="utf-8")
        resolved = "onnx" if target == "auto" else target  # no TensorRT and GPU here
        located = (f"error: {tmp_path / 'vit_bf16.graphspec.json'}: /graph/input_spec/tensor_data/0/dtype: "
                   + reason.format(who=f"target {resolved}, nor by any other target"))
        for command in (["plan", str(manifest)],
                        ["build", str(manifest), "-o", str(tmp_path / "repo"), "--allow-code"]):
            result = runner.invoke(main, command)
            assert result.exit_code == 2, (command, result.output)
            assert located in result.stderr.splitlines(), (command, result.stderr)
    assert not (tmp_path / "repo").exists() and not (tmp_path / "__pycache__").exists()
