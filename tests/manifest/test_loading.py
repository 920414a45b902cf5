"""Manifest loading: schema, paths, spec selection, defaults, conflicts, names (generator/manifest/loading.py)."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from generator.errors import GenRepoError
from generator.manifest.loading import load_manifest
from tests.manifest_helpers import AITUNE, EXAMPLES_MANIFEST, batch_graph, problems_of, write_manifest


def _load_error(folder: Path, document: dict, **kwargs) -> list[str]:
    with pytest.raises(GenRepoError) as info:
        load_manifest(write_manifest(folder, document), **kwargs)
    return problems_of(info.value)


def test_example_manifest_loads():
    manifest = load_manifest(EXAMPLES_MANIFEST)
    assert [m.name for m in manifest.models] == ["mlp", "text"]
    mlp = manifest.models[0]
    assert mlp.version == 1
    assert mlp.target == "auto"
    assert mlp.source is not None and mlp.source.kind == "factory"
    assert mlp.source.factory == "examples.models:make_mlp"
    assert mlp.spec_file == (EXAMPLES_MANIFEST.parent / "specs" / "mlp.graphspec.json").resolve()
    assert mlp.spec_pointer == "/graph"
    assert manifest.output_dir == (EXAMPLES_MANIFEST.parent / "model_repository").resolve()


def test_json_manifest_and_inline_spec(tmp_path):
    path = write_manifest(tmp_path, {"models": [{"name": "m", "spec": batch_graph()}]}, name="m.json")
    manifest = load_manifest(path)
    assert manifest.models[0].spec_file == path
    assert manifest.models[0].spec_pointer == "/models/0/spec"


def test_inline_wrapper_form(tmp_path):
    manifest = load_manifest(write_manifest(tmp_path, {"models": [{"name": "m", "spec": {"graph": batch_graph()}}]}))
    assert manifest.models[0].spec_pointer == "/models/0/spec/graph"


def test_invalid_inline_spec_points_into_manifest(tmp_path):
    bad = batch_graph()
    bad["input_spec"]["tensor_data"][0]["min_shape"] = [1]
    problems = _load_error(tmp_path, {"models": [{"name": "m", "spec": bad}]})
    assert any(p.startswith("/models/0/spec/input_spec/tensor_data/0") for p in problems), problems


def test_defaults_merge(tmp_path):
    shutil.copy(AITUNE / "mlp.graphspec.json", tmp_path / "mlp.json")
    document = {
        "defaults": {"target": "onnx", "parameters": {"a": "1", "b": "2"}, "warmup": True,
                     "dynamic_batching": {"max_queue_delay_microseconds": 7}},
        "models": [
            {"spec": "mlp.json", "parameters": {"b": "3"}, "dynamic_batching": {"preferred_batch_size": [2]}},
            {"name": "other", "spec": "mlp.json", "target": "python", "dynamic_batching": False},
        ],
    }
    manifest = load_manifest(write_manifest(tmp_path, document))
    first, second = manifest.models
    assert first.name == "mlp_0"  # numbered AITune graph outside a tune report: file stem + graph name
    assert first.target == "onnx" and second.target == "python"
    assert first.options["parameters"] == {"a": "1", "b": "3"}
    assert first.options["dynamic_batching"] == {"max_queue_delay_microseconds": 7, "preferred_batch_size": [2]}
    assert second.options["dynamic_batching"] is False
    assert first.option_pointer("warmup") == "/defaults/warmup"
    assert first.option_pointer("parameters") == "/models/0/parameters"


def test_unknown_keys_everywhere_reported_at_once(tmp_path):
    problems = _load_error(tmp_path, {
        "bogus": 1,
        "defaults": {"targte": "onnx"},
        "models": [{"spec": "x.json", "colour": "red", "dynamic_batching": {"delay": 1}}],
    })
    joined = "\n".join(problems)
    assert any(p.startswith(": Additional properties") and "'bogus'" in p for p in problems)
    assert "/defaults: Additional properties" in joined
    assert "/models/0: Additional properties" in joined
    assert "/models/0/dynamic_batching" in joined


@pytest.mark.parametrize("name", ["gen-repo.yaml", "gen-repo.json"])
def test_an_unknown_key_suggests_the_closest_known_key_with_its_line_and_column(tmp_path, name):
    """A typo (``taget``) names the key, where it is in the file and the key that was meant."""
    path = tmp_path / name
    if name.endswith(".yaml"):
        path.write_text("defaults:\n  batchng: auto\nmodels:\n  - spec: x.json\n    taget: python\n"
                        "    dynamic_batching: {prefered_batch_size: [2]}\n")
        at_target, at_batching, at_preferred = "line 5 column 5", "line 2 column 3", "line 6 column 24"
    else:
        path.write_text('{"defaults": {"batchng": "auto"},\n "models": [{"spec": "x.json", "taget": "python",\n'
                        '   "dynamic_batching": {"prefered_batch_size": [2]}}]}\n')
        at_target, at_batching, at_preferred = "line 2 column 32", "line 1 column 15", "line 3 column 25"
    with pytest.raises(GenRepoError) as caught:
        load_manifest(path)
    messages = {p.pointer: p.message for p in caught.value.problems}
    assert f"'taget' at {at_target}, did you mean 'target'?" in messages["/models/0"]
    assert f"'batchng' at {at_batching}, did you mean 'batching'?" in messages["/defaults"]
    assert f"'prefered_batch_size' at {at_preferred}, did you mean 'preferred_batch_size'?" in \
        messages["/models/0/dynamic_batching"]
    # A key like no known one lists the known keys instead of guessing.
    path = tmp_path / "other.yaml"
    path.write_text("models:\n  - spec: x.json\n    zzz: 1\n")
    with pytest.raises(GenRepoError) as caught:
        load_manifest(path)
    assert "'zzz' at line 3 column 5; known keys: batch_axis_multipliers, batching," in str(caught.value)


def test_missing_files_are_problems(tmp_path):
    problems = _load_error(tmp_path, {"models": [
        {"name": "a", "spec": "missing.json"},
        {"name": "b", "spec": {"file": "gone.json", "graph": 0}, "source": {"onnx": "model.onnx"}},
        {"name": "c", "spec": batch_graph(), "source": {"pt2": "model.pt2"}},
    ]})
    assert sorted(p.split(": paths in a manifest")[0] for p in problems) == [
        "/models/0/spec: spec file 'missing.json' not found",
        "/models/1/source/onnx: onnx file 'model.onnx' not found",
        "/models/1/spec/file: spec file 'gone.json' not found",
        "/models/2/source/pt2: pt2 file 'model.pt2' not found",
    ]


def test_a_missing_path_names_the_folder_it_was_resolved_from(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "project"
    folder.mkdir()
    problems = _load_error(folder, {"models": [{"name": "a", "spec": "specs/nope.json"}],
                                    "code_path": ["lib"]})
    assert (f"/models/0/spec: spec file 'specs/nope.json' not found: paths in a manifest are relative to its folder "
            f"{folder}, so it was looked for at {folder / 'specs' / 'nope.json'}") in problems
    assert (f"/code_path/0: code_path folder 'lib' not found: paths in a manifest are relative to its folder {folder}, "
            f"so it was looked for at {folder / 'lib'}") in problems


def test_a_path_typed_from_the_current_folder_gets_the_path_to_write(tmp_path, monkeypatch):
    """The issue's two tries: a spec path written from where the command runs, then refused for leaving the folder.
    The message says where the file is and what to write, or that it needs --allow-outside."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples" / "specs").mkdir(parents=True)
    shutil.copy(AITUNE / "mlp.graphspec.json", tmp_path / "examples" / "specs" / "mlp.json")
    shutil.copy(AITUNE / "mlp.graphspec.json", tmp_path / "examples" / "samples.npz")  # only its existence counts
    outside = tmp_path / "manifests"
    outside.mkdir()
    document = {"models": [{"name": "a", "spec": "examples/specs/mlp.json", "samples": "examples/samples.npz"}]}
    problems = _load_error(outside, document)
    found = f"'examples/specs/mlp.json' exists relative to the current folder {tmp_path}: "
    assert any(p.startswith("/models/0/spec: spec file 'examples/specs/mlp.json' not found: ") and p.endswith(
        f"{found}from the manifest it is '../examples/specs/mlp.json', outside the manifest's folder: write that and "
        f"pass --allow-outside, or move the file under {outside}") for p in problems), problems
    assert any(p.startswith("/models/0/samples: samples file") and "'../examples/samples.npz'" in p
               for p in problems), problems
    # With --allow-outside the path is simply the one to write; the path written then loads.
    problems = _load_error(outside, document, allow_outside=True)
    assert any(p.endswith(f"{found}write '../examples/specs/mlp.json' (relative to the manifest)") for p in problems)
    fixed = {"models": [{"name": "a", "spec": "../examples/specs/mlp.json"}]}
    assert [m.name for m in load_manifest(write_manifest(outside, fixed), allow_outside=True).models] == ["a"]
    # A manifest in a folder above the file: the path to write stays inside it, no flag needed.
    (tmp_path / "examples" / "gen-repo.yaml").unlink(missing_ok=True)
    problems = _load_error(tmp_path / "examples", {"models": [{"name": "a", "spec": "examples/specs/mlp.json"}]})
    assert any(p.endswith(f"{found}write 'specs/mlp.json' (relative to the manifest)") for p in problems), problems
    assert load_manifest(write_manifest(tmp_path / "examples", {"models": [{"name": "a", "spec": "specs/mlp.json"}]}))


