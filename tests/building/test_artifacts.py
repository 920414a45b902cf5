"""One model's build (generator.building.artifacts): failures a user can act on, output ranges derived from the model.

Errors: a manifest of models that fail at different stages (a forward that raises at export, onnxruntime that
disagrees with torch at the check, a RoBERTa whose declared sequence outgrows its position embeddings at the
reference stage), built without ``--keep-going``: every error line names the manifest, the entry's pointer, the
model and the stage; no line names a file that is gone or a placeholder (``<gen-repo>: /``); the exported ONNX of a
model that failed after its export is kept for inspection; an index error names the value domains and the axis
ranges, located where the range was declared.

Made-up data: a failure where torch ran made-up inputs names each of them and the manifest line to fix it; a failed
check (inputs torch already ran) blames the export (tests/test_heldout.py), or the model when torch does not repeat
itself (the dropout left on here).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
import yaml
from click.testing import CliRunner

from generator.building.pipeline import BuildFailed, BuildOptions, build_repository
from generator.cli import main as cli_main
from generator.manifest.loading import load_manifest
from generator.planning.plan import axis_origin, plan_repository
from tests.build_helpers import load_module, record
from tests.manifest_helpers import REPO

ZOO = REPO / "tests" / "zoo"

FAILING_MODELS = '''\
"""Models that fail in gen-repo's build, each at another stage (written by tests/building/test_artifacts.py)."""
import torch
from torch import nn


class Refuses(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 4)

    def forward(self, x):
        raise ValueError("this model needs its calibration table loaded first")


