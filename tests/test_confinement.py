"""Confinement (issue 21): no path in a generated or linted config, an output folder or a request leaves its folder.

- Every ModelConfig field of ``generator.confinement.CONFIG_PATH_FIELDS`` is refused by ``plan``/``config``/
  ``build`` where the manifest gives it (exit 2, at the manifest's pointer) and by ``lint`` in any repository.
- A real Triton (2.51) imports a ``model.py`` from outside the repository through ``default_model_filename``; gen-repo
  refuses that config before any server sees it.
- The output folder never equals or contains what a build reads, and only a folder gen-repo made is replaced.
- ``check-request --repo`` and ``ModelContract.from_repository`` read nothing outside the repository.
- A property test: hostile paths (``..``, absolute, symlinks, NUL, newline, very long, unicode) in every place a
  manifest takes one are refused at their pointer, or stay inside their folder.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from google.protobuf import text_encoding, text_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.cli import main
from generator.client import ModelContract
from generator.confinement import CONFIG_PATH_FIELDS, config_path_escapes, relative_path_problem
from generator.errors import GenRepoError
from generator.manifest.loading import load_manifest
from generator.planning.plan import plan_repository
from generator.repository.lock import LOCK_FILE_NAME, OUTPUT_MARKER, build_lock
from generator.repository.staging import RepositoryWriter
from generator.triton.proto import model_config_pb2
from tests.lint_cases import lint_repository

REPO = Path(__file__).resolve().parent.parent
SPECS = REPO / "examples" / "specs"

#: One escaping value per row of CONFIG_PATH_FIELDS: (pbtxt that sets it, the field as the message names it).
ESCAPES: dict[str, tuple[str, str]] = {
    "default_model_filename": ('default_model_filename: "../../../elsewhere/model.py"', "default_model_filename"),
    "cc_model_filenames[CC]": ('cc_model_filenames { key: "8.6" value: "../8.6.plan" }', "cc_model_filenames['8.6']"),
    "model_warmup[].inputs[NAME].input_data_file": (
        'model_warmup { name: "w" batch_size: 1 inputs { key: "input_x" value { data_type: TYPE_FP32 dims: 16 '
        'input_data_file: "/etc/passwd" } } }', "model_warmup[0].inputs['input_x'].input_data_file"),
    "sequence_batching.state[].initial_state[].data_file": (
        'sequence_batching { state { input_name: "s_in" output_name: "s_out" data_type: TYPE_FP32 dims: 1 '
        'initial_state { name: "zero" data_type: TYPE_FP32 dims: 1 data_file: "../../x" } } }',
        "sequence_batching.state[0].initial_state[0].data_file"),
    "output[].label_filename": ('output { name: "o" data_type: TYPE_FP32 dims: 1 label_filename: "../labels.txt" }',
                                "output[0].label_filename"),
    "backend": ('backend: "../../tmp/evil"', "backend"),
    "runtime": ('runtime: "../libevil.so"', "runtime"),
    "platform": ('platform: "a/b"', "platform"),
    "model_repository_agents.agents[].name": ('model_repository_agents { agents { name: "../evil" } }',
                                              "model_repository_agents.agents[0].name"),
    "model_repository_agents.agents[checksum].parameters[ALGORITHM:PATH] (key)": (
        'model_repository_agents { agents { name: "checksum" parameters { key: "MD5:../../etc/shadow" value: "0" } '
        '} }', "model_repository_agents.agents[0].parameters key 'MD5:../../etc/shadow'"),
    "parameters[EXECUTION_ENV_PATH]": (
        'parameters { key: "EXECUTION_ENV_PATH" value { string_value: "$$TRITON_MODEL_DIRECTORY/../../env.tar.gz" } }',
        "parameters['EXECUTION_ENV_PATH']"),
    "parameters[TRITON_BATCH_STRATEGY_PATH]": (
        'parameters { key: "TRITON_BATCH_STRATEGY_PATH" value { string_value: "batch.so" } }',
        "parameters['TRITON_BATCH_STRATEGY_PATH']"),
    **{
        f"optimization.execution_accelerators.*_execution_accelerator[].parameters[{key}]": (
            f'optimization {{ execution_accelerators {{ gpu_execution_accelerator {{ name: "tensorrt" parameters {{ '
            f'key: "{key}" value: "{value}" }} }} }} }}',
            f"optimization.execution_accelerators.gpu_execution_accelerator[0].parameters['{key}']")
        for key, value in (("trt_engine_cache_path", "/tmp/engines"), ("trt_timing_cache_path", "cache"),
                           ("trt_ep_context_file_path", "/tmp/ctx.onnx"),
                           ("trt_extra_plugin_lib_paths", "/tmp/libplugin.so"),
                           ("int8_calibration_table_name", "../table"))
    },
    "model_operations.op_library_filename[]": ('model_operations { op_library_filename: "libcustom_ops.so" }',
                                               "model_operations.op_library_filename[0]"),
}
#: The same fields with values that stay inside the model's folder: no finding.
CONFINED = """name: "m"
backend: "python"
runtime: "model.py"
default_model_filename: "sub/model.py"
cc_model_filenames { key: "8.6" value: "plans/8.6.plan" }
output { name: "o" data_type: TYPE_FP32 dims: 1 label_filename: "labels.txt" }
parameters { key: "EXECUTION_ENV_PATH" value { string_value: "$$TRITON_MODEL_DIRECTORY/envs/py.tar.gz" } }
model_warmup { name: "w" batch_size: 1
  inputs { key: "o" value { data_type: TYPE_FP32 dims: 1 input_data_file: "1/o" } } }