def test_factory_is_recorded_never_imported(tmp_path):
    document = {"models": [{"name": "m", "spec": batch_graph(), "source": {"factory": "no_such_module_xyz:make"}}]}
    manifest = load_manifest(write_manifest(tmp_path, document))
    assert manifest.models[0].source.factory == "no_such_module_xyz:make"
    problems = _load_error(tmp_path, {"models": [{"name": "m", "spec": batch_graph(),
                                                  "source": {"factory": "os.system('x')"}}]})
    assert any(p.startswith("/models/0/source") for p in problems)


def test_paths_outside_the_manifest_folder_are_refused(tmp_path):
    inner = tmp_path / "inner"
    inner.mkdir()
    shutil.copy(AITUNE / "mlp.graphspec.json", tmp_path / "mlp.json")
    os.symlink(tmp_path / "mlp.json", inner / "link.json")
    document = {"output": "../out", "models": [
        {"name": "a", "spec": "../mlp.json"},
        {"name": "b", "spec": "link.json"},
        {"name": "c", "spec": str(tmp_path / "mlp.json")},
    ]}
    problems = _load_error(inner, document)
    for pointer in ("/output", "/models/0/spec", "/models/1/spec", "/models/2/spec"):
        assert any(p.startswith(pointer + ": path") and "outside" in p for p in problems), (pointer, problems)
    manifest = load_manifest(inner / "gen-repo.yaml", allow_outside=True)
    assert len(manifest.models) == 3
    assert manifest.output_dir == tmp_path / "out"