class Noisy(nn.Module):
    """Dropout left on in forward: torch and onnxruntime draw different masks."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 4)

    def forward(self, x):
        return nn.functional.dropout(self.linear(x), p=0.5, training=True)


def make_refuses():
    torch.manual_seed(0)
    return Refuses().eval()


def make_noisy():
    torch.manual_seed(0)
    return Noisy().eval()
'''


@pytest.fixture(scope="module")
def failed_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, object]:
    """The failing manifest built once through the CLI (no --keep-going): (folder, cache folder, result)."""
    import sys

    import torch

    root = tmp_path_factory.mktemp("failing")
    (root / "failing_models.py").write_text(FAILING_MODELS)
    (root / "zoo_models.py").write_text((ZOO / "zoo_models.py").read_text())
    (root / "specs").mkdir()
    class Linear(torch.nn.Module):  # what both failing models were recorded from: x [b, 16] -> [b, 4]
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(16, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.linear(x)

    document = record("mlp", Linear().eval(), ["x"], [(b, {"x": torch.randn(b, 16)}) for b in (1, 4)])
    (root / "specs" / "mlp.graphspec.json").write_text(json.dumps(document))
    (root / "specs" / "roberta.graphspec.json").write_text((ZOO / "specs" / "roberta.graphspec.json").read_text())
    seq = [{"type": "BatchDim", "name": "batch", "min": 1, "opt": 2, "max": 4},
           {"type": "DynamicDim", "name": "seq", "min": 4, "opt": 16, "max": 64}]
    manifest = root / "gen-repo.yaml"
    manifest.write_text(yaml.safe_dump({"models": [
        {"name": "refuses", "spec": "specs/mlp.graphspec.json", "source": {"factory": "failing_models:make_refuses"}},
        {"name": "noisy", "spec": "specs/mlp.graphspec.json", "source": {"factory": "failing_models:make_noisy"}},
        {"name": "roberta", "spec": "specs/roberta.graphspec.json", "source": {"factory": "zoo_models:make_roberta"},
         # 64 tokens: RoBERTa's position ids start at 2, so its 64 position embeddings serve 62 at most.
         "dynamic_shapes": [{"path": "input_ids", "shape": seq}, {"path": "attention_mask", "shape": seq}]},
    ]}, sort_keys=False))
    cache = root / "cache"
    sys.path.insert(0, str(root))
    try:
        result = CliRunner().invoke(cli_main, ["build", str(manifest), "--allow-code", "--target", "python",
                                               "--cache-dir", str(cache), "--plain"], catch_exceptions=False)
    finally:
        sys.path.remove(str(root))
    return manifest, cache, result


def _errors(stderr: str) -> list[str]:
    return [line.removeprefix("error: ") for line in stderr.splitlines() if line.startswith("error: ")]


def test_every_build_error_names_the_model_its_manifest_entry_and_the_stage(failed_build) -> None:
    manifest, _, result = failed_build
    assert result.exit_code == 1, result.stderr  # a model failed (bad input would be 2)
    errors = _errors(result.stderr)
    assert {re.match(r".*model '(\w+)', stage (\w+):", e).groups() for e in errors} == {  # type: ignore[union-attr]
        ("refuses", "export"), ("noisy", "check"), ("roberta", "reference")}, errors
    for error in errors:
        assert error.startswith(f"{manifest}: /models/"), error
        assert "<gen-repo>" not in error and "<plan>" not in error, error
        # A path appears only where the file still exists.
        for path in re.findall(r"(/\S+\.(?:onnx|json|yaml))", error):
            assert Path(path).exists(), (path, error)
    refuses = next(e for e in errors if "'refuses'" in e)
    assert refuses.startswith(f"{manifest}: /models/0: model 'refuses', stage export: ")
    assert "this model needs its calibration table loaded first" in refuses


def test_the_onnx_of_a_model_that_failed_its_check_is_kept_for_inspection(failed_build) -> None:
    import onnx

    manifest, cache, result = failed_build
    noisy = [e for e in _errors(result.stderr) if "'noisy'" in e]
    kept = cache / "failed" / "noisy" / "model.onnx"
    checked, blame = noisy[:-1], noisy[-1]
    assert checked and all(e.startswith(f"{manifest}: /models/1: model 'noisy', stage check: ") for e in checked)
    assert all(f"model.onnx is kept for inspection: {kept}" in e for e in checked), "\n".join(noisy)
    assert "onnxruntime differs from torch" in noisy[0] and "compared elements out of tolerance" in noisy[0]
    # torch ran the check's inputs: neither the made-up data nor (dropout left on) the export is blamed, the model is.
    assert blame.startswith(f"{manifest}: /models/1/source: model 'noisy', stage check: the model is at fault, not "
                            "the export: torch gives other outputs for the same inputs when run again"), blame
    assert not any("made-up" in e for e in noisy), noisy
    onnx.checker.check_model(onnx.load(str(kept)))
    assert not list(cache.glob(".build-*"))  # the work folder itself is gone


def test_an_index_error_names_values_and_axes_located_where_the_range_was_declared(failed_build) -> None:
    manifest, _, result = failed_build
    (roberta,) = [e for e in _errors(result.stderr) if "'roberta'" in e and "ran the model on made-up inputs" not in e]
    # Located at the manifest's own declaration of the sequence axis, not at the spec.
    assert roberta.startswith(f"{manifest}: /models/2/dynamic_shapes/0/shape/1: model 'roberta', stage reference: "
                              "failed on reference case 'max' (input_input_ids [4, 64], input_attention_mask [4, 64])"
                              ": RuntimeError: index 64 is out of bounds"), roberta
    assert "input 'input_input_ids' takes 0..98 (index into the 99-row table" in roberta
    assert "input 'input_input_ids' axis 1 takes 4..64 (the manifest's dynamic_shapes, gen-repo.yaml " \
           "/models/2/dynamic_shapes/0/shape/1; recorded up to 20)" in roberta
    assert "position embeddings" in roberta and "lower its max where it is declared" in roberta


def test_axis_origin_names_the_manifest_the_spec_or_the_recording(tmp_path: Path) -> None:
    seq = [{"type": "BatchDim", "name": "batch", "min": 1, "max": 8},
           {"type": "DynamicDim", "name": "seq", "min": 4, "max": 32}]
    manifest = tmp_path / "gen-repo.yaml"
    for name in ("bert_partial_ranges", "roberta"):
        (tmp_path / f"{name}.json").write_text((ZOO / "specs" / f"{name}.graphspec.json").read_text())
    manifest.write_text(yaml.safe_dump({"models": [
        {"name": "partial", "spec": "bert_partial_ranges.json"},
        {"name": "declared", "spec": "roberta.json", "dynamic_shapes": [{"path": "attention_mask", "shape": seq}]},
    ]}))
    plans = {m.name: m for m in plan_repository(load_manifest(manifest)).models}
    partial = {t.name: t for t in plans["partial"].inputs}
    declared = {t.name: t for t in plans["declared"].inputs}
    spec = str(tmp_path / "bert_partial_ranges.json")
    assert axis_origin(plans["partial"], partial["input_input_ids"], 1) == (
        spec, "/graph/dynamic_shapes/0/shape/1", "the spec's dynamic_shapes")
    assert axis_origin(plans["partial"], partial["input_token_type_ids"], 1) == (
        spec, "/graph/input_spec/tensor_data/2/max_shape/1", "the recorded calls")
    assert axis_origin(plans["declared"], declared["input_attention_mask"], 1) == (
        str(manifest), "/models/1/dynamic_shapes/0/shape/1", "the manifest's dynamic_shapes")
    assert axis_origin(plans["declared"], declared["input_input_ids"], 1)[2] == "the recorded calls"


FILTER_MODELS = '''\
"""A data-dependent filter: the rows of x whose sum is positive (written by tests/building/test_artifacts.py)."""
import torch


class Filter(torch.nn.Module):
    def forward(self, x):
        return x[x.sum(-1) > 0] * 2.0


def make_filter():
    return Filter().eval()
'''


def test_output_ranges_follow_what_the_model_produces_not_the_recording(tmp_path: Path) -> None:
    """A filter recorded keeping 3 rows every time: its contract and config must not promise 3 rows, because the
    build's own reference cases keep other counts (the exported graph marks that size data-dependent)."""
    import sys

    import onnx
    import torch

    from generator.building.artifacts import data_dependent_axes
    from generator.building.pipeline import BuildOptions, build_repository
    from generator.contracts.reference_data import read_reference
    from generator.planning.config import parse_config

    (tmp_path / "filter_models.py").write_text(FILTER_MODELS)
    sys.path.insert(0, str(tmp_path))
    try:
        import filter_models
    finally:
        sys.path.remove(str(tmp_path))
    calls = []
    for batch in (4, 6, 8):  # three positive rows in every recorded call
        x = -torch.ones(batch, 8)
        x[:3] = 1.0
        calls.append((batch, {"x": x}))
    document = record("filter", filter_models.make_filter(), ["x"], calls)
    assert document["graph"]["output_spec"]["tensor_data"][0]["max_shape"] == [3, 8]
    (tmp_path / "filter.graphspec.json").write_text(json.dumps(document))
    manifest = tmp_path / "gen-repo.yaml"
    manifest.write_text(yaml.safe_dump({"models": [{"name": "filter", "spec": "filter.graphspec.json",
                                                    "source": {"factory": "filter_models:make_filter"}}]}))
    plan = plan_repository(load_manifest(manifest)).models[0]
    assert [t.dims for t in plan.outputs] == [(3, 8)]  # what the recording alone says
    report = build_repository(manifest, BuildOptions(allow_code=True, target="python", cache_dir=tmp_path / "cache"),
                              tmp_path / "repo")
    assert report.ok, report.to_dict()
    version = tmp_path / "repo" / "filter" / "1"
    (output,) = json.loads((version / "gen_repo" / "contract.json").read_text())["outputs"]
    rows = sorted({case.outputs["output"].shape[0] for case in read_reference(version / "gen_repo")})
    # No case bounds a size the data decides: other rows keep none or all of them, so 0.. with no upper bound.
    assert rows != [3] and (output["min_shape"], output["max_shape"]) == ([0, 8], [-1, 8]), (rows, output)
    assert output["dims"] == [-1, 8]
    assert list(parse_config((tmp_path / "repo" / "filter" / "config.pbtxt").read_text()).output[0].dims) == [-1, 8]
    assert data_dependent_axes(onnx.load(str(version / "model.onnx"))) == {"output": {0}}
    assert f"output 'output' axis 0: its size depends on the data (the reference cases gave {rows[0]}..{rows[-1]}), " \
           "so the contract says 0.. with no upper bound" in report.models[0].notes


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
        "model 'spectrum', stage export: this stage ran the model on made-up inputs; give each the values it really "
        "takes in the manifest "
        "(or real calls under samples:): 'input_power' was standard normal (a guess): "
        "`inputs: {power: {value_range: [LOW, HIGH]}}`; 'input_padding_mask' was all true (a guess: a mask that "
        "keeps every position); if false keeps a position: `inputs: {padding_mask: {values: [false]}}`")
    # The line it names works: with the values the model takes, the build goes through.
    document = yaml.safe_load(manifest.read_text())
    document["models"][0]["inputs"] = {"power": {"value_range": [0, 10]}, "padding_mask": {"values": [False]}}
    manifest.write_text(yaml.safe_dump(document))
    assert build_repository(manifest, options, tmp_path / "repo").ok