model_repository_agents { agents { name: "checksum" parameters { key: "MD5:1/model.py" value: "0" } } }
optimization { execution_accelerators { gpu_execution_accelerator { name: "tensorrt"
  parameters { key: "trt_profile_min_shapes" value: "x:1x16" } } } }
"""


def _config(text: str) -> Any:
    return text_format.Parse(text, model_config_pb2.ModelConfig())


def test_the_table_and_the_cases_name_the_same_fields() -> None:
    assert sorted(ESCAPES) == sorted(f.field for f in CONFIG_PATH_FIELDS)


@pytest.mark.parametrize("row", sorted(ESCAPES))
def test_every_path_field_is_an_escape_when_it_leaves(row: str) -> None:
    text, field = ESCAPES[row]
    (escape,) = config_path_escapes(_config(text))
    assert escape.field == field and escape.message.startswith(field), escape


def test_confined_values_are_not_escapes() -> None:
    assert config_path_escapes(_config(CONFINED)) == []


@pytest.mark.parametrize("row", sorted(ESCAPES))
def test_lint_reports_each_escape_at_its_line(tmp_path: Path, row: str) -> None:
    text, field = ESCAPES[row]
    model = tmp_path / "m"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(f'name: "m"\n# the field:\n{text}\n')
    escapes = [f for f in lint_repository(tmp_path) if f.rule == "path-escape"]
    assert [(f.file, f.line, f.severity) for f in escapes] == [("m/config.pbtxt", 3, "error")], escapes
    assert escapes[0].message.startswith(field)


# ---- plan / config / build refuse them where the manifest gives them ---------------------------------------------
def _project(root: Path, entry: dict[str, Any], **top: Any) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(SPECS, root / "specs", dirs_exist_ok=True)
    manifest = root / "gen-repo.json"
    manifest.write_text(json.dumps({"models": [{"name": "mlp", "spec": "specs/mlp.graphspec.json",
                                                "target": "python", **entry}], **top}))
    return manifest


def _cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize("row", ["default_model_filename", "cc_model_filenames[CC]",
                                 "model_warmup[].inputs[NAME].input_data_file", "runtime",
                                 "parameters[EXECUTION_ENV_PATH]", "model_operations.op_library_filename[]"])
def test_plan_config_and_build_refuse_an_escaping_fragment_at_its_pointer(tmp_path: Path, row: str) -> None:
    manifest = _project(tmp_path / "project", {"pbtxt": ESCAPES[row][0]})
    for command in (["plan"], ["config", "-o", str(tmp_path / "out")],
                    ["build", "-o", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")]):
        result = _cli(*command[:1], str(manifest), *command[1:], "--json")
        assert result.exit_code == 2, (command, result.output)
        payload = json.loads(result.stdout)
        errors = payload.get("errors") or [p for r in payload["refused"] for p in r["problems"]]  # plan --json
        assert [(e["file"], e["pointer"]) for e in errors] == [(str(manifest), "/models/0/pbtxt")], result.stdout
        assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()


def test_a_parameters_option_is_located_at_its_key_in_the_model_or_the_defaults(tmp_path: Path) -> None:
    for where, manifest in (
        ("/models/0/parameters/EXECUTION_ENV_PATH",
         _project(tmp_path / "model", {"parameters": {"EXECUTION_ENV_PATH": "/opt/envs/py.tar.gz"}})),
        ("/defaults/parameters/TRITON_BATCH_STRATEGY_PATH",
         _project(tmp_path / "defaults", {}, defaults={"parameters": {"TRITON_BATCH_STRATEGY_PATH": "/opt/b.so"}})),
    ):
        with pytest.raises(GenRepoError) as caught:
            plan_repository(load_manifest(manifest))
        assert [p.pointer for p in caught.value.problems] == [where]
    ok = _project(tmp_path / "ok", {"parameters": {"EXECUTION_ENV_PATH": "$$TRITON_MODEL_DIRECTORY/env.tar.gz"}})
    plan_repository(load_manifest(ok))


# ---- the escape is real: Triton 2.51 runs a model.py from outside the repository ---------------------------------
ELSEWHERE_MODEL = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = pb_utils.Tensor("OUTPUT0", np.array([666.0], dtype=np.float32))
        return [pb_utils.InferenceResponse(output_tensors=[out]) for _ in requests]
"""
ESCAPING_CONFIG = """name: "escape"
backend: "python"
max_batch_size: 0
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] }]
instance_group [{ kind: KIND_CPU count: 1 }]
default_model_filename: "../../../elsewhere/model.py"
"""


