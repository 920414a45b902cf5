"""Untrusted names and paths, size limits, no writes outside the output and cache folders, determinism (issue 7).

The build tests run a real ``gen-repo build`` (examples/gen-repo.yaml, python target, the examples' torch factories)
in a subprocess with HOME, TMPDIR, XDG_CACHE_HOME and GEN_REPO_CACHE pointed into the test's folder, and compare
the file system before and after. Two builds of the same project copied to different paths must give identical
configs, lock files and ONNX files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from generator.cli import main as cli
from generator.errors import GenRepoError
from generator.manifest.loading import load_manifest
from generator.naming import MAX_MODEL_NAME_LENGTH
from generator.planning.model_files import config_files
from generator.planning.plan import plan_repository
from generator.repository.lock import LOCK_FILE_NAME, OUTPUT_MARKER, build_lock
from generator.repository.staging import RepositoryWriter
from generator.specs.documents import MAX_DOCUMENT_BYTES, MAX_NESTING, MAX_YAML_ALIASES, load_document
from generator.specs.schema import load_graphspecs
from tests.strategies import alias_bomb

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
SPECS = EXAMPLES / "specs"


# --------------------------------------------------------------------------------------------------------------------
# Helpers shared with tests/test_faults.py
# --------------------------------------------------------------------------------------------------------------------
def copy_project(target: Path) -> Path:
    """A copy of ``examples/`` (manifest, specs, models.py; no __pycache__) as ``target/examples``; returns target."""
    shutil.copytree(EXAMPLES, target / "examples", ignore=shutil.ignore_patterns("__pycache__", "model_repository"))
    return target


def isolated_env(root: Path, project: Path) -> dict[str, str]:
    """Environment for a gen-repo subprocess whose every default location lies under ``root`` (created empty)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "GEN_REPO_CACHE_SECRET")}
    places = {"HOME": root / "home", "TMPDIR": root / "tmp", "XDG_CACHE_HOME": root / "xdg-cache",
              "GEN_REPO_CACHE": root / "env-cache", "XDG_CONFIG_HOME": root / "config"}
    for name, path in places.items():
        path.mkdir(parents=True, exist_ok=True)
        env[name] = str(path)
    env["PYTHONPATH"] = str(project)  # examples.models is imported from the copy (with --allow-code)
    env["COLUMNS"] = "200"
    return env


