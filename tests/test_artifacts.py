"""generator.artifacts: a failure that involves made-up inputs names each of them and the manifest line to fix it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from build_helpers import load_module, record

from generator.build import BuildFailed, BuildOptions, build_repository

SPECTRUM_MODELS = '''\
"""A model that takes a power spectrum: negative values are invalid, as real spectra have none."""
import torch


class Spectrum(torch.nn.Module):
    def forward(self, power, padding_mask):
        if bool((power < 0).any()):
            raise ValueError("power must be non-negative")
        return torch.log1p(power).masked_fill(padding_mask[..., None], 0.0).sum(dim=1)


def make():
    return Spectrum().eval()
'''


def test_a_failure_on_made_up_inputs_names_each_and_the_manifest_line_that_replaces_it(tmp_path: Path) -> None:
    (tmp_path / "spectrum_models.py").write_text(SPECTRUM_MODELS)
    module = load_module(tmp_path / "spectrum_models.py", "_recording_spectrum_models")
    calls = [(b, {"power": torch.rand(b, s, 4), "padding_mask": torch.zeros(b, s, dtype=torch.bool)})
             for b, s in ((1, 3), (2, 5), (4, 7))]
    (tmp_path / "spectrum.graphspec.json").write_text(json.dumps(record("spectrum", module.make(),
                                                                        ["power", "padding_mask"], calls)))
    manifest = tmp_path / "gen-repo.yaml"
    manifest.write_text(yaml.safe_dump({"models": [{"name": "spectrum", "spec": "spectrum.graphspec.json",
                                                    "source": {"factory": "spectrum_models:make"},
                                                    "target": "python"}]}))
    options = BuildOptions(allow_code=True, cache_dir=tmp_path / "cache", code_path=(str(tmp_path),))
    with pytest.raises(BuildFailed) as info:
        build_repository(manifest, options, tmp_path / "repo")
    (result,) = info.value.report.models
    assert result.stage == "export"
    *export, made_up = result.problems
    assert "the model's forward fails on the example inputs: ValueError: power must be non-negative" in \
        export[0].message
    assert (made_up.file, made_up.pointer) == (str(manifest), "/models/0/inputs")
    assert made_up.message == (
        "export: this stage ran the model on made-up inputs; give each the values it really takes in the manifest "
        "(or real calls under samples:): 'input_power' was standard normal (a guess): "
        "`inputs: {power: {value_range: [LOW, HIGH]}}`; 'input_padding_mask' was all true (a guess: a mask that "
        "keeps every position); if false keeps a position: `inputs: {padding_mask: {values: [false]}}`")
    # The line it names works: with the values the model takes, the build goes through.
    document = yaml.safe_load(manifest.read_text())
    document["models"][0]["inputs"] = {"power": {"value_range": [0, 10]}, "padding_mask": {"values": [False]}}
    manifest.write_text(yaml.safe_dump(document))
    assert build_repository(manifest, options, tmp_path / "repo").ok