@pytest.mark.triton
def test_triton_runs_an_escaping_model_file_that_gen_repo_refuses(tmp_path: Path, triton_server_factory) -> None:
    import tritonclient.grpc as grpcclient

    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "model.py").write_text(ELSEWHERE_MODEL)
    repo = tmp_path / "repo"
    (repo / "escape" / "1").mkdir(parents=True)
    (repo / "escape" / "config.pbtxt").write_text(ESCAPING_CONFIG)
    # Unchecked, the server loads the model from outside the repository and runs its code.
    server = triton_server_factory(repo)
    request = grpcclient.InferInput("INPUT0", [1], "FP32")
    request.set_data_from_numpy(np.zeros(1, dtype=np.float32))
    result = grpcclient.InferenceServerClient(server.grpc_url).infer("escape", [request])
    assert float(result.as_numpy("OUTPUT0")[0]) == 666.0
    server.stop()
    # gen-repo lint flags that repository...
    (finding,) = [f for f in lint_repository(repo) if f.rule == "path-escape"]
    assert (finding.file, finding.line, finding.severity) == ("escape/config.pbtxt", 7, "error")
    # ... and a manifest asking for that config gets no repository at all: nothing a server could load.
    manifest = _project(tmp_path / "project", {"pbtxt": 'default_model_filename: "../../../elsewhere/model.py"'})
    for command in ("plan", "config", "build"):
        result = _cli(command, str(manifest), "--allow-code", "--cache-dir", str(tmp_path / "cache")) \
            if command == "build" else _cli(command, str(manifest))
        assert result.exit_code == 2, result.output
        assert "/models/0/pbtxt: default_model_filename '../../../elsewhere/model.py' has a '..' component" \
            in result.output
    assert not (tmp_path / "project" / "model_repository").exists()


# ---- the output folder --------------------------------------------------------------------------------------------
def _tree(root: Path) -> dict[str, bytes | str]:
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() and not p.is_symlink() else "other")
            for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("output", [".", "specs", "..", "specs/.."])
