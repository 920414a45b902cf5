"""Contract changes classified as a client experiences them (generator/contracts/diff.py, contract sources,
``ModelContract.compatible_with``).

The headline classes come from real rebuilds: the example models (``example_repository``) against the same models
rebuilt with a removed input, a changed dtype, a narrowed value domain, a narrowed and widened sequence range, a
lower and a higher max batch and an added output (``variant_example_repository``, tests/diff_helpers.py). The other
classes edit copies of those real contracts, one fact at a time.
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from generator.client import ModelContract
from generator.contracts.diff import diff_models, is_exact
from generator.errors import GenRepoError
from generator.repository.contract_sources import diff_locations

#: (model, kind, subject, axis, classification) of every change from the example build to the variant build.
REBUILD_CHANGES = [
    ("mlp", "max_batch_size_raised", "max_batch_size", None, "compatible"),
    ("mlp", "output_added", "output:hidden", None, "compatible"),
    ("text", "data_type", "input:input_input_ids", None, "breaking"),
    ("text", "input_removed", "input:input_attention_mask", None, "breaking"),
    ("text", "max_batch_size_lowered", "max_batch_size", None, "breaking"),
    ("text", "range_narrowed", "input:input_input_ids", 1, "breaking"),
    ("text", "value_domain_narrowed", "input:input_input_ids", None, "breaking"),
    ("text", "range_widened", "input:input_input_ids", 1, "compatible"),
]


def _rows(changes: Any) -> list[tuple[str, str, str, int | None, str]]:
    return [(c.model, c.kind, c.subject, c.axis, c.classification) for c in changes]


def test_a_real_rebuild_is_classified_change_by_change(example_repository: Path,
                                                       variant_example_repository: Path) -> None:
    diff = diff_locations(str(example_repository), str(variant_example_repository))
    assert _rows(diff.changes) == REBUILD_CHANGES
    assert (diff.breaking, diff.compatible) == (5, 3)
    assert (diff.added, diff.removed, diff.changed, diff.unchanged) == ((), (), ("mlp", "text"), ())
    assert diff.unknown == ()  # both sides are gen-repo builds: every fact is known
    by_kind = {c.kind: c for c in diff.changes}
    assert (by_kind["data_type"].old, by_kind["data_type"].new) == ("TYPE_INT64", "TYPE_INT32")
    assert (by_kind["max_batch_size_lowered"].old, by_kind["max_batch_size_lowered"].new) == (16, 8)
    assert (by_kind["range_narrowed"].old, by_kind["range_narrowed"].new) == ([4, 64], [8, 128])
    assert by_kind["value_domain_narrowed"].new == {"value_range": [0, 49]}


def test_the_reverse_rebuild_and_an_identical_one(example_repository: Path, variant_example_repository: Path) -> None:
    """Going back breaks other clients: the removed output and the re-added required input; the same build twice
    changes nothing."""
    back = diff_locations(str(variant_example_repository), str(example_repository))
    kinds = {(c.model, c.kind): c.classification for c in back.changes}
    assert kinds[("mlp", "output_removed")] == kinds[("mlp", "max_batch_size_lowered")] == "breaking"
    assert kinds[("text", "input_added_required")] == "breaking"
    assert kinds[("text", "value_domain_widened")] == kinds[("text", "max_batch_size_raised")] == "compatible"
    same = diff_locations(str(example_repository), str(example_repository))
    assert same.changes == () and same.unchanged == ("mlp", "text")


def test_a_removed_and_an_added_model(example_repository: Path, tmp_path: Path) -> None:
    fewer = tmp_path / "fewer"
    shutil.copytree(example_repository, fewer)
    shutil.rmtree(fewer / "text")
    removed = diff_locations(str(example_repository), str(fewer))
    assert _rows(removed.changes) == [("text", "model_removed", "model", None, "breaking")]
    assert (removed.removed, removed.unchanged) == (("text",), ("mlp",))
    added = diff_locations(str(fewer), str(example_repository))
    assert _rows(added.changes) == [("text", "model_added", "model", None, "compatible")]
    assert added.added == ("text",) and added.breaking == 0


def test_compatible_with_is_the_same_classification(example_repository: Path,
                                                    variant_example_repository: Path) -> None:
    for model in ("mlp", "text"):
        pinned = ModelContract.from_repository(example_repository, model)
        offered = ModelContract.from_repository(variant_example_repository, model)
        comparison = pinned.compatible_with(offered)
        assert _rows(comparison.changes) == [r for r in REBUILD_CHANGES if r[0] == model]
        assert comparison.compatible is (model == "mlp")


def test_two_version_folders_compare_one_model(example_repository: Path, variant_example_repository: Path) -> None:
    diff = diff_locations(str(example_repository / "mlp" / "1"), str(variant_example_repository / "mlp" / "1"))
    assert _rows(diff.changes) == REBUILD_CHANGES[:2] and diff.breaking == 0


# --------------------------------------------------------------------------------------------------------------------
# Every other class, on edited copies of the real contracts
# --------------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def contracts(example_repository: Path) -> dict[str, dict[str, Any]]:
    """The example build's contract.json documents, by model."""
    return {m: json.loads((example_repository / m / "1" / "gen_repo" / "contract.json").read_text())
            for m in ("mlp", "text")}


