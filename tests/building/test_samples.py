"""Real sample inputs: files and calls, checked, fitted to the cases (generator/building/samples.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from generator.building.samples import Sample, arrays_from_calls, fit_to_shapes, read_sample_file, usable_samples
from generator.contracts.reference_data import write_npz
from generator.errors import GenRepoError
from tests.manifest_helpers import REPO, plan_for

GUIDED = str(REPO / "tests" / "zoo" / "specs" / "unet_guided.graphspec.json")
GPT2 = str(REPO / "tests" / "zoo" / "specs" / "gpt2.graphspec.json")


def test_npz_calls_and_single_call(tmp_path):
    write_npz(tmp_path / "many.npz", {"a/x": np.zeros((2, 3)), "a/y": np.ones(2), "b/x": np.zeros((1, 3)),
                                      "b/y": np.ones(1)})
    assert {k: sorted(v) for k, v in read_sample_file(tmp_path / "many.npz", "npz").items()} == {
        "a": ["x", "y"], "b": ["x", "y"]}
    write_npz(tmp_path / "one.npz", {"x": np.zeros(3)})
    assert list(read_sample_file(tmp_path / "one.npz", "npz")) == ["0"]


def test_safetensors_are_read_without_torch(tmp_path):
    from safetensors.numpy import save_file

    save_file({"0/input_ids": np.arange(6, dtype=np.int64).reshape(1, 6)}, str(tmp_path / "s.safetensors"))
    calls = read_sample_file(tmp_path / "s.safetensors", "safetensors")
    np.testing.assert_array_equal(calls["0"]["input_ids"], np.arange(6).reshape(1, 6))


def test_pickles_are_refused(tmp_path):
    np.save(tmp_path / "p.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    import zipfile

    with zipfile.ZipFile(tmp_path / "p.npz", "w") as archive:
        archive.write(tmp_path / "p.npy", "x.npy")
    with pytest.raises(GenRepoError, match="cannot read samples"):
        read_sample_file(tmp_path / "p.npz", "npz")


def test_calls_like_aitune_records_them(tmp_path):
    plan = plan_for(tmp_path, {"models": [{"name": "m", "spec": GUIDED}]}).models[0]
    latents, text = torch.randn(4, 4, 8, 8), torch.randn(4, 6, 32)
    calls = [
        ((latents, torch.tensor(10.0), text), {}),  # positional, as a pipeline calls the UNet
        ((), {"sample": latents, "timestep": torch.tensor(5.0), "encoder_hidden_states": text}),
        ((latents,), {}),  # too few arguments for forward: skipped
    ]
    arrays, notes = arrays_from_calls(calls, plan.graph, plan.inputs)
    assert list(arrays) == ["0", "1"] and arrays["0"]["input_timestep"].shape == ()
    assert len(notes) == 1 and notes[0].startswith("sample call 2 skipped")
    samples, unfit = usable_samples(arrays, plan.inputs, plan.max_batch_size, "f")
    assert not unfit and samples[0].arrays["input_timestep"].shape == (1,)  # 0-d travels as [1]


def test_calls_with_other_non_tensor_values_belong_to_another_graph(tmp_path):
    plan = plan_for(tmp_path, {"models": [{"name": "m", "spec": GPT2}]}).models[0]
    ids = torch.ones(2, 8, dtype=torch.int64)
    calls = [((), {"input_ids": ids, "attention_mask": ids, "use_cache": False}),
             ((), {"input_ids": ids, "attention_mask": ids, "use_cache": True})]
    arrays, notes = arrays_from_calls(calls, plan.graph, plan.inputs)
    assert list(arrays) == ["0"] and "use_cache is True where the graph was recorded with False" in notes[0]


def test_usable_samples_skip_out_of_range_and_refuse_foreign_files(tmp_path):
    plan = plan_for(tmp_path, {"models": [{"name": "m", "spec": GPT2}]}).models[0]
    ok = {"input_input_ids": np.ones((2, 8), np.int32), "input_attention_mask": np.ones((2, 8), np.int64)}
    long = {n: np.ones((2, 64), np.int64) for n in ok}
    samples, notes = usable_samples({"ok": ok, "long": long}, plan.inputs, plan.max_batch_size, "f")
    assert [s.name for s in samples] == ["ok"] and samples[0].arrays["input_input_ids"].dtype == np.int64
    assert notes == ["sample 'long' skipped: 'input_input_ids' axis 1 is 64, outside 6..20"]
    with pytest.raises(GenRepoError, match="tensors \\['x'\\] that the model does not take"):
        usable_samples({"bad": {**ok, "x": np.ones(1)}}, plan.inputs, plan.max_batch_size, "f")
    with pytest.raises(GenRepoError, match="dtype float32 of 'input_input_ids' cannot become int64"):
        usable_samples({"f": {**ok, "input_input_ids": np.ones((2, 8), np.float32)}}, plan.inputs, 4, "f")


def test_fit_resizes_batch_axes_only(tmp_path):
    plan = plan_for(tmp_path, {"models": [{"name": "m", "spec": GPT2}]}).models[0]
    ids = np.arange(40).reshape(2, 20)
    sample = Sample("s", {"input_input_ids": ids, "input_attention_mask": np.ones((2, 20), np.int64)})
    opt = fit_to_shapes(sample, plan.inputs, "opt")  # opt is [4, 20]
    assert opt is not None
    np.testing.assert_array_equal(opt["input_input_ids"], np.repeat(ids[:1], 4, axis=0))
    assert fit_to_shapes(sample, plan.inputs, "min") is None  # min is [1, 6]: the sequence cannot be resized
