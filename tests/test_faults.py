"""Faults during build and smoke (issue 7): nothing lost, nothing half-written, nothing hangs.

Build: a real ``gen-repo build`` subprocess is killed (SIGKILL, and SIGINT to its process group as Ctrl-C does)
while it exports and while it stages the repository; the previous repository must stay byte-identical (or, when
the signal landed after the atomic swap, be the complete new one) and the next build must succeed and remove the
stale staging folder. A full disk is a real tmpfs mounted as the output's parent. ``--keep-going`` keeps the
models that built.

Smoke: a real tritonserver (nvidia-pytriton) serving Python-backend models that sleep where we want the fault.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from generator.repository.lock import LOCK_FILE_NAME, OUTPUT_MARKER
from generator.repository.verify import verify_repository
from tests.requirements import missing
from tests.test_safety import copy_project, gen_repo, isolated_env, tree_state

pytestmark = pytest.mark.slow

LEFTOVER = re.compile(r"^\.repo\.(staging|old|trash)-\d+-[0-9a-f]+$")
TEXT_ONLY = """models:
  - name: text
    spec: specs/text.graphspec.json
    source: {factory: "examples.models:make_text"}
"""
WITH_BROKEN = """models:
  - name: mlp
    spec: specs/mlp.graphspec.json
    source: {factory: "examples.models:make_mlp"}
  - name: broken
    spec: specs/mlp.graphspec.json
    source: {factory: "examples.models:no_such_factory"}
  - name: text
    spec: specs/text.graphspec.json
    source: {factory: "examples.models:make_text"}
"""
# The MLP whose forward blocks while torch.onnx.export (either exporter) traces it: the kill test signals a build
# known to be inside the export (the marker file exists), not one a sleep guesses to be there.
GATED_MODEL = """import os
import sys
import time
from pathlib import Path

import torch

from examples.models import make_mlp