def _input(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in doc["inputs"] if t["name"] == name)


def _batching_off(doc: dict[str, Any]) -> None:
    doc["max_batch_size"] = 0
    for tensor in doc["inputs"] + doc["outputs"]:
        for key in ("min_shape", "max_shape", "opt_shape"):
            if key in tensor:
                tensor[key] = tensor[key][1:]


def _renamed(doc: dict[str, Any]) -> None:
    _input(doc, "input_attention_mask")["name"] = "input_mask"


def _extra_input(optional: bool) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        extra = copy.deepcopy(_input(doc, "input_attention_mask"))
        extra["name"] = "input_token_type_ids"
        extra["data_type"] = "TYPE_INT32"  # not a rename of anything
        if optional:
            extra["optional"] = True
        doc["inputs"].append(extra)
    return edit


#: (model, edit of the new contract, expected (kind, subject, axis, classification) changes).
EDITS: dict[str, tuple[str, Callable[[dict[str, Any]], None], list[tuple[str, str, int | None, str]]]] = {
    "input renamed": ("text", _renamed,
                      [("input_renamed", "input:input_attention_mask", None, "breaking")]),
    "required input added": ("text", _extra_input(False),
                             [("input_added_required", "input:input_token_type_ids", None, "breaking")]),
    "optional input added": ("text", _extra_input(True),
                             [("input_added_optional", "input:input_token_type_ids", None, "compatible")]),
    "input made optional": ("text", lambda d: _input(d, "input_attention_mask").update(optional=True),
                            [("input_optional", "input:input_attention_mask", None, "compatible")]),
    "output removed": ("text", lambda d: d["outputs"].pop(1), [("output_removed", "output:output_1", None,
                                                                  "breaking")]),
    "output renamed": ("text", lambda d: d["outputs"][1].update(name="pooled"),
                       [("output_renamed", "output:output_1", None, "breaking")]),
    "output dtype": ("mlp", lambda d: d["outputs"][0].update(data_type="TYPE_FP16"),
                     [("data_type", "output:output", None, "breaking")]),
    "static size": ("mlp", lambda d: d["inputs"][0].update(dims=[8], min_shape=[1, 8], max_shape=[32, 8],
                                                           opt_shape=[32, 8]),
                    [("dims", "input:input_x", 1, "breaking")]),
    "rank": ("mlp", lambda d: d["inputs"][0].update(dims=[4, 4], min_shape=[1, 4, 4], max_shape=[32, 4, 4],
                                                    opt_shape=[32, 4, 4]),
             [("rank", "input:input_x", None, "breaking")]),
    "range widened only": ("text", lambda d: [t.update(min_shape=[1, 1]) for t in d["inputs"]],
                           [("range_widened", "input:input_attention_mask", 1, "compatible"),
                            ("range_widened", "input:input_input_ids", 1, "compatible")]),
    "value domain widened": ("text", lambda d: _input(d, "input_input_ids").update(value_range=[0, 199]),
                             [("value_domain_widened", "input:input_input_ids", None, "compatible")]),
    "value domain dropped": ("text", lambda d: _input(d, "input_input_ids").pop("value_range"),
                             [("value_domain_widened", "input:input_input_ids", None, "compatible")]),
    "values narrowed to a set": ("text", lambda d: (_input(d, "input_input_ids").pop("value_range"),
                                                    _input(d, "input_input_ids").update(values=[0, 1, 2])),
                                 [("value_domain_narrowed", "input:input_input_ids", None, "breaking")]),
    "new value domain": ("text", lambda d: _input(d, "input_attention_mask").update(values=[0, 1]),
                         [("value_domain_narrowed", "input:input_attention_mask", None, "breaking")]),
    # The request loses its batch axis: batching off, and each tensor's rank with it.
    "batching off": ("mlp", _batching_off, [("batching_off", "max_batch_size", None, "breaking"),
                                            ("rank", "input:input_x", None, "breaking"),
                                            ("rank", "output:output", None, "breaking")]),
    "ensemble input removed": ("text", lambda d: (d.update(platform="ensemble"), d.pop("backend"),
                                                  d["inputs"].pop(1)),
                               [("ensemble_input_removed", "input:input_attention_mask", None, "breaking")]),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_each_change_class_on_an_edited_real_contract(contracts: dict[str, dict[str, Any]], case: str) -> None:
    model, edit, expected = EDITS[case]
    old_doc = contracts[model]
    new_doc = copy.deepcopy(old_doc)
    edit(new_doc)
    comparison = diff_models(ModelContract.from_contract_dict(old_doc), ModelContract.from_contract_dict(new_doc))
    assert [(c.kind, c.subject, c.axis, c.classification) for c in comparison.changes] == expected
    assert comparison.compatible is all(e[3] == "compatible" for e in expected)


def test_batching_on_keeps_a_request_shape_that_was_variable(contracts: dict[str, dict[str, Any]]) -> None:
    """A model that took [n, 16] without batching and now batches up to the same n: requests keep their shape."""
    new_doc = contracts["mlp"]
    old_doc = copy.deepcopy(new_doc)
    old_doc["max_batch_size"] = 0
    old_doc["inputs"][0]["dims"] = [-1, 16]
    old_doc["outputs"][0]["dims"] = [-1, 4]
    comparison = diff_models(ModelContract.from_contract_dict(old_doc), ModelContract.from_contract_dict(new_doc))
    assert _rows(comparison.changes) == [("mlp", "batching_on", "max_batch_size", None, "compatible")]
    old_doc["inputs"][0]["max_shape"] = [64, 16]  # ... but one that took up to 64 rows is narrowed to 32
    comparison = diff_models(ModelContract.from_contract_dict(old_doc), ModelContract.from_contract_dict(new_doc))
    assert ("mlp", "range_narrowed", "input:input_x", 0, "breaking") in _rows(comparison.changes)


def test_an_ensembles_inputs_and_outputs_as_its_clients_see_them(example_repository: Path,
                                                                  variant_example_repository: Path,
                                                                  tmp_path: Path) -> None:
    """tests/ensemble_corpus/ens_good (an ensemble over the example models that Triton loads), rewired for the rebuilt
    models: its ids input becomes INT32 and its mask input goes away, as the rebuilt text model's did."""
    corpus = Path(__file__).parents[1] / "ensemble_corpus" / "ens_good"
    old, new = tmp_path / "old", tmp_path / "new"
    shutil.copytree(example_repository, old)
    shutil.copytree(variant_example_repository, new)
    shutil.copytree(corpus, old / "ens_good", ignore=shutil.ignore_patterns("expected.json"))
    shutil.copytree(corpus, new / "ens_good", ignore=shutil.ignore_patterns("expected.json"))
    config = new / "ens_good" / "config.pbtxt"
    text = config.read_text()
    for line in ('  { name: "mask", data_type: TYPE_INT64, dims: [ -1 ] }\n',
                 '      input_map { key: "input_attention_mask" value: "mask" }\n'):
        assert line in text
        text = text.replace(line, "")
    config.write_text(text.replace('{ name: "ids", data_type: TYPE_INT64, dims: [ -1 ] },',
                                   '{ name: "ids", data_type: TYPE_INT32, dims: [ -1 ] }'))  # last input now
    diff = diff_locations(str(old), str(new))
    assert [r for r in _rows(diff.changes) if r[0] == "ens_good"] == [
        ("ens_good", "data_type", "input:ids", None, "breaking"),
        ("ens_good", "ensemble_input_removed", "input:mask", None, "breaking")]
    assert ("ens_good", "shape_ranges") in {(u.model, u.fact) for u in diff.unknown}  # a config says no more


# --------------------------------------------------------------------------------------------------------------------
# Repositories gen-repo did not build: contracts derived from config.pbtxt
# --------------------------------------------------------------------------------------------------------------------
def _config_only(source: Path, destination: Path) -> Path:
    shutil.copytree(source, destination)
    for contract in destination.glob("*/*/gen_repo/contract.json"):
        contract.unlink()
    return destination


def test_config_only_repositories_compare_what_configs_say(example_repository: Path,
                                                           variant_example_repository: Path,
                                                           tmp_path: Path) -> None:
    old = _config_only(example_repository, tmp_path / "old")
    new = _config_only(variant_example_repository, tmp_path / "new")
    assert not is_exact(ModelContract.from_repository(old, "text"))
    diff = diff_locations(str(old), str(new))
    # Ranges of -1 dims and value domains are not in a config: those changes cannot be seen, and are listed.
    assert _rows(diff.changes) == [r for r in REBUILD_CHANGES if r[1] not in ("range_narrowed", "range_widened",
                                                                             "value_domain_narrowed")]
    assert {(u.model, u.fact) for u in diff.unknown} == {("mlp", "value_domains"), ("text", "value_domains"),
                                                          ("text", "shape_ranges")}
    # One side exact, the other from its config: still no made-up range change on the variable axis.
    mixed = diff_locations(str(example_repository), str(new))
    assert not any(c.kind.startswith("range_") or c.kind.startswith("value_domain") for c in mixed.changes)


def test_the_served_version_is_compared(example_repository: Path, variant_example_repository: Path,
                                        tmp_path: Path) -> None:
    """A repository with two version folders: the one the config's specific policy names counts, not the newest."""
    repo = tmp_path / "repo"
    shutil.copytree(example_repository, repo)
    shutil.copytree(variant_example_repository / "text" / "1", repo / "text" / "2")
    assert {c.model for c in diff_locations(str(example_repository), str(repo)).changes} == {"text"}
    config = repo / "text" / "config.pbtxt"
    text = config.read_text()
    start, end = text.index("version_policy"), text.index("}\n}\n", text.index("version_policy")) + 4
    config.write_text(text[:start] + "version_policy {\n  specific {\n    versions: 1\n  }\n}\n" + text[end:])
    assert diff_locations(str(example_repository), str(repo)).changes == ()


# --------------------------------------------------------------------------------------------------------------------
# Bad input: located, every problem at once
# --------------------------------------------------------------------------------------------------------------------
def test_bad_contracts_are_located_all_at_once(example_repository: Path, tmp_path: Path) -> None:
    old = tmp_path / "old"
    new = tmp_path / "new"
    shutil.copytree(example_repository, old)
    shutil.copytree(example_repository, new)
    (old / "mlp" / "1" / "gen_repo" / "contract.json").write_text("{not json")
    doc = json.loads((new / "text" / "1" / "gen_repo" / "contract.json").read_text())
    del doc["inputs"][0]["dims"]
    (new / "text" / "1" / "gen_repo" / "contract.json").write_text(json.dumps(doc))
    (new / "mlp" / "config.pbtxt").write_text("max_batch_size: many\n")
    with pytest.raises(GenRepoError) as caught:
        diff_locations(str(old), str(new))
    located = sorted((Path(p.file).relative_to(tmp_path).as_posix(), p.pointer) for p in caught.value.problems)
    assert located == [("new/mlp/config.pbtxt", ""), ("new/text/1/gen_repo/contract.json", "/dims"),
                       ("old/mlp/1/gen_repo/contract.json", "")]


def test_a_repository_and_a_version_folder_are_not_compared(example_repository: Path, tmp_path: Path) -> None:
    with pytest.raises(GenRepoError) as caught:
        diff_locations(str(example_repository), str(example_repository / "mlp" / "1"))
    assert "compare two repositories or two version folders" in caught.value.problems[0].message
    with pytest.raises(GenRepoError) as caught:
        diff_locations(str(tmp_path), str(example_repository))
    assert caught.value.problems[0].file == str(tmp_path)
    assert "not a model repository" in caught.value.problems[0].message


def test_a_model_folder_leading_outside_is_refused(example_repository: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    shutil.copytree(example_repository / "mlp", outside)
    repo = tmp_path / "repo"
    shutil.copytree(example_repository, repo)
    (repo / "evil").symlink_to(outside, target_is_directory=True)
    with pytest.raises(GenRepoError) as caught:
        diff_locations(str(example_repository), str(repo))
    assert [(p.file, p.message.split(" (")[0]) for p in caught.value.problems] == [
        (str(repo / "evil"), "refused: a symlink")], caught.value.problems


# --------------------------------------------------------------------------------------------------------------------
# Held out: the classification agrees with what the client-side validator refuses
# --------------------------------------------------------------------------------------------------------------------
def _requests(contract: ModelContract) -> list[dict[str, Any]]:
    """Requests the contract accepts: its example inputs at min/opt/max (values from each domain), the same with
    any integer an input without a domain may take, and each without one optional input."""
    import numpy as np

    requests = []
    for shape in ("min", "opt", "max"):
        for seed in range(3):
            example = contract.example_inputs(shape, seed=seed)
            requests.append(example)
            rng = np.random.default_rng(seed)
            anything = dict(example)
            for tensor in contract.inputs:
                if tensor.values is None and tensor.dtype.kind in "iu":
                    anything[tensor.name] = rng.integers(0, 1000, size=example[tensor.name].shape).astype(tensor.dtype)
            requests.append(anything)
            requests += [{k: v for k, v in example.items() if k != t.name} for t in contract.inputs if t.optional]
    return requests


def _request_side(change: Any) -> bool:
    """A change that can refuse a request (as opposed to changing what a client reads back)."""
    return change.subject.startswith("input:") or change.subject == "max_batch_size"


CROSS_CHECKED = [(case, *EDITS[case][:2]) for case in sorted(EDITS)]


@pytest.mark.parametrize(("case", "model", "edit"), CROSS_CHECKED, ids=[c[0] for c in CROSS_CHECKED])
def test_a_breaking_request_side_change_refuses_an_old_request(contracts: dict[str, dict[str, Any]], case: str,
                                                               model: str, edit: Any) -> None:
    """For every edit: some request the old contract accepts is refused by ``ModelContract.validate`` under the new
    one exactly when the diff reports a breaking change on the request side (inputs, batch)."""
    new_doc = copy.deepcopy(contracts[model])
    edit(new_doc)
    old, new = ModelContract.from_contract_dict(contracts[model]), ModelContract.from_contract_dict(new_doc)
    requests = _requests(old)
    assert all(old.validate(r) == [] for r in requests)
    refused = [r for r in requests if new.validate(r)]
    breaking = [c for c in diff_models(old, new).breaking if _request_side(c)]
    assert bool(refused) == bool(breaking), (case, [c.kind for c in breaking])


def test_the_rebuild_agrees_with_the_validator(example_repository: Path, variant_example_repository: Path) -> None:
    for model, refuses in (("mlp", False), ("text", True)):
        old = ModelContract.from_repository(example_repository, model)
        new = ModelContract.from_repository(variant_example_repository, model)
        assert any(new.validate(r) for r in _requests(old)) is refuses
        assert any(_request_side(c) for c in old.compatible_with(new).breaking) is refuses


# --------------------------------------------------------------------------------------------------------------------
# Rename detection: the same answer as the first-fit scan it replaced, in linear work
# --------------------------------------------------------------------------------------------------------------------
def _first_fit(role: str, removed: list[Any], added: list[Any]) -> list[tuple[str, str]]:
    """The rename rule as first written: each removed tensor scans every added one (cubic in renames)."""
    renamed: dict[str, str] = {}
    pairs = []
    for gone in removed:
        match = next((t for t in added if t.name not in renamed.values() and t.data_type == gone.data_type
                      and t.dims == gone.dims and (role == "output" or not t.optional or gone.optional)), None)
        if match is not None:
            renamed[gone.name] = match.name
            pairs.append((gone.name, match.name))
    return pairs


def _tensors(prefix: str, specs: list[tuple[int, bool]], template: Any) -> list[Any]:
    """Tensors shaped like ``template`` (a real contract's input), one per (kind, optional): kind picks the type."""
    from dataclasses import replace

    kinds = [("TYPE_INT64", template.dims), ("TYPE_INT32", template.dims), ("TYPE_INT64", (*template.dims, 2))]
    return [replace(template, name=f"{prefix}{i}", data_type=kinds[kind][0], dims=kinds[kind][1], optional=optional)
            for i, (kind, optional) in enumerate(specs)]


def test_renames_pair_tensors_exactly_as_the_first_fit_scan(contracts: dict[str, dict[str, Any]]) -> None:
    """Bucketed by (data type, dims), the pairing is the first-fit scan's, pair by pair and in order, for inputs
    (required never matched to optional) and outputs, on tensors shaped like the example's real inputs."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from generator.contracts.diff import _renames

    template = ModelContract.from_contract_dict(contracts["text"]).inputs[0]
    specs = st.lists(st.tuples(st.integers(0, 2), st.booleans()), max_size=12)

    @settings(max_examples=300, deadline=None)
    @given(old=specs, new=specs, role=st.sampled_from(["input", "output"]))
    def check(old: list[tuple[int, bool]], new: list[tuple[int, bool]], role: str) -> None:
        removed, added = _tensors("old_", old, template), _tensors("new_", new, template)
        assert _renames(role, removed, added) == _first_fit(role, removed, added)

    check()


class _Counted(str):
    """A name or data type that counts how often it is compared by value (each tensor has its own objects), and
    stops the test once the count passes ``limit`` (the first-fit scan would take hours at this size)."""

    compared = 0
    limit = 0

    def __eq__(self, other: object) -> bool:
        _Counted.compared += 1
        assert _Counted.compared <= _Counted.limit, f"more than {_Counted.limit} comparisons"
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_renaming_thousands_of_inputs_takes_a_linear_number_of_comparisons(
        contracts: dict[str, dict[str, Any]]) -> None:
    """3,000 inputs of the real text model renamed: every one is found as its rename, with O(n) comparisons of
    names and data types (the first-fit scan, checking each candidate against every earlier match, made O(n³))."""
    from dataclasses import replace

    base = ModelContract.from_contract_dict(contracts["text"])
    template = base.inputs[0]
    n = 3000

    def side(prefix: str) -> ModelContract:
        return replace(base, inputs=tuple(replace(template, name=_Counted(f"{prefix}{i}"),
                                                  data_type=_Counted(template.data_type)) for i in range(n)))

    old, new = side("input_"), side("renamed_")
    _Counted.compared, _Counted.limit = 0, 10 * n
    comparison = diff_models(old, new)
    _Counted.limit = 1 << 62  # checking the answer compares too
    assert [c.kind for c in comparison.changes] == ["input_renamed"] * n
    assert {(c.old, c.new) for c in comparison.changes} == {(f"input_{i}", f"renamed_{i}") for i in range(n)}


def test_a_tuned_rebuild_changes_served_settings_only_each_compatible(example_repository: Path,
                                                                      tuned_example_repository: Any) -> None:
    diff = diff_locations(str(example_repository), str(tuned_example_repository.repo))
    assert [(c.model, c.kind, c.subject, c.old, c.new, c.classification) for c in diff.changes] == [
        ("text", "instance_group", "instance_group", ["KIND_CPU x2"], ["KIND_CPU x3"], "compatible"),
        ("text", "queue_delay", "dynamic_batching", 100, 500, "compatible"),
    ]
    assert diff.breaking == 0 and diff.changed == ("text",) and diff.unchanged == ("mlp",)
    assert "which no request or response shows" in diff.changes[0].message
    # One model's two version folders compare its served settings too; the reverse is the mirror image.
    (change, _delay) = diff_locations(str(tuned_example_repository.repo / "text" / "1"),
                                      str(example_repository / "text" / "1")).changes
    assert (change.kind, change.old, change.new) == ("instance_group", ["KIND_CPU x3"], ["KIND_CPU x2"])


def test_served_setting_changes_are_compatible_one_by_one() -> None:
    from generator.contracts.diff import ServedSettings, served_changes

    base = ServedSettings(("KIND_CPU x1",), 100, (4, 8))
    rows = {
        "kind": ServedSettings(("KIND_GPU x1",), 100, (4, 8)),
        "preferred": ServedSettings(("KIND_CPU x1",), 100, ()),
        "off": ServedSettings(("KIND_CPU x1",), None, None),
    }
    found = {name: [(c.kind, c.old, c.new, c.breaking) for c in served_changes("m", base, new)]
             for name, new in rows.items()}
    assert found == {
        "kind": [("instance_group", ["KIND_CPU x1"], ["KIND_GPU x1"], False)],
        "preferred": [("preferred_batch_size", [4, 8], [], False)],
        "off": [("dynamic_batching", True, False, False)],
    }
    assert served_changes("m", base, base) == [] and served_changes("m", None, base) == []
    (preferred,) = served_changes("m", base, rows["preferred"])
    assert preferred.message.startswith("preferred_batch_size [4, 8] -> [] (none): ")