def test_a_symlink_loop_or_a_nul_byte_is_a_located_problem(tmp_path):
    """Paths that cannot be resolved are problems of their entry, never a traceback (Path.resolve raised on a loop)."""
    os.symlink("a.json", tmp_path / "b.json")
    os.symlink("b.json", tmp_path / "a.json")
    problems = _load_error(tmp_path, {"models": [{"name": "a", "spec": "a.json"},
                                                 {"name": "b", "spec": {"file": "x\0.json"}},
                                                 {"name": "c", "spec": "specs/../../b.json"}]})
    loop = "/models/0/spec: path 'a.json' cannot be used: Too many levels"
    assert any(p.startswith(loop) for p in problems), problems
    assert any(p.startswith("/models/1/spec/file: path 'x\\x00.json' cannot be used") for p in problems), problems
    assert any(p.startswith("/models/2/spec: path") and "outside" in p for p in problems), problems


def test_tune_report_graph_selection(tmp_path):
    shutil.copy(AITUNE / "tune_report.json", tmp_path / "report.json")
    problems = _load_error(tmp_path, {"models": [{"spec": "report.json"}]})
    assert len(problems) == 1 and "holds 5 graphs" in problems[0] and "mlp/0" in problems[0]
    document = {"models": [
        {"spec": {"file": "report.json", "graph": "text"}},
        {"spec": {"file": "report.json", "graph": 0}},
        {"spec": {"file": "report.json", "graph": "two_outputs/0"}},
    ]}
    manifest = load_manifest(write_manifest(tmp_path, document))
    assert [m.name for m in manifest.models] == ["text_0", "mlp_0", "two_outputs_0"]
    assert [m.module_name for m in manifest.models] == ["text", "mlp", "two_outputs"]
    assert manifest.models[0].spec_pointer == "/modules/1/graphs/0"
    problems = _load_error(tmp_path, {"models": [{"spec": {"file": "report.json", "graph": "nope"}},
                                                 {"spec": {"file": "report.json", "graph": 9}}]})
    assert problems[0].startswith("/models/0/spec/graph: no single graph 'nope'")
    assert problems[1].startswith("/models/1/spec/graph: no single graph 9")