def test_an_output_that_is_or_holds_what_the_build_reads_is_refused(tmp_path: Path, output: str) -> None:
    """``output: .`` used to build and then replace the manifest's own folder (specs, manifest, .git and all)."""
    project = tmp_path / "project"
    manifest = _project(project, {"source": {"factory": "models:make"}}, output=output)
    (project / ".git").mkdir()
    (project / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    before = _tree(tmp_path)
    for args in (["build", "--allow-code", "--allow-outside", "--cache-dir", str(tmp_path / "cache")],
                 ["config", "--allow-outside"], ["plan", "--allow-outside"]):
        result = _cli(args[0], str(manifest), *args[1:], "--json")
        assert result.exit_code == 2, result.output
        (error,) = json.loads(result.stdout)["errors"]
        assert error["pointer"] == "/output" and "choose a folder of its own" in error["message"], error
        assert _tree(tmp_path) == before


def test_an_output_given_with_o_is_checked_the_same_way(tmp_path: Path) -> None:
    manifest = _project(tmp_path / "project", {})
    (tmp_path / "cache").mkdir()
    for args in (["config", "-o", str(tmp_path / "project" / "specs")],
                 ["build", "-o", str(tmp_path), "--cache-dir", str(tmp_path / "cache")],
                 ["build", "-o", str(tmp_path / "new"), "--cache-dir", str(tmp_path / "new" / "cache")]):
        before = _tree(tmp_path)
        result = _cli(args[0], str(manifest), *args[1:], "--json")
        assert result.exit_code == 2, result.output
        errors = json.loads(result.stdout)["errors"]
        assert errors[0]["file"] == "-o/--output", errors
        assert "choose a folder of its own" in errors[0]["message"], errors
        assert _tree(tmp_path) == before


def test_only_a_folder_gen_repo_made_is_replaced(tmp_path: Path) -> None:
    """A folder of other things is refused and kept; one gen-repo made (its marker, or an older gen-repo's lock)
    is replaced."""
    manifest = _project(tmp_path / "project", {})
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("years of work")
    for command in (["config"], ["build", "--cache-dir", str(tmp_path / "cache")]):
        result = _cli(command[0], str(manifest), "-o", str(foreign), *command[1:])
        assert result.exit_code == 2, result.output
        assert f"-o/--output: /: {foreign}: the output folder exists and was not made by gen-repo" in result.output
        assert sorted(os.listdir(foreign)) == ["thesis.tex"]
    with pytest.raises(GenRepoError, match="not made by gen-repo"), RepositoryWriter(foreign):
        pass
    assert sorted(os.listdir(foreign)) == ["thesis.tex"]
    # gen-repo's own outputs: the marker (config, build), or a valid lock without one (gen-repo before the marker).
    configs = tmp_path / "configs"
    assert _cli("config", str(manifest), "-o", str(configs)).exit_code == 0
    assert (configs / OUTPUT_MARKER).is_file()
    assert _cli("config", str(manifest), "-o", str(configs)).exit_code == 0
    older = tmp_path / "older"
    with RepositoryWriter(older) as writer:
        (writer.model_dir("m", 1) / "model.onnx").write_bytes(b"x")
        writer.commit(build_lock(writer.root, {}, {"m": {}}))
    (older / OUTPUT_MARKER).unlink()
    with RepositoryWriter(older) as writer:
        (writer.model_dir("m", 1) / "model.onnx").write_bytes(b"y")
        writer.commit(build_lock(writer.root, {}, {"m": {}}))
    assert (older / OUTPUT_MARKER).is_file() and (older / "m" / "1" / "model.onnx").read_bytes() == b"y"
    (older / OUTPUT_MARKER).unlink()
    (older / LOCK_FILE_NAME).write_text("{}")  # a lock file that is not one: no evidence
    with pytest.raises(GenRepoError, match="not made by gen-repo"), RepositoryWriter(older):
        pass


# ---- check-request and ModelContract.from_repository read inside the repository only -----------------------------
CONTRACT_CONFIG = """name: "model"
backend: "python"
max_batch_size: 0
input [{ name: "x" data_type: TYPE_FP32 dims: [ 2 ] }]
output [{ name: "y" data_type: TYPE_FP32 dims: [ 2 ] }]
"""


def test_check_request_reads_no_contract_outside_the_repository(tmp_path: Path) -> None:
    (tmp_path / "elsewhere" / "model" / "1").mkdir(parents=True)
    (tmp_path / "elsewhere" / "model" / "config.pbtxt").write_text(CONTRACT_CONFIG)
    repo = tmp_path / "repo"
    (repo / "inside" / "1").mkdir(parents=True)
    (repo / "inside" / "config.pbtxt").write_text(CONTRACT_CONFIG.replace('"model"', '"inside"'))
    (repo / "linked").symlink_to(tmp_path / "elsewhere" / "model")
    np.savez(tmp_path / "req.npz", x=np.zeros(2, dtype=np.float32))
    assert _cli("check-request", "--repo", str(repo), "inside", str(tmp_path / "req.npz")).exit_code == 0
    for model in ("../elsewhere/model", "linked", str(tmp_path / "elsewhere" / "model")):
        result = _cli("check-request", "--repo", str(repo), model, str(tmp_path / "req.npz"))
        assert result.exit_code == 2, (model, result.output)
        assert "valid" not in result.stdout, result.output
        with pytest.raises(GenRepoError, match=r"outside|'\.\.' component|absolute|must stay inside"):
            ModelContract.from_repository(repo, model)
    (repo / "inside" / "1" / "gen_repo").symlink_to(tmp_path / "elsewhere")  # a contract.json through a link
    with pytest.raises(GenRepoError, match="outside"):
        ModelContract.from_repository(repo, "inside")


# ---- property: hostile paths in every place a manifest takes one ------------------------------------------------
HOSTILE = st.one_of(
    st.sampled_from([
        "..", "../x", "specs/../../x", "/etc/passwd", "/", "", ".", "./", "x\x00y", "specs/mlp.graphspec.json\n",
        "a" * 5000, "名前/../../x", "\u202e/../x", "link_out/mlp.graphspec.json", "link_out", "specs/../specs",
        "specs/mlp.graphspec.json", "samples.npz", "model.onnx", "sub/dir", "$$TRITON_MODEL_DIRECTORY/../x",
        "$$TRITON_MODEL_DIRECTORY/env.tar.gz", "C:\\x", "..\\..\\x", "~/x", "x/" * 300,
    ]),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=40),
    st.lists(st.sampled_from(["..", ".", "x", "specs", "link_out", "", "名"]), min_size=1, max_size=6).map("/".join),
)
#: (what the manifest holds at a place, given a path) -> (manifest document changes, pointer, kind)
PLACES: dict[str, Any] = {
    "spec": (lambda p: {"models": [{"name": "mlp", "spec": p, "target": "python"}]}, "/models/0/spec", "read"),
    "spec-file": (lambda p: {"models": [{"name": "mlp", "spec": {"file": p}, "target": "python"}]},
                  "/models/0/spec/file", "read"),
    "source-onnx": (lambda p: {"models": [{"name": "mlp", "spec": "specs/mlp.graphspec.json", "target": "python",
                                           "source": {"onnx": p}}]}, "/models/0/source/onnx", "read"),
    "source-pt2": (lambda p: {"models": [{"name": "mlp", "spec": "specs/mlp.graphspec.json", "target": "python",
                                          "source": {"pt2": p}}]}, "/models/0/source/pt2", "read"),
    "samples": (lambda p: {"models": [{"name": "mlp", "spec": "specs/mlp.graphspec.json", "target": "python",
                                       "samples": p}]}, "/models/0/samples", "read"),
    "samples-file": (lambda p: {"models": [{"name": "mlp", "spec": "specs/mlp.graphspec.json", "target": "python",
                                            "samples": {"file": p}}]}, "/models/0/samples/file", "read"),
    "code_path": (lambda p: {"code_path": [p]}, "/code_path/0", "read"),
    "output": (lambda p: {"output": p}, "/output", "output"),
}
CONFIG_PLACES = {
    "default_model_filename": lambda p: f"default_model_filename: {_quoted(p)}",
    "cc_model_filenames": lambda p: f'cc_model_filenames {{ key: "8.6" value: {_quoted(p)} }}',
    "warmup input_data_file": lambda p: (
        f'model_warmup {{ name: "w" batch_size: 1 inputs {{ key: "input_x" value {{ data_type: TYPE_FP32 dims: 16 '
        f'input_data_file: {_quoted(p)} }} }} }}'),
    "runtime": lambda p: f"runtime: {_quoted(p)}",
    "EXECUTION_ENV_PATH": lambda p: (
        f'parameters {{ key: "EXECUTION_ENV_PATH" value {{ string_value: {_quoted(p)} }} }}'),
}