def gen_repo(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the real ``gen-repo`` console script's module in a subprocess."""
    command = [sys.executable, "-c", "from generator.cli import main; main()", *args]
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


def tree_state(root: Path) -> dict[str, Any]:
    """Every entry under ``root`` (not following symlinks): relative path -> sha256 (files), "dir", or link target."""
    state: dict[str, Any] = {}
    if not root.exists():
        return state
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                state[rel] = "link:" + os.readlink(path)
            elif path.is_dir():
                state[rel] = "dir"
            else:
                state[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


def inside(rel: str, folders: list[str]) -> bool:
    return any(rel == f or rel.startswith(f + "/") for f in folders)


# --------------------------------------------------------------------------------------------------------------------
# Untrusted model names
# --------------------------------------------------------------------------------------------------------------------
BAD_MODEL_NAMES = ["a/b", "a\\b", "..", ".", "../escape", ".hidden", "x" * (MAX_MODEL_NAME_LENGTH + 1), "a\x00b",
                   "/abs", "sp ace", "née"]


def _manifest(folder: Path, models: list[dict[str, Any]], **top: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(SPECS, folder / "specs", dirs_exist_ok=True)
    path = folder / "gen-repo.json"  # JSON: a NUL byte cannot be written in YAML
    path.write_text(json.dumps({"models": models, **top}), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", BAD_MODEL_NAMES, ids=repr)
def test_unsafe_model_name_is_refused_by_the_manifest(tmp_path: Path, name: str) -> None:
    path = _manifest(tmp_path, [{"name": name, "spec": "specs/mlp.graphspec.json"}])
    with pytest.raises(GenRepoError) as caught:
        plan_repository(load_manifest(path))
    assert any(p.pointer == "/models/0/name" for p in caught.value.problems), caught.value.problems
    assert not (tmp_path / "model_repository").exists()


@pytest.mark.parametrize("name", BAD_MODEL_NAMES, ids=repr)
def test_unsafe_model_name_is_refused_by_the_writer(tmp_path: Path, name: str) -> None:
    """Defence in depth: RepositoryWriter refuses the name even if a caller skipped the manifest checks."""
    before = tree_state(tmp_path)
    with pytest.raises(GenRepoError), RepositoryWriter(tmp_path / "repo") as writer:
        writer.model_dir(name, 1)
    assert tree_state(tmp_path) == before  # staging removed, nothing created anywhere


def test_names_differing_only_by_case_are_refused(tmp_path: Path) -> None:
    path = _manifest(tmp_path, [{"name": "mlp", "spec": "specs/mlp.graphspec.json"},
                                {"name": "MLP", "spec": "specs/mlp.graphspec.json"}])
    with pytest.raises(GenRepoError) as caught:
        load_manifest(path)
    assert [p.pointer for p in caught.value.problems] == ["/models/1/name"]
    assert "case" in caught.value.problems[0].message
    with pytest.raises(GenRepoError, match="case"), RepositoryWriter(tmp_path / "repo") as writer:
        writer.model_dir("mlp", 1)
        writer.model_dir("MLP", 1)
    assert not (tmp_path / "repo").exists()


def test_longest_allowed_name_and_default_names_stay_inside(tmp_path: Path) -> None:
    """A 128-character name is fine; names derived from graph names are sanitised (no separators, no leading dot)."""
    spec = json.loads((SPECS / "mlp.graphspec.json").read_text(encoding="utf-8"))
    spec["graph"]["name"] = "../../.evil/\\name\x00"
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "evil.graphspec.json").write_text(json.dumps(spec), encoding="utf-8")
    path = _manifest(tmp_path, [{"name": "m" * MAX_MODEL_NAME_LENGTH, "spec": "specs/mlp.graphspec.json"},
                                {"spec": "specs/evil.graphspec.json"}], output="out")
    plan = plan_repository(load_manifest(path))
    derived = plan.models[1].name
    assert "/" not in derived and "\\" not in derived and "\x00" not in derived and not derived.startswith(".")
    _write_configs(plan, tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        [LOCK_FILE_NAME, OUTPUT_MARKER, derived, "m" * 128])


def _write_configs(plan: Any, destination: Path) -> None:
    """What ``gen-repo config`` does, through the same writer: configs and contracts, swapped in atomically."""
    with RepositoryWriter(destination) as writer:
        for model in plan.models:
            writer.model_dir(model.name, model.version)
        for rel, text in config_files(plan).items():
            target = writer.root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        writer.commit(build_lock(writer.root, {"gen-repo": "test"}, {m.name: {} for m in plan.models}))


# --------------------------------------------------------------------------------------------------------------------
# Untrusted tensor paths
# --------------------------------------------------------------------------------------------------------------------
EVIL_PATHS = ["../../etc/passwd", "a/b", "a\\b", "\x00x", ".hidden", "x" * 5000, "..", "名前"]


def test_tensor_paths_become_safe_tensor_names_never_paths(tmp_path: Path) -> None:
    """Semantic paths with separators, dots, NUL or unicode are sanitised into ``[A-Za-z0-9_]`` names.

    The names end up in config.pbtxt only; the files written are ``<model>/config.pbtxt`` and the contract, inside
    the output folder, whatever the paths say.
    """
    spec = json.loads((SPECS / "mlp.graphspec.json").read_text(encoding="utf-8"))
    template = spec["graph"]["input_spec"]["tensor_data"][0]
    spec["graph"]["input_spec"]["tensor_data"] = []
    parameters = []
    for index, evil in enumerate(EVIL_PATHS):
        tensor = dict(template, semantic_path=[f"p{index}", evil], access_path=f"p{index}[{evil!r}]")
        spec["graph"]["input_spec"]["tensor_data"].append(tensor)
        parameters.append({"name": f"p{index}", "kind": "POSITIONAL_OR_KEYWORD", "has_default": False})
    spec["graph"]["forward_signature"] = {"parameters": parameters}
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "evil.graphspec.json").write_text(json.dumps(spec), encoding="utf-8")
    path = _manifest(tmp_path, [{"name": "evil", "spec": "specs/evil.graphspec.json", "target": "onnx"}],
                     output="out")
    plan = plan_repository(load_manifest(path))
    names = [t.name for t in plan.models[0].inputs]
    assert len(set(names)) == len(EVIL_PATHS)
    for name in names:
        assert name.replace("_", "a").isascii() and name.replace("_", "a").isalnum(), name
    before = tree_state(tmp_path)
    _write_configs(plan, tmp_path / "out")
    created = set(tree_state(tmp_path)) - set(before)
    assert created and all(inside(rel, ["out"]) for rel in created), sorted(created)
    assert set(tree_state(tmp_path / "out")) == {
        LOCK_FILE_NAME, OUTPUT_MARKER, "evil", "evil/config.pbtxt", "evil/1", "evil/1/gen_repo",
        "evil/1/gen_repo/contract.json",
    }


@pytest.mark.parametrize("override", ["../x", "a/b", "a\\b", "\x00", ".x", "x" * 300])
def test_tensor_name_overrides_must_be_plain_names(tmp_path: Path, override: str) -> None:
    path = _manifest(tmp_path, [{"name": "m", "spec": "specs/mlp.graphspec.json",
                                 "tensor_names": {"input_x": override}}])
    with pytest.raises(GenRepoError) as caught:
        load_manifest(path)
    assert caught.value.problems[0].pointer == "/models/0/tensor_names/input_x"


# --------------------------------------------------------------------------------------------------------------------
# Manifest paths leaving the manifest's folder
# --------------------------------------------------------------------------------------------------------------------
@pytest.fixture
def outside_layout(tmp_path: Path) -> tuple[Path, Path]:
    """``tmp/project/`` (manifest folder) and ``tmp/elsewhere/outside.graphspec.json``."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copytree(SPECS, project / "specs")
    (tmp_path / "elsewhere").mkdir()
    shutil.copy(SPECS / "mlp.graphspec.json", tmp_path / "elsewhere" / "outside.graphspec.json")
    os.symlink(tmp_path / "elsewhere" / "outside.graphspec.json", project / "specs" / "link.graphspec.json")
    os.symlink(tmp_path / "elsewhere", project / "linkdir")
    return project, tmp_path / "elsewhere"


ESCAPES = [
    ({"spec": "../elsewhere/outside.graphspec.json"}, "/models/0/spec"),
    ({"spec": "specs/../../elsewhere/outside.graphspec.json"}, "/models/0/spec"),
    ({"spec": "specs/link.graphspec.json"}, "/models/0/spec"),
    ({"spec": {"file": "linkdir/outside.graphspec.json"}}, "/models/0/spec/file"),
    ({"spec": "specs/mlp.graphspec.json", "source": {"onnx": "../elsewhere/outside.graphspec.json"}},
     "/models/0/source/onnx"),
    ({"spec": "ABSOLUTE"}, "/models/0/spec"),
]


@pytest.mark.parametrize(("model", "pointer"), ESCAPES, ids=lambda v: json.dumps(v) if isinstance(v, dict) else v)
def test_paths_leaving_the_manifest_folder_need_allow_outside(
    outside_layout: tuple[Path, Path], model: dict[str, Any], pointer: str
) -> None:
    project, elsewhere = outside_layout
    if model["spec"] == "ABSOLUTE":
        model = {"spec": str(elsewhere / "outside.graphspec.json")}
    path = project / "gen-repo.yaml"
    path.write_text(yaml.safe_dump({"models": [{"name": "m", **model}]}), encoding="utf-8")
    with pytest.raises(GenRepoError) as caught:
        load_manifest(path)
    problem = next(p for p in caught.value.problems if p.pointer == pointer)
    assert "outside the manifest's folder" in problem.message and "--allow-outside" in problem.message
    result = CliRunner().invoke(cli, ["plan", str(path)])
    assert result.exit_code == 2 and "--allow-outside" in result.output and "Traceback" not in result.output
    if "source" not in model:  # an ONNX source that is really a JSON file fails later, at build time
        assert load_manifest(path, allow_outside=True).models[0].name == "m"
        assert CliRunner().invoke(cli, ["plan", str(path), "--allow-outside"]).exit_code == 0


@pytest.mark.parametrize("output", ["../out", "/tmp/gen-repo-escape-test", "linkdir/out"])
def test_output_leaving_the_manifest_folder_needs_allow_outside(outside_layout: tuple[Path, Path], output: str) -> None:
    project, _ = outside_layout
    path = project / "gen-repo.yaml"
    path.write_text(yaml.safe_dump({"output": output, "models": [{"spec": "specs/mlp.graphspec.json"}]}),
                    encoding="utf-8")
    with pytest.raises(GenRepoError) as caught:
        load_manifest(path)
    assert [p.pointer for p in caught.value.problems] == ["/output"]
    assert load_manifest(path, allow_outside=True).output_dir.is_absolute()


# --------------------------------------------------------------------------------------------------------------------
# Size limits
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_oversized_documents_are_refused_before_parsing(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"big{suffix}"
    with open(path, "wb") as stream:  # sparse: the size check must come before reading
        stream.truncate(MAX_DOCUMENT_BYTES + 1)
    with pytest.raises(GenRepoError) as caught:
        load_graphspecs(path)
    assert f"at most {MAX_DOCUMENT_BYTES}" in caught.value.problems[0].message
    manifest = tmp_path / f"gen-repo{suffix}"
    os.link(path, manifest)
    result = CliRunner().invoke(cli, ["plan", str(manifest)])
    assert result.exit_code == 2 and "bytes; at most" in result.output


def test_yaml_alias_bomb_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb(), encoding="utf-8")  # 9**11 strings if expanded
    with pytest.raises(GenRepoError) as caught:
        load_document(path)
    assert "alias bomb" in caught.value.problems[0].message
    manifest = tmp_path / "gen-repo.yaml"
    manifest.write_text(alias_bomb().replace("graph:", "models:"), encoding="utf-8")
    result = CliRunner().invoke(cli, ["plan", str(manifest)])
    assert result.exit_code == 2 and "alias" in result.output


def test_many_yaml_aliases_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "many.yaml"
    path.write_text("a: &x 1\nb: [" + ", ".join(["*x"] * (MAX_YAML_ALIASES + 1)) + "]\n", encoding="utf-8")
    with pytest.raises(GenRepoError, match="alias"):
        load_document(path)


def test_a_few_yaml_aliases_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text("a: &x [1, 2]\nb: *x\nc: *x\n", encoding="utf-8")
    assert load_document(path) == {"a": [1, 2], "b": [1, 2], "c": [1, 2]}


@pytest.mark.parametrize(("text", "message"), [
    ("[" * 100_000 + "]" * 100_000, f"nests deeper than {MAX_NESTING} levels"),
    ("[" * (MAX_NESTING + 2) + "]" * (MAX_NESTING + 2), f"nests deeper than {MAX_NESTING} levels"),
    ('{"graph": NaN}', "NaN"),
    ("\x80\x04\x95pickle", "never unpickles"),
    ("PK\x03\x04zip", "never unpickles"),
])
def test_hostile_documents_are_refused_with_a_clear_message(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "spec.json"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(GenRepoError) as caught:
        load_graphspecs(path)
    assert message in caught.value.problems[0].message


_NESTED_JSON = st.recursive(
    st.none() | st.integers() | st.text(alphabet='[]{}"\\ab'),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\ab', max_size=3), inner,
                                                                max_size=3),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(_NESTED_JSON, st.integers(min_value=0, max_value=12))
def test_the_cheap_json_nesting_test_never_misses_a_deep_value(value: object, limit: int) -> None:
    """The text test only decides when the value must be walked: every value nested too deep is walked (brackets
    inside strings must not fool it), and a text with few brackets never is."""
    from generator.json_reader import may_nest_deeper as _json_may_nest_deeper
    from generator.specs.documents import _depth

    raw = json.dumps(value).encode()
    if _depth(json.loads(raw), limit):
        assert _json_may_nest_deeper(raw, limit)
    if raw.count(b"[") + raw.count(b"{") <= limit:
        assert not _json_may_nest_deeper(raw, limit)


@pytest.mark.parametrize("levels", [MAX_NESTING, MAX_NESTING + 1])
def test_json_at_the_nesting_limit_loads_and_one_level_more_is_refused(tmp_path: Path, levels: int) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * levels + "1" + "]" * levels, encoding="utf-8")
    if levels <= MAX_NESTING:
        assert load_document(path) is not None
    else:
        with pytest.raises(GenRepoError, match="nests deeper"):
            load_document(path)


def test_yaml_python_tags_are_never_constructed(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    path = tmp_path / "gen-repo.yaml"
    path.write_text(f"models: !!python/object/apply:os.system ['touch {marker}']\n", encoding="utf-8")
    with pytest.raises(GenRepoError, match="invalid YAML"):
        load_manifest(path)
    assert not marker.exists()


def test_factories_are_never_imported_without_allow_code(tmp_path: Path) -> None:
    """plan never imports a factory; build refuses to without --allow-code (the module would leave a marker)."""
    project = copy_project(tmp_path / "project")
    marker = tmp_path / "imported"
    (project / "examples" / "evil.py").write_text(f"open({str(marker)!r}, 'w').close()\n", encoding="utf-8")
    (project / "examples" / "evil.yaml").write_text(
        "models: [{name: m, spec: specs/mlp.graphspec.json, source: {factory: 'examples.evil:make'}}]\n",
        encoding="utf-8")
    env = isolated_env(tmp_path, project)
    planned = gen_repo(["plan", "examples/evil.yaml"], env, project, timeout=300)
    assert planned.returncode == 0, planned.stderr[-2000:]
    built = gen_repo(["build", "examples/evil.yaml", "-o", str(tmp_path / "out"), "--cache-dir",
                      str(tmp_path / "cache"), "--target", "onnx"], env, project, timeout=300)
    assert built.returncode in (1, 2), built.stderr[-2000:]
    assert "--allow-code" in built.stderr and "Traceback" not in built.stderr
    assert not marker.exists(), "the factory module was imported without --allow-code"
    assert not (tmp_path / "out").exists()


def _spec_with_input_shape(shape: list[int]) -> dict[str, Any]:
    spec = json.loads((SPECS / "mlp.graphspec.json").read_text(encoding="utf-8"))
    tensor = spec["graph"]["input_spec"]["tensor_data"][0]
    tensor["shape"] = ["batch0", *shape]
    tensor["min_shape"] = [1, *shape]
    tensor["max_shape"] = [tensor["max_shape"][0], *shape]
    return spec


def test_dims_whose_product_overflows_int64_are_refused_by_plan(tmp_path: Path) -> None:
    """Each dim fits int32 but their product (x 4 bytes) does not fit int64: found by this suite; plan refuses it."""
    big = 2**31 - 1
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "huge.graphspec.json").write_text(json.dumps(_spec_with_input_shape([big, big, big])))
    path = _manifest(tmp_path, [{"name": "huge", "spec": "specs/huge.graphspec.json"}])
    assert load_graphspecs(tmp_path / "specs" / "huge.graphspec.json")  # each dim alone is valid
    with pytest.raises(GenRepoError) as caught:
        plan_repository(load_manifest(path))
    problem = caught.value.problems[0]
    assert problem.pointer == "/graph/input_spec/tensor_data/0"
    assert "int64" in problem.message and "too many elements" in problem.message
    result = CliRunner().invoke(cli, ["plan", str(path)])
    assert result.exit_code == 2 and "int64" in result.output


def test_a_dim_over_int32_is_refused_by_validate(tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(_spec_with_input_shape([2**31])), encoding="utf-8")
    with pytest.raises(GenRepoError) as caught:
        load_graphspecs(path)
    assert any("/input_spec/tensor_data/0/" in p.pointer for p in caught.value.problems), caught.value.problems


def test_large_but_representable_product_is_planned(tmp_path: Path) -> None:
    """The int64 check is not a size policy: 2**33 elements (over int32) still plan."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "big.graphspec.json").write_text(json.dumps(_spec_with_input_shape([2**16, 2**17])))
    path = _manifest(tmp_path, [{"name": "big", "spec": "specs/big.graphspec.json"}])
    assert plan_repository(load_manifest(path)).models[0].inputs[0].dims == (2**16, 2**17)


# --------------------------------------------------------------------------------------------------------------------
# A real build: nothing written outside the output and cache folders; two paths, identical outputs
# --------------------------------------------------------------------------------------------------------------------
class Build:
    """One real ``gen-repo build`` of a private copy of the examples, with the file system compared around it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.project = copy_project(root / "project")
        self.env = isolated_env(root, self.project)
        self.output = self.project / "out" / "repo"
        self.cache = root / "cache"
        self.before = tree_state(root)
        self.parent_before = sorted(os.listdir(root.parent))
        self.result = gen_repo(["build", "examples/gen-repo.yaml", "--target", "python", "--allow-code", "-o",
                                str(self.output), "--cache-dir", str(self.cache)], self.env, self.project)
        self.after = tree_state(root)
        self.parent_after = sorted(os.listdir(root.parent))


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Build, Build]:
    base = tmp_path_factory.mktemp("builds")
    first = Build(base / "a")
    second = Build(base / "b" / "deeper" / "path")
    for build in (first, second):
        assert build.result.returncode == 0, build.result.stderr[-3000:]
    return first, second


@pytest.mark.slow
def test_build_writes_only_into_output_and_cache(builds: tuple[Build, Build]) -> None:
    build = builds[0]
    changed = {rel for rel in set(build.before) | set(build.after) if build.before.get(rel) != build.after.get(rel)}
    allowed = ["project/out", "cache", "config/gen-repo"]  # and, once per user, the cache's signing secret
    outside = sorted(rel for rel in changed if not inside(rel, allowed) and rel != "project/out")
    assert outside == [], f"written outside the output and cache folders: {outside}"
    secret = build.root / "config" / "gen-repo" / "cache-secret"
    assert sorted(os.listdir(secret.parent)) == ["cache-secret"] and secret.stat().st_mode & 0o777 == 0o600
    assert any(inside(rel, ["project/out/repo"]) for rel in changed)
    assert any(inside(rel, ["cache"]) for rel in changed)
    for empty in ("tmp", "home", "xdg-cache", "env-cache"):
        assert os.listdir(build.root / empty) == [], f"{empty} was written to: {os.listdir(build.root / empty)}"
    assert build.parent_before == build.parent_after
    # The project itself (manifest, specs, models.py) is untouched: no __pycache__ beside the factory.
    assert not (build.project / "examples" / "__pycache__").exists()
    # Nothing left over beside the repository (staging, aside) or in the cache root but cache entries.
    assert sorted(os.listdir(build.output.parent)) == ["repo"]
    assert all(not name.startswith(".") for name in os.listdir(build.cache)), os.listdir(build.cache)


@pytest.mark.slow
def test_builds_on_different_paths_are_identical(builds: tuple[Build, Build]) -> None:
    first, second = builds
    files_a, files_b = tree_state(first.output), tree_state(second.output)
    assert sorted(files_a) == sorted(files_b)
    different = sorted(rel for rel in files_a if files_a[rel] != files_b[rel])
    assert different == [], f"differ between the two builds: {different}"
    onnx = [rel for rel in files_a if rel.endswith("model.onnx")]
    assert sorted(onnx) == ["mlp/1/model.onnx", "text/1/model.onnx"]


@pytest.mark.slow
def test_lock_file_has_no_absolute_paths(builds: tuple[Build, Build]) -> None:
    for build in builds:
        text = (build.output / LOCK_FILE_NAME).read_text(encoding="utf-8")
        for path in (build.root, build.project, build.cache, Path(build.env["HOME"]), REPO, Path(sys.prefix)):
            assert str(path) not in text, f"{path} in the lock file"
        lock = json.loads(text)
        assert set(lock["models"]) == {"mlp", "text"}
        for rel in lock["artifacts"]:
            assert not rel.startswith("/") and ".." not in rel.split("/")
        for name in ("mlp/1/model.onnx", "text/1/model.onnx"):  # torch's stack traces carry the exporting paths
            data = (build.output / name).read_bytes()
            assert str(build.project).encode() not in data and str(REPO).encode() not in data