def test_invalid_spec_file_problems_name_the_spec_file(tmp_path):
    doc = json.loads((AITUNE / "mlp.graphspec.json").read_text())
    doc["graph"]["input_spec"]["tensor_data"][0]["dtype"] = 5
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(GenRepoError) as info:
        load_manifest(write_manifest(tmp_path, {"models": [{"spec": "bad.json"}]}))
    files = {Path(p.file).name for p in info.value.problems}
    assert files == {"gen-repo.yaml", "bad.json"}


@pytest.mark.parametrize(
    ("options", "pointer", "words"),
    [
        ({"dynamic_batching": {"preserve_ordering": True, "priority_levels": 2, "default_priority_level": 1}},
         "/models/0/dynamic_batching/preserve_ordering", "priority_levels 2"),
        ({"batching": "none", "dynamic_batching": {"max_queue_delay_microseconds": 5}},
         "/models/0/dynamic_batching", "batching is 'none'"),
        ({"batching": "none", "max_batch_size": 4}, "/models/0/max_batch_size", "batching is 'none'"),
        ({"dynamic_batching": {"priority_levels": 2, "default_priority_level": 3}},
         "/models/0/dynamic_batching/default_priority_level", "1..priority_levels"),
        ({"dynamic_batching": {"priority_levels": 2}}, "/models/0/dynamic_batching/priority_levels",
         "default_priority_level"),
        ({"dynamic_batching": {"priority_levels": 1, "default_priority_level": 1,
                               "priority_queue_policy": {"3": {"max_queue_size": 1}}}},
         "/models/0/dynamic_batching/priority_queue_policy/3", "outside"),
        ({"dynamic_batching": {"preserve_ordering": True, "default_queue_policy": {
            "timeout_action": "DELAY", "default_timeout_microseconds": 10}}},
         "/models/0/dynamic_batching/default_queue_policy/timeout_action", "DELAY"),
        ({"version": 3, "version_policy": {"specific": [1, 2]}}, "/models/0/version_policy/specific", "version 3"),
        ({"instance_group": [{"kind": "KIND_CPU", "gpus": [0]}]}, "/models/0/instance_group/0/gpus", "KIND_CPU"),
    ],
)
def test_conflicting_options(tmp_path, options, pointer, words):
    problems = _load_error(tmp_path, {"models": [{"name": "m", "spec": batch_graph(), **options}]})
    assert any(p.startswith(pointer + ":") and words in p for p in problems), problems