def _quoted(value: str) -> str:
    """``value`` as a pbtxt string literal (text_format's own escaping)."""
    return '"' + text_encoding.CEscape(value.encode("utf-8"), as_utf8=True) + '"'


@pytest.fixture(scope="module")
def hostile_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A manifest folder with the example specs, a sample and a model file, and a symlink leading outside it."""
    root = tmp_path_factory.mktemp("hostile")
    project = root / "project"
    shutil.copytree(SPECS, project / "specs")
    shutil.copytree(SPECS, root / "outside")
    (project / "link_out").symlink_to(root / "outside")
    (project / "sub" / "dir").mkdir(parents=True)
    np.savez(project / "samples.npz", input_x=np.zeros((1, 16), dtype=np.float32))
    (project / "model.onnx").write_bytes(b"not really onnx")
    return project


def _load(project: Path, document: dict[str, Any]) -> tuple[Any, list[Any]]:
    """Load and plan a manifest written into ``project``; (plan, []) or (None, problems)."""
    document = {"models": [{"name": "mlp", "spec": "specs/mlp.graphspec.json", "target": "python"}], **document}
    fd, name = tempfile.mkstemp(suffix=".json", dir=project)
    with os.fdopen(fd, "w") as stream:
        json.dump(document, stream)
    try:
        return plan_repository(load_manifest(name)), []
    except GenRepoError as error:
        return None, error.problems
    finally:
        os.unlink(name)


def _inside(folder: Path, path: Path) -> bool:
    real = os.path.realpath(path)
    return real == str(folder) or real.startswith(str(folder) + os.sep)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(place=st.sampled_from(sorted(PLACES)), path=HOSTILE)
def test_hostile_manifest_paths_are_refused_where_given_or_stay_inside(hostile_project: Path, place: str,
                                                                       path: str) -> None:
    make, pointer, kind = PLACES[place]
    plan, problems = _load(hostile_project, make(path))
    if plan is None:  # at the place, or at the option that holds it (a schema's oneOf fails at {file: ...} itself)
        assert any(p.pointer.startswith(pointer) or (pointer.startswith(p.pointer + "/") and p.pointer.count("/") >= 3)
                   for p in problems), (place, path, problems)
        return
    base = hostile_project.resolve()
    if kind == "output":
        out = os.path.realpath(plan.output_dir)
        assert _inside(base, Path(out)) and out != str(base), (path, out)
        assert not any(_inside(Path(out), m.spec_file) for m in plan.models)
    elif place == "code_path":
        assert all(_inside(base, folder) for folder in plan.code_path), (path, plan.code_path)
    else:
        (model,) = plan.models
        used = {"spec": model.spec_file, "source": model.source and model.source.path,
                "samples": model.samples and model.samples.path}[place.split("-")[0]]
        assert used is not None and _inside(base, used), (place, path, used)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(place=st.sampled_from(sorted(CONFIG_PLACES)), path=HOSTILE)
def test_hostile_config_paths_are_refused_at_the_fragment_or_stay_in_the_model_folder(
        hostile_project: Path, place: str, path: str) -> None:
    plan, problems = _load(hostile_project, {"models": [{"name": "mlp", "spec": "specs/mlp.graphspec.json",
                                                         "target": "python", "pbtxt": CONFIG_PLACES[place](path)}]})
    if plan is None:
        assert any(p.pointer == "/models/0/pbtxt" for p in problems), (place, path, problems)
        return
    (model,) = plan.models
    config = model.config
    value = {"default_model_filename": config.default_model_filename,
             "cc_model_filenames": config.cc_model_filenames.get("8.6", ""),
             "warmup input_data_file": config.model_warmup[0].inputs["input_x"].input_data_file
             if config.model_warmup else "",
             "runtime": config.runtime,
             "EXECUTION_ENV_PATH": config.parameters["EXECUTION_ENV_PATH"].string_value
             .removeprefix("$$TRITON_MODEL_DIRECTORY/")}[place]
    # An independent oracle: joined to a folder the way the server joins it, the value stays inside it.
    assert "\x00" not in value and "\n" not in value
    if value == "":
        return  # not set: the backend's default file name
    if place == "runtime":
        assert "/" not in value and value not in (".", "..")
    else:
        joined = os.path.normpath(os.path.join("/model/1", value))
        assert joined.startswith("/model/1/"), (place, path, value)
    assert relative_path_problem(value) is None or place == "runtime"
