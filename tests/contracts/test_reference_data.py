"""generator.contracts.reference_data: reference.npz and reference.json, byte-identical, read back with errors."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from examples.models import make_mlp, make_text
from generator.building.reference import make_reference_cases
from generator.contracts.reference_data import ReferenceDataError, read_npz, read_reference, write_npz, write_reference
from tests.build_helpers import example_io


def test_files_are_byte_identical_and_follow_the_layout(tmp_path: Path) -> None:
    inputs, outputs = example_io("mlp")
    for run in ("a", "b"):
        cases, _ = make_reference_cases(make_mlp(), inputs, outputs, model_name="mlp", max_batch_size=32)
        write_reference(tmp_path / run / "gen_repo", cases)
    for name in ("reference.npz", "reference.json"):
        assert (tmp_path / "a/gen_repo" / name).read_bytes() == (tmp_path / "b/gen_repo" / name).read_bytes()
    text = (tmp_path / "a/gen_repo/reference.json").read_text()
    assert text.endswith("}\n") and text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"
    assert json.loads(text) == {
        "format": "gen-repo-reference/1",
        "cases": [
            {"name": "min", "batch_size": 1, "inputs": ["input_x"], "outputs": ["output"]},
            {"name": "opt", "batch_size": 32, "inputs": ["input_x"], "outputs": ["output"]},
            {"name": "max", "batch_size": 32, "inputs": ["input_x"], "outputs": ["output"]},
        ],
    }
    with zipfile.ZipFile(tmp_path / "a/gen_repo/reference.npz") as archive:
        infos = archive.infolist()
    assert [i.filename for i in infos] == sorted(i.filename for i in infos)
    assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
    with np.load(tmp_path / "a/gen_repo/reference.npz", allow_pickle=False) as data:
        assert sorted(data.files) == [f"{c}/{k}/{t}" for c in ("max", "min", "opt")
                                      for k, t in (("input", "input_x"), ("output", "output"))]
        assert data["min/input/input_x"].shape == (1, 16)


def test_read_reference_round_trip_and_errors(tmp_path: Path) -> None:
    inputs, outputs = example_io("text")
    cases, _ = make_reference_cases(make_text(), inputs, outputs, model_name="text", max_batch_size=16)
    folder = tmp_path / "gen_repo"
    write_reference(folder, cases)
    back = read_reference(folder)
    assert [(c.name, c.batch_size) for c in back] == [(c.name, c.batch_size) for c in cases]
    for original, loaded in zip(cases, back, strict=True):
        for name, array in original.inputs.items():
            np.testing.assert_array_equal(loaded.inputs[name], array)
        for name, array in original.outputs.items():
            np.testing.assert_array_equal(loaded.outputs[name], array)
    arrays = read_npz(folder / "reference.npz")
    del arrays["max/output/output_1"]
    write_npz(folder / "reference.npz", arrays)
    with pytest.raises(ReferenceDataError, match="'max/output/output_1' listed in case 2 is missing"):
        read_reference(folder)
    (folder / "reference.json").write_text("{}")
    with pytest.raises(ReferenceDataError, match="gen-repo-reference/1"):
        read_reference(folder)
    with pytest.raises(ReferenceDataError, match="cannot read"):
        read_reference(tmp_path / "nowhere")