def test_conflict_from_defaults_points_at_defaults(tmp_path):
    document = {"defaults": {"batching": "none"},
                "models": [{"name": "m", "spec": batch_graph(), "dynamic_batching": True}]}
    problems = _load_error(tmp_path, document)
    assert any(p.startswith("/models/0/dynamic_batching:") for p in problems)


@pytest.mark.parametrize("name", ["a/b", "..", ".hidden", "bad name!", "x" * 200, "a\\b"])
def test_bad_model_names(tmp_path, name):
    problems = _load_error(tmp_path, {"models": [{"name": name, "spec": batch_graph()}]})
    assert any(p.startswith("/models/0/name:") for p in problems), problems


def test_duplicate_and_case_insensitive_names(tmp_path):
    problems = _load_error(tmp_path, {"models": [
        {"name": "Model", "spec": batch_graph()},
        {"name": "Model", "spec": batch_graph()},
        {"name": "model", "spec": batch_graph()},
    ]})
    assert any(p.startswith("/models/1/name:") and "already used" in p for p in problems)
    assert any(p.startswith("/models/2/name:") and "only in case" in p for p in problems)


def test_all_problems_at_once(tmp_path):
    problems = _load_error(tmp_path, {"models": [
        {"name": "a/b", "spec": "missing.json"},
        {"name": "ok", "spec": batch_graph(), "source": {"onnx": "nope.onnx"},
         "batching": "none", "max_batch_size": 2},
    ]})
    assert len(problems) >= 3


def test_the_exporter_choice_merges_from_defaults_and_reaches_the_plan_and_the_cache_key(tmp_path):
    from generator.building.pipeline import BuildOptions, model_cache_key
    from generator.building.results import tool_versions
    from generator.planning.targets import plan_build
    from generator.repository.cache import BuildCache

    document = {"defaults": {"export": {"exporter": "torchscript"}},
                "models": [{"name": "pinned", "spec": batch_graph()},
                           {"name": "dynamo", "spec": batch_graph(), "export": {"exporter": "dynamo"}},
                           {"name": "auto", "spec": batch_graph(), "export": {"exporter": "auto"}}]}
    plan, _ = plan_build(write_manifest(tmp_path, document), BuildOptions(target="python"))
    assert [m.exporter for m in plan.models] == ["torchscript", "dynamo", "auto"]
    # Everything else equal (the name too), each choice is its own cache entry: the exporter changes the file.
    cache = BuildCache(tmp_path / "cache")
    keys = {model_cache_key(cache, replace(m, name="m"), BuildOptions(), tool_versions()) for m in plan.models}
    assert len(keys) == 3
    (unset,) = plan_build(write_manifest(tmp_path / "unset", {"models": [{"name": "m", "spec": batch_graph()}]}),
                          BuildOptions(target="python"))[0].models
    assert unset.exporter == "auto"


def test_a_bad_exporter_is_a_located_exit_2_error(tmp_path):
    from click.testing import CliRunner

    from generator.cli import main

    manifest = write_manifest(tmp_path, {"defaults": {"export": {"exproter": "dynamo"}},
                                         "models": [{"name": "m", "spec": batch_graph(),
                                                     "export": {"exporter": "onnxscript"}}]})
    result = CliRunner().invoke(main, ["plan", str(manifest)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert f"{manifest}: /models/0/export/exporter: 'onnxscript' is not one of" in result.output
    assert f"{manifest}: /defaults/export: " in result.output and "'exproter'" in result.output  # all at once
    # The schema's values are the exporter module's choices.
    from generator.building.export.onnx import EXPORTER_CHOICES

    schema = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "manifest.schema.json").read_text())
    assert schema["$defs"]["option.export"]["properties"]["exporter"]["enum"] == list(EXPORTER_CHOICES)