class Gated(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = make_mlp()

    def forward(self, x):
        frame = sys._getframe()
        while frame is not None and "torch/onnx/" not in frame.f_code.co_filename:
            frame = frame.f_back
        if frame is not None:
            Path(os.environ["GEN_REPO_TEST_EXPORTING"]).touch()
            time.sleep(600)  # the test kills or interrupts the build here
        return self.inner(x)


def make_gated():
    return Gated()
"""
GATED = """models:
  - name: mlp
    spec: specs/mlp.graphspec.json
    source: {factory: "examples.gated:make_gated"}
"""


class Project:
    """A private copy of the examples with a warm cache for both example models; builds go to ``out/repo``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.project = copy_project(root / "project")
        self.env = isolated_env(root, self.project)
        self.cache = root / "cache"
        self.output = root / "out" / "repo"
        (self.project / "examples" / "text-only.yaml").write_text(TEXT_ONLY, encoding="utf-8")
        (self.project / "examples" / "with-broken.yaml").write_text(WITH_BROKEN, encoding="utf-8")
        (self.project / "examples" / "gated.yaml").write_text(GATED, encoding="utf-8")
        (self.project / "examples" / "gated.py").write_text(GATED_MODEL, encoding="utf-8")

    def args(self, manifest: str = "gen-repo.yaml", output: Path | None = None, cache: Path | None = None,
             *extra: str) -> list[str]:
        return ["build", f"examples/{manifest}", "--target", "python", "--allow-code", "-o",
                str(output or self.output), "--cache-dir", str(cache or self.cache), *extra]

    def build(
        self, manifest: str = "gen-repo.yaml", output: Path | None = None, *extra: str
    ) -> subprocess.CompletedProcess:
        return gen_repo(self.args(manifest, output, None, *extra), self.env, self.project)

    def previous(self) -> dict[str, Any]:
        """Build the text-only repository into ``out/repo`` (from the warm cache) and return its tree."""
        result = self.build("text-only.yaml")
        assert result.returncode == 0, result.stderr[-3000:]
        return tree_state(self.output)

    def start(self, manifest: str = "gen-repo.yaml", cache: Path | None = None,
              env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        command = [sys.executable, "-c", "from generator.cli import main; main()", *self.args(manifest, None, cache)]
        return subprocess.Popen(command, env={**self.env, **(env or {})}, cwd=self.project, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)

    def leftovers(self) -> list[str]:
        return sorted(name for name in os.listdir(self.output.parent) if LEFTOVER.match(name))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    project = Project(tmp_path_factory.mktemp("faults"))
    warm = project.build(output=project.root / "warm" / "repo")  # fills the cache with both models
    assert warm.returncode == 0, warm.stderr[-3000:]
    return project


def _send(process: subprocess.Popen[str], signum: int) -> None:
    """SIGKILL the build; SIGINT its process group, as a terminal's Ctrl-C does."""
    if signum == signal.SIGINT:
        os.killpg(process.pid, signal.SIGINT)
    else:
        process.kill()


def _wait_for(process: subprocess.Popen[str], found: Any, limit: float = 300.0) -> bool:
    """Poll ``found()`` as fast as possible until it is true (True) or the process ended (False)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if found():
            return True
        if process.poll() is not None:
            return False
    raise AssertionError("the build neither reached the point nor ended")


def _finish(process: subprocess.Popen[str]) -> tuple[int, str]:
    _, stderr = process.communicate(timeout=120)
    return process.returncode, stderr


SIGNALS = [pytest.param(signal.SIGKILL, id="SIGKILL"), pytest.param(signal.SIGINT, id="SIGINT")]


# --------------------------------------------------------------------------------------------------------------------
# Killed while exporting
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("signum", SIGNALS)
def test_killed_while_exporting_leaves_previous_repository(project: Project, signum: int) -> None:
    previous = project.previous()
    cold = project.root / f"cold-{signum}"  # an empty cache: the build has to export
    marker = project.root / f"exporting-{signum}"
    process = project.start("gated.yaml", cache=cold, env={"GEN_REPO_TEST_EXPORTING": str(marker)})
    exporting = _wait_for(process, marker.exists)
    assert exporting, "the build ended before it started exporting"
    assert any(n.startswith(".build-") for n in os.listdir(cold))  # inside torch.onnx.export, its scratch in place
    _send(process, signum)
    code, stderr = _finish(process)
    assert code == (130 if signum == signal.SIGINT else -signal.SIGKILL), stderr[-2000:]
    if signum == signal.SIGINT:
        assert "Traceback" not in stderr and "interrupted" in stderr
        # Ctrl-C cleans its own scratch folders in the cache too.
        assert [n for n in os.listdir(cold) if n.startswith(".")] == []
    assert tree_state(project.output) == previous
    assert project.leftovers() == []
    again = project.build()
    assert again.returncode == 0, again.stderr[-3000:]
    assert verify_repository(project.output) == []


# --------------------------------------------------------------------------------------------------------------------
# Killed while staging (the models come from the cache, so the build reaches the writer quickly)
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("signum", SIGNALS)
def test_killed_while_staging_never_leaves_a_partial_repository(project: Project, signum: int) -> None:
    previous = project.previous()
    caught = False
    for _attempt in range(5):  # the staging phase is short: retry until the signal lands inside it
        process = project.start()
        caught = _wait_for(process, lambda: any(LEFTOVER.match(n) for n in os.listdir(project.output.parent)))
        if caught:
            _send(process, signum)
        code, stderr = _finish(process)
        if caught:
            break
        assert code == 0, stderr[-3000:]
        previous = project.previous()
    assert caught, "never saw the staging folder of 5 builds"
    assert "Traceback" not in stderr
    lock = json.loads((project.output / LOCK_FILE_NAME).read_text(encoding="utf-8"))
    if sorted(lock["models"]) == ["text"]:
        assert tree_state(project.output) == previous  # killed before the swap: byte-identical
    else:
        assert sorted(lock["models"]) == ["mlp", "text"]  # after the swap: the complete new repository
    assert verify_repository(project.output) == []
    if signum == signal.SIGINT:
        assert code in (0, 130)  # 0: the signal was deferred until the swap had finished
        assert project.leftovers() == []
    again = project.build()
    assert again.returncode == 0, again.stderr[-3000:]
    assert project.leftovers() == [], "the next build must remove stale staging folders"
    assert verify_repository(project.output) == []


def test_next_build_removes_a_dead_writers_staging_folder(project: Project) -> None:
    """A staging folder left by a SIGKILLed writer (a pid that no longer exists) is removed by the next build."""
    project.previous()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    stale = project.output.parent / f".repo.staging-{dead.stdout.strip()}-0123456789ab"
    (stale / "text" / "1").mkdir(parents=True)
    (stale / "text" / "1" / "model.onnx").write_bytes(b"half")
    result = project.build("text-only.yaml")
    assert result.returncode == 0, result.stderr[-3000:]
    assert not stale.exists()
    assert project.leftovers() == []


# --------------------------------------------------------------------------------------------------------------------
# Full disk
# --------------------------------------------------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs (needs root and mount permission; skipped with the reason otherwise)."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount_point)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        raise missing("root", f"cannot mount a tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _fill(mount_point: Path, leave: int) -> None:
    free = os.statvfs(mount_point).f_bavail * os.statvfs(mount_point).f_frsize
    with open(mount_point / "filler", "wb") as stream:
        stream.write(b"\0" * max(0, free - leave))


def test_full_disk_gives_a_clear_error_and_keeps_the_previous_repository(project: Project, small_disk: Path) -> None:
    output = small_disk / "repo"
    first = project.build("text-only.yaml", output)
    assert first.returncode == 0, first.stderr[-3000:]
    previous = tree_state(output)
    _fill(small_disk, leave=48 * 1024)  # the new repository (~100 KiB) cannot fit
    result = project.build("gen-repo.yaml", output)
    # Exit 2 (documented in docs/guarantees.md): the environment refused the write; 1 means "a model failed".
    assert result.returncode == 2, result.stderr[-3000:]
    assert "no space left on device (ENOSPC)" in result.stderr
    assert "Traceback" not in result.stderr
    assert tree_state(output) == previous
    assert sorted(os.listdir(small_disk)) == ["filler", "repo"]  # staging removed


def test_full_disk_without_a_previous_repository_leaves_nothing(project: Project, small_disk: Path) -> None:
    _fill(small_disk, leave=48 * 1024)
    result = project.build("gen-repo.yaml", small_disk / "repo")
    assert result.returncode == 2, result.stderr[-3000:]
    assert "ENOSPC" in result.stderr and "Traceback" not in result.stderr
    assert sorted(os.listdir(small_disk)) == ["filler"]


# --------------------------------------------------------------------------------------------------------------------
# One failing model
# --------------------------------------------------------------------------------------------------------------------
def test_a_failing_model_without_keep_going_writes_nothing(project: Project) -> None:
    previous = project.previous()
    result = project.build("with-broken.yaml")
    assert result.returncode == 1, result.stderr[-3000:]
    assert "no_such_factory" in result.stderr
    assert tree_state(project.output) == previous
    assert project.leftovers() == []


def test_keep_going_leaves_the_other_models_built(project: Project) -> None:
    project.previous()
    result = project.build("with-broken.yaml", None, "--keep-going", "--json")
    assert result.returncode == 1, result.stderr[-3000:]
    lock = json.loads((project.output / LOCK_FILE_NAME).read_text(encoding="utf-8"))
    assert sorted(lock["models"]) == ["mlp", "text"]
    assert sorted(p.name for p in project.output.iterdir()) == sorted([LOCK_FILE_NAME, OUTPUT_MARKER, "mlp", "text"])
    assert verify_repository(project.output) == []
    assert project.leftovers() == []


# --------------------------------------------------------------------------------------------------------------------
# Smoke against a server that misbehaves
# --------------------------------------------------------------------------------------------------------------------
SLEEPY_CONFIG = """name: "{name}"
backend: "python"
max_batch_size: 0
input [{{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }}]
output [{{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }}]
instance_group [{{ kind: KIND_CPU count: 1 }}]
"""
SLEEPY_MODEL = """import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        time.sleep({init_sleep})

    def execute(self, requests):
        time.sleep({execute_sleep})
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out = pb_utils.Tensor("OUTPUT0", np.asarray(data, dtype=np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
"""


def sleepy_repository(root: Path, models: dict[str, tuple[float, float]]) -> Path:
    """A repository of Python-backend models, each sleeping (initialize, execute) seconds."""
    for name, (init_sleep, execute_sleep) in models.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(SLEEPY_CONFIG.format(name=name), encoding="utf-8")
        (root / name / "1" / "model.py").write_text(
            SLEEPY_MODEL.format(init_sleep=init_sleep, execute_sleep=execute_sleep), encoding="utf-8")
    return root


def smoke(args: list[str], tmp_path: Path, timeout: float = 300) -> tuple[subprocess.CompletedProcess, dict[str, Any]]:
    """Run ``gen-repo smoke`` in a subprocess (``timeout`` only guards against a hang) and read its JSON report."""
    report = tmp_path / "report.json"
    command = [sys.executable, "-c", "from generator.cli import main; main()", "smoke", *args, "--json", str(report)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    return result, (json.loads(report.read_text(encoding="utf-8")) if report.exists() else {})


def results_of(report: dict[str, Any], model: str) -> dict[str, dict[str, Any]]:
    return {r["check"]: r for r in report.get("results", []) if r.get("model") == model}


@pytest.mark.triton
def test_smoke_reports_timeouts_of_a_slow_model(tmp_path: Path, triton_server_factory: Any) -> None:
    repo = sleepy_repository(tmp_path / "repo", {"slow": (0, 8)})
    server = triton_server_factory(repo)
    result, report = smoke(["--url", server.grpc_url, "--repo", str(repo), "--timeout", "2", "--burst", "2",
                            "--concurrency", "1"], tmp_path)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == 1, (result.returncode, result.stdout[-3000:], result.stderr[-3000:])
    checks = results_of(report, "slow")
    assert checks["ready"]["status"] == "passed"
    inference = checks["inference"]
    assert inference["status"] in ("failed", "error")
    assert re.search(r"time(d)? ?out|deadline|no answer within", inference["message"], re.IGNORECASE), inference


@pytest.mark.triton
def test_smoke_reports_a_model_that_never_becomes_ready(tmp_path: Path, triton_server_factory: Any) -> None:
    repo = sleepy_repository(tmp_path / "repo", {"sleepy": (600, 0)})
    result, report = smoke(["--launch", "--repo", str(repo), "--ready-timeout", "5", "--timeout", "2"], tmp_path)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode in (1, 3), (result.returncode, result.stdout[-3000:], result.stderr[-3000:])
    ready = results_of(report, "sleepy")["ready"]
    assert ready["status"] in ("failed", "error")
    assert re.search(r"time(d)? ?out|not ready|within|deadline", ready["message"], re.IGNORECASE), ready


@pytest.mark.triton
def test_smoke_reports_a_server_that_stops_mid_run(tmp_path: Path, triton_server_factory: Any) -> None:
    repo = sleepy_repository(tmp_path / "repo", {"first": (0, 0.5), "second": (0, 0.5)})
    server = triton_server_factory(repo)
    report_file = tmp_path / "report.json"
    command = [sys.executable, "-c", "from generator.cli import main; main()", "smoke", "--url", server.grpc_url,
               "--repo", str(repo), "--timeout", "3", "--burst", "4", "--concurrency", "2", "--json",
               str(report_file)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = threading.Event()
    lines: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if "first" in line:
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert started.wait(120), "smoke never reported its first result"
    os.killpg(os.getpgid(server.pid), signal.SIGKILL) if os.getpgid(server.pid) != os.getpgid(0) else os.kill(
        server.pid, signal.SIGKILL)
    code = process.wait(timeout=300)  # guards a hang only
    reader.join(10)
    stderr = process.stderr.read() if process.stderr else ""
    assert "Traceback" not in stderr, stderr[-3000:]
    assert code in (1, 3), (code, "".join(lines)[-3000:], stderr[-3000:])
    report = json.loads(report_file.read_text(encoding="utf-8"))
    second = results_of(report, "second")
    assert second, report
    assert all(r["status"] in ("error", "skipped", "failed") for r in second.values()), second
    assert any(r["message"] for r in second.values())
