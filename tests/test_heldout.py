"""The held-out architectures (tests/heldout): real models of the zoo's kinds that gen-repo was never tuned on.

A BART encoder-decoder, Whisper's encoder and a HuBERT classifier (audio, the latter with a declared range wider
than its recording), a Qwen2 decoder on real left-padded samples, a DistilBERT tagger, a diffusers AutoencoderKL
decoder, a SigLIP two-tower model, a sequence-first GRU tagger without and with ``h0`` (AITune's two graphs) and an
encoder with a bool mask where true keeps a position. Every recording keeps aitune's answers and every model
plans here; ``bench/heldout_zoo.py`` builds, smoke-tests and range-checks the whole set (its table is in
bench/README.md), and the last test runs that same path on two of them in CI.
"""

from __future__ import annotations

import pytest

from tests.heldout_run import HELDOUT, run_heldout, table
from tests.repository_checks import recording_problems

SPECS = sorted(p.name.removesuffix(".graphspec.json") for p in (HELDOUT / "specs").glob("*.graphspec.json"))
MODELS = ("bart", "whisper_encoder", "hubert", "qwen2", "distilbert_tagger", "vae_decoder", "siglip", "gru_tagger",
          "gru_tagger_state", "keep_mask_encoder")


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
    from generator.manifest import load_manifest
    from generator.plan import plan_repository

    plan = plan_repository(load_manifest(HELDOUT / "gen-repo.yaml"))
    assert [m.name for m in plan.models] == list(MODELS) and not plan.refused


@pytest.mark.triton
@pytest.mark.slow
def test_heldout_run_builds_serves_and_range_checks_two_of_them(tmp_path):
    """The held-out run's own path (plan, build, smoke in a real Triton, ranges) on the GRU with h0 (sequence-first:
    batch on axis 1, TorchScript exporter after dynamo fixes the sequence axis) and the keep-polarity bool mask."""
    rows = run_heldout(tmp_path, ["gru_tagger_state", "keep_mask_encoder"])
    explained = table(rows)
    assert [(r.name, r.outcome) for r in rows] == [("gru_tagger_state", "served"), ("keep_mask_encoder", "served")], \
        explained
    gru, keep = rows
    assert gru.smoke.pop("reject_batch") == "skipped", explained  # batch on axis 1: Triton cannot batch it
    assert set(gru.smoke.values()) == {"passed"} and set(keep.smoke.values()) == {"passed"}, explained
    assert gru.outputs_checked == 3 and keep.outputs_checked == 3, explained
    assert any(n.startswith("exported with the TorchScript-based exporter") for n in gru.notes), gru.notes
    assert ("input 'input_keep' is a mask: false drops a position (Where(Not(input_keep), -inf, x) in the graph); "
            "synthetic data keeps every position (all true)") in keep.notes, keep.notes
