"""The held-out architectures (tests/heldout): real models of the zoo's kinds that gen-repo was never tuned on.

A BART encoder-decoder, Whisper's encoder and a HuBERT classifier (audio, the latter with a declared range wider
than its recording), a Qwen2 decoder on real left-padded samples, a DistilBERT tagger, a diffusers AutoencoderKL
decoder, a SigLIP two-tower model, a sequence-first GRU tagger without and with ``h0`` (AITune's two graphs), an
encoder with a bool mask where true keeps a position, the DistilBERT tagger in float16 and a score filter whose
output row count the data decides. Every recording keeps aitune's answers and every model plans here;
``bench/heldout_zoo.py`` builds, smoke-tests and range-checks the whole set (its table is in bench/README.md), and
the last test runs that same path on three of them in CI.
"""

from __future__ import annotations

import pytest

from tests.heldout_run import HELDOUT, run_heldout, table
from tests.repository_checks import recording_problems

SPECS = sorted(p.name.removesuffix(".graphspec.json") for p in (HELDOUT / "specs").glob("*.graphspec.json"))
MODELS = ("bart", "whisper_encoder", "hubert", "qwen2", "distilbert_tagger", "vae_decoder", "siglip", "gru_tagger",
          "gru_tagger_state", "keep_mask_encoder", "distilbert_tagger_fp16", "score_filter")


@pytest.mark.parametrize("stem", SPECS)
def test_heldout_specs_are_aitune_recordings_and_keep_aitunes_answers(stem):
    assert recording_problems(HELDOUT / "specs" / f"{stem}.graphspec.json") == []


def test_no_heldout_architecture_is_in_the_zoo():
    from tests.test_zoo import ZOO

    zoo = (ZOO / "zoo_models.py").read_text()
    for factory in ("BartFor", "Whisper", "Hubert", "Qwen2", "DistilBert", "AutoencoderKL", "Siglip", "nn.GRU",
                    "KeepMask", "Mamba"):
        assert factory not in zoo, factory


def test_every_heldout_model_plans():
    from generator.manifest.loading import load_manifest
    from generator.planning.plan import plan_repository

    plan = plan_repository(load_manifest(HELDOUT / "gen-repo.yaml"))
    assert [m.name for m in plan.models] == list(MODELS) and not plan.refused


@pytest.mark.triton
@pytest.mark.slow
def test_heldout_run_builds_serves_and_range_checks_three_of_them(tmp_path):
    """The held-out run's own path (plan, build, smoke in a real Triton, ranges) on the GRU with h0 (sequence-first:
    batch on axis 1, TorchScript exporter after dynamo fixes the sequence axis), the keep-polarity bool mask, and
    the score filter, whose row count the data decides: its contract has no upper bound there."""
    import numpy as np
    import onnxruntime as ort

    from generator.client import ModelContract

    rows = run_heldout(tmp_path, ["gru_tagger_state", "keep_mask_encoder", "score_filter"])
    explained = table(rows)
    assert [(r.name, r.outcome) for r in rows] == [("gru_tagger_state", "served"), ("keep_mask_encoder", "served"),
                                                   ("score_filter", "served")], explained
    gru, keep, kept = rows
    for row in (gru, kept):  # batch on axis 1, or no batch axis on the output: Triton cannot batch them
        assert row.smoke.pop("reject_batch") == "skipped", explained
    assert {s for r in rows for s in r.smoke.values()} == {"passed"}, explained
    assert [r.outputs_checked for r in rows] == [3, 3, 3], explained
    assert any(n.startswith("exported with the TorchScript-based exporter") for n in gru.notes), gru.notes
    assert ("input 'input_keep' is a mask: false drops a position (Where(Not(input_keep), -inf, x) in the graph); "
            "synthetic data keeps every position (all true)") in keep.notes, keep.notes
    # The reference cases kept 3..45 of at most 3 x 25 boxes; other scores keep none or all of them.
    repository = tmp_path / "model_repository"
    (output,) = ModelContract.from_repository(repository, "score_filter").outputs
    assert (output.min_shape, output.max_shape) == ((0, 4), (None, 4))
    assert any(n.startswith("output 'output' axis 0: its size depends on the data (the reference cases gave ")
               for n in kept.notes), kept.notes
    session = ort.InferenceSession(str(repository / "score_filter" / "1" / "model.onnx"),
                                   providers=["CPUExecutionProvider"])
    boxes = np.random.default_rng(0).random((3, 25, 4), dtype=np.float32)
    for score, count in ((5.0, 75), (-5.0, 0)):
        (got,) = session.run(None, {"input_boxes": boxes, "input_scores": np.full((3, 25), score, np.float32)})
        assert got.shape == (count, 4)


@pytest.mark.slow
def test_a_state_space_model_that_runs_in_torch_and_not_in_onnxruntime_blames_the_export(tmp_path):
    """Mamba (transformers, one layer, no mamba_ssm kernels): the TorchScript exporter unrolls the selective scan at
    the traced sequence length, so onnxruntime fails the min and max cases torch ran in the reference stage. The build
    says the export is at fault (the node, the op, the shapes that fail and run, the exporter and the other one to
    try) and does not ask for value ranges: the data is not to blame."""
    import yaml

    from generator.building.pipeline import BuildFailed, BuildOptions, build_repository

    manifest = tmp_path / "gen-repo.yaml"
    manifest.write_text(yaml.safe_dump({"defaults": {"target": "python"}, "models": [
        {"name": "mamba", "spec": str(HELDOUT / "specs" / "mamba.graphspec.json"),
         "source": {"factory": "heldout_models:make_mamba"}, "export": {"exporter": "torchscript"}}]}))
    options = BuildOptions(allow_code=True, target="python", cache_dir=tmp_path / "cache", jobs=1,
                           code_path=(str(HELDOUT),), allow_outside=True)
    with pytest.raises(BuildFailed) as failed:
        build_repository(manifest, options, output_dir=tmp_path / "repo")
    problems = failed.value.problems
    assert not any("made-up" in p.message or "value_range" in p.message for p in problems), problems
    (blame,) = [p for p in problems if p.pointer == "/models/0/export"]
    assert blame.message.startswith("model 'mamba', stage check: the export is at fault, not the data: torch ran these "
                                    "very inputs (stage reference), the ONNX graph does not: "), blame.message
    assert "case 'min' (input_input_ids [1, 2]) fails in node '/module/backbone/layers.0/mixer/Gather_" in blame.message
    assert "(Gather: indices element out of data bounds" in blame.message
    assert "case 'opt' (input_input_ids [2, 16]) runs" in blame.message
    assert ("The TorchScript-based exporter torch.onnx.export(dynamo=False) wrote the graph from an example of "
            "input_input_ids [2, 16]; the other exporter was not tried (export.exporter is 'torchscript'): try it with "
            "`export: {exporter: dynamo}` in this model's manifest entry") in blame.message
