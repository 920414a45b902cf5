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
                    "KeepMask"):
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
