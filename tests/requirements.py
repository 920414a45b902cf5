"""The one registry of what a test may skip for, and whether CI has it.

A test never calls ``pytest.skip`` or ``pytest.importorskip`` itself: it names a requirement here, either as a marker
(``@pytest.mark.requires("jsonschema_rs")``, checked before the test runs) or with :func:`require` / :func:`missing`
in a fixture or test body. Both raise :class:`RequirementSkip`, which carries the requirement, so the strict-skip guard
in ``tests/conftest.py`` decides by requirement, never by matching the reason's text:

* ``ci_has=True``: ``.ci/run`` installs it (``scripts/setup --test``) or the CI machine has it (root, user namespaces,
  no GPU).
  Under ``GEN_REPO_STRICT_SKIPS=1`` such a skip is a failure: a broken install cannot turn tests into quiet skips.
* ``ci_has=False``: needs a GPU (or the workplace's shared folder next to the checkout). Allowed in CI and counted
  in the terminal summary.

Any other skip (a bare ``pytest.skip``, ``skipif``, ``importorskip``) fails under strict mode as "not routed".
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

_REPO_ROOT = Path(__file__).resolve().parent.parent
#: Debian's chromium (scripts/setup --test installs it as root): the browser tests/reports/test_html_page.py views the
#: report in.
CHROMIUM = Path("/usr/bin/chromium")


class RequirementSkip(pytest.skip.Exception):  # type: ignore[name-defined,misc]
    """A skip for a named requirement of :data:`REQUIREMENTS` (what the strict guard reads)."""

    def __init__(self, requirement: Requirement, detail: str) -> None:
        super().__init__(f"[requires {requirement.name}] {detail}", allow_module_level=True)
        self.requirement = requirement


@dataclass(frozen=True)
class Requirement:
    """Something a test needs: how to probe it here, and whether CI has it (then a skip for it fails CI)."""

    name: str
    ci_has: bool
    how: str  # how to get it, shown in the skip reason
    probe: Callable[[], str | None]  # None when present, else a sentence saying what is missing


def _module(name: str) -> Callable[[], str | None]:
    def probe() -> str | None:
        try:
            importlib.import_module(name)
        except Exception as error:
            return f"{name} cannot be imported ({type(error).__name__}: {error})"
        return None

    return probe


def _tritonserver() -> str | None:
    from generator.serving.server import TritonNotFoundError, find_tritonserver

    try:
        find_tritonserver()
    except TritonNotFoundError as error:
        return f"no tritonserver available: {error}"
    return None


def _root() -> str | None:
    if os.geteuid() != 0:
        return "not root (mounting a tmpfs needs root)"
    if shutil.which("mount") is None:
        return "no mount command"
    return None


@cache
def _user_namespaces() -> str | None:
    if shutil.which("unshare") is None or shutil.which("nsenter") is None:
        return "unshare/nsenter (util-linux) are needed for a loopback-only network namespace"
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--net", "true"], capture_output=True, text=True,
                           check=False)
    if probe.returncode != 0:
        return f"cannot create a user + network namespace (unshare --user --net): {probe.stderr.strip()}"
    return None


@cache
def _model_navigator() -> str | None:
    # Imported in a child process only: importing it reroutes all of Python's logging to loguru and sets
    # multiprocessing's start method (tests/planning/test_peer_configs.py runs it the same way).
    import sys

    probe = subprocess.run([sys.executable, "-c", "import model_navigator.triton"], capture_output=True, text=True,
                           check=False)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["(no message)"])[-1]
        return f"model_navigator.triton cannot be imported: {last}"
    return None


def _has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None or any(
        p.name[len("nvidia"):].isdigit() for p in Path("/dev").glob("nvidia*"))


def _tensorrt_gpu() -> str | None:
    from generator.planning.targets import tensorrt_available

    trt, why = tensorrt_available("tensorrt")
    return None if trt is not None else f"needs standard TensorRT and an NVIDIA GPU: {why}"


def _triton_tensorrt_backend() -> str | None:
    from generator.serving.server import TritonNotFoundError, find_tritonserver

    try:
        binary = find_tritonserver()
    except TritonNotFoundError as error:
        return f"no tritonserver available: {error}"
    backends = binary.backend_directory or Path("/opt/tritonserver/backends")
    if not (backends / "tensorrt").is_dir():
        return f"{binary.describe()} has no TensorRT backend ({backends / 'tensorrt'} is missing)"
    return None


def _no_gpu() -> str | None:
    return "this machine has nvidia-smi or /dev/nvidia* nodes; the no-GPU case needs a machine without" if (
        _has_gpu()) else None


def _console_script() -> str | None:
    import sys

    script = Path(sys.executable).parent / "gen-repo"
    return None if script.is_file() else f"the gen-repo console script is not installed ({script})"


def _libyaml() -> str | None:
    import yaml

    return None if yaml.__with_libyaml__ else "PyYAML built without libyaml"


def _upb() -> str | None:
    from google.protobuf.internal import api_implementation

    kind = api_implementation.Type()
    return None if kind == "upb" else f"protobuf's C text encoder is the upb backend's; this one is {kind}"


def _moto_s3() -> str | None:
    missing = [name for name in ("moto", "s3fs") if _module(name)() is not None]
    if shutil.which("moto_server") is None and importlib.util.find_spec("moto") is None:
        missing.append("moto_server")
    return f"{' and '.join(missing)} missing" if missing else None


def _gcs_emulator() -> str | None:
    import sys

    missing = [name for name in ("gcsfs",) if _module(name)() is not None]
    if not (Path(sys.executable).parent / "gcp-storage-emulator").is_file():
        missing.append("gcp-storage-emulator")
    return f"{' and '.join(missing)} missing" if missing else None


def _chromium() -> str | None:
    return None if CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK) else f"no {CHROMIUM} (Debian's chromium package)"


#: tests/node: Node's ajv, pinned by its package-lock.json (scripts/setup --test runs npm ci there when node exists).
NODE_PROJECT = _REPO_ROOT / "tests" / "node"


def _node() -> str | None:
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    return f"{' and '.join(missing)} not on PATH (Node.js is not installed here)" if missing else None


def _ajv() -> str | None:
    if not (NODE_PROJECT / "node_modules" / "ajv" / "package.json").is_file():
        return f"ajv is not installed in {NODE_PROJECT} (npm ci there)"
    return None


def _shared_fixtures() -> str | None:
    shared = _REPO_ROOT.parent / "shared" / "fixtures" / "aitune"
    return None if shared.is_dir() else f"no {shared} next to this checkout"


def _gpu_only(detail: str) -> Callable[[], str | None]:
    """A GPU condition a test checks itself (a second compute capability, an Ampere GPU): never present here."""
    return lambda: None if _has_gpu() else f"no NVIDIA GPU here ({detail})"


_ALL = (
    Requirement("tritonserver", True, "pip install -e '.[serve]' (nvidia-pytriton)", _tritonserver),
    Requirement("tensorrt_rtx", True, "pip install -e '.[trt-rtx]' (tensorrt-rtx-cu13)", _module("tensorrt_rtx")),
    Requirement("torch", True, "pip install -e '.[export]'", _module("torch")),
    Requirement("onnx", True, "pip install -e '.[export]'", _module("onnx")),
    Requirement("onnxruntime", True, "pip install -e '.[export]'", _module("onnxruntime")),
    Requirement("jsonschema_rs", True, "a core dependency: pip install -e .", _module("jsonschema_rs")),
    Requirement("ray", True, "pip install -e '.[ray]'", _module("ray")),
    Requirement("model_navigator", True, "scripts/setup --test: pip install --no-deps triton-model-navigator (the "
                "modules it imports come with the dev extra)", _model_navigator),
    Requirement("moto_s3", True, "pip install -e '.[s3,dev]' (moto[server], s3fs)", _moto_s3),
    Requirement("gcs_emulator", True, "pip install -e '.[all,dev]' (gcp-storage-emulator, gcsfs)", _gcs_emulator),
    Requirement("console_script", True, "pip install -e .", _console_script),
    Requirement("libyaml", True, "PyPI's PyYAML wheels bundle libyaml", _libyaml),
    Requirement("protobuf_upb", True, "PyPI's protobuf wheels use upb", _upb),
    Requirement("chromium", True, "apt-get install chromium (scripts/setup --test does, as root)", _chromium),
    Requirement("node", True, "Node.js (node and npm; the CI machine has them), e.g. Debian's nodejs and npm", _node),
    Requirement("ajv", True, "scripts/setup --test runs npm ci in tests/node wherever node exists", _ajv),
    Requirement("root", True, "run as root (CI does) with mount(8)", _root),
    Requirement("user_namespaces", True, "unprivileged user namespaces and util-linux", _user_namespaces),
    Requirement("no_gpu", True, "a machine without an NVIDIA GPU (CI is one)", _no_gpu),
    Requirement("tensorrt_gpu", False, "standard TensorRT and an NVIDIA GPU", _tensorrt_gpu),
    Requirement("triton_tensorrt_backend", False, "a tritonserver with its TensorRT backend on PATH (NVIDIA's "
                "tritonserver containers; nvidia-pytriton's has the Python backend only)", _triton_tensorrt_backend),
    Requirement("gpu_ampere", False, "an Ampere or newer NVIDIA GPU", _gpu_only("an Ampere or newer GPU")),
    Requirement("gpu_two_capabilities", False, "NVIDIA GPUs of two compute capabilities",
                _gpu_only("GPUs of two compute capabilities")),
    Requirement("shared_fixtures", False, "the workplace's ../shared folder (absent from a clean clone)",
                _shared_fixtures),
)
REQUIREMENTS: dict[str, Requirement] = {r.name: r for r in _ALL}


def missing(name: str, detail: str) -> RequirementSkip:
    """The skip for requirement ``name`` found missing by the caller's own check (``raise missing(...)``)."""
    requirement = REQUIREMENTS[name]
    return RequirementSkip(requirement, f"{detail} ({requirement.how})")


def require(name: str) -> None:
    """Skip (through :class:`RequirementSkip`) unless requirement ``name`` is present here."""
    why = REQUIREMENTS[name].probe()
    if why is not None:
        raise missing(name, why)


def require_module(name: str):  # type: ignore[no-untyped-def]
    """``pytest.importorskip`` through the registry: the imported module, or a skip naming the requirement."""
    require(name)
    return importlib.import_module(name)