#: A ``tuned:`` block as ``gen-repo tune`` writes it (the format both tune and plan follow).
TUNED = {
    "instance_group": [{"kind": "KIND_CPU", "count": 2}],
    "dynamic_batching": {"max_queue_delay_microseconds": 500, "preferred_batch_size": []},
    "measured": {"at": "2026-12-06T08:00:00Z", "hardware": "2 CPUs (Intel Xeon), no GPU", "engine": "loop",
                 "concurrency": [8, 32], "throughput": 412.0, "noise": 0.04, "p99_ms": 12.3, "gen_repo": "0.2.0"},
}


def test_a_tuned_block_is_carried_to_planning_as_written(tmp_path):
    manifest = load_manifest(write_manifest(tmp_path, {"models": [
        {"name": "m", "spec": batch_graph(), "instance_group": [{"count": 3}], "tuned": TUNED},
        {"name": "n", "spec": batch_graph()}]}))
    tuned, untuned = manifest.models
    assert tuned.tuned == TUNED
    assert tuned.options["instance_group"] == [{"count": 3}]  # the model's own option stays; the plan applies tuned
    assert untuned.tuned is None
    assert tuned.tuned_pointer("dynamic_batching", "preferred_batch_size") == \
        "/models/0/tuned/dynamic_batching/preferred_batch_size"


def test_a_tuned_block_is_refused_where_it_is_wrong_all_at_once(tmp_path):
    measured = {k: v for k, v in TUNED["measured"].items() if k != "engine"}
    problems = _load_error(tmp_path, {"models": [
        {"name": "m", "spec": batch_graph(), "tuned": {**TUNED, "instance_count": 2}},
        {"name": "n", "spec": batch_graph(), "tuned": {**TUNED, "measured": {**measured, "at": "yesterday"}}},
        {"name": "o", "spec": batch_graph(), "tuned": {"instance_group": [{"count": 2}]}},
        {"name": "p", "spec": batch_graph(), "tuned": {**TUNED, "dynamic_batching": {"priority_levels": 2}}},
    ]})
    assert any(p.startswith("/models/0/tuned") and "instance_count" in p for p in problems), problems
    assert any(p.startswith("/models/1/tuned/measured") and "'engine' is a required property" in p
               for p in problems), problems
    assert any(p.startswith("/models/1/tuned/measured/at") for p in problems), problems
    assert any(p.startswith("/models/2/tuned") and "'measured' is a required property" in p for p in problems), problems
    assert any(p.startswith("/models/3/tuned/dynamic_batching") and "priority_levels" in p for p in problems), problems


def test_a_tuned_number_a_config_field_cannot_hold_is_refused_where_it_is(tmp_path):
    tuned = {**TUNED, "instance_group": [{"kind": "KIND_CPU", "count": 2**31, "gpus": [0]}],
             "dynamic_batching": {"max_queue_delay_microseconds": 2**64 - 1}}  # past uint64: the reader refuses it
    problems = _load_error(tmp_path, {"models": [{"name": "m", "spec": batch_graph(), "tuned": tuned}]})
    assert any(p.startswith("/models/0/tuned/instance_group/0/count: 2147483648 does not fit") for p in problems)
    assert not any("max_queue_delay_microseconds" in p for p in problems), problems
    assert "/models/0/tuned/instance_group/0/gpus: gpus cannot be listed for KIND_CPU" in problems


def test_tuned_is_per_model_not_a_default(tmp_path):
    problems = _load_error(tmp_path, {"defaults": {"tuned": TUNED}, "models": [{"name": "m", "spec": batch_graph()}]})
    assert any(p.startswith("/defaults") and "tuned" in p for p in problems), problems
