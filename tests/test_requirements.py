"""The skip registry (tests/requirements.py) and the strict-skip guard in tests/conftest.py, run for real.

A strict run (``GEN_REPO_STRICT_SKIPS=1``, as ``.ci/run`` sets it) where a requirement CI installs is missing must go
red; GPU-only skips stay allowed and are counted in the terminal summary.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.requirements import REQUIREMENTS

ROOT = Path(__file__).resolve().parent.parent
# Written in pieces so this file does not match itself.
_BYPASS = re.compile(r"pytest\.(skip\(|importorskip\(|mark\.skip(if)?\b)|" + "import" + r"orskip\(")


def _pytest(tmp_path: Path, *args: str, strict: bool, shadow: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run pytest on the node ids in a child; ``shadow``: that module fails to import (a simulated uninstall)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GEN_REPO_STRICT_SKIPS", "PYTEST_ADDOPTS")}
    if strict:
        env["GEN_REPO_STRICT_SKIPS"] = "1"
    if shadow is not None:
        package = tmp_path / "shadow" / shadow
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text(f"raise ModuleNotFoundError('simulated: {shadow} is not installed')\n")
        env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "shadow"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False, timeout=300)


def test_no_skip_bypasses_the_registry() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if path.name != "requirements.py" and "lint_corpus" not in path.parts
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _BYPASS.search(line)
    ]
    assert offenders == [], "skip through tests/requirements.py (missing/require/@pytest.mark.requires)"


def test_only_gpu_and_workplace_requirements_may_skip_in_ci() -> None:
    allowed = sorted(name for name, r in REQUIREMENTS.items() if not r.ci_has)
    assert allowed == ["gpu_ampere", "gpu_two_capabilities", "shared_fixtures", "tensorrt_gpu",
                       "triton_tensorrt_backend"]


def test_strict_run_goes_red_when_tensorrt_rtx_is_missing(tmp_path: Path) -> None:
    node = "tests/test_gpu.py::test_import_tensorrt_finds_tensorrt_rtx_and_its_builder_api"
    relaxed = _pytest(tmp_path, node, strict=False, shadow="tensorrt_rtx")
    assert relaxed.returncode == 0 and "1 skipped" in relaxed.stdout, relaxed.stdout
    assert "[requires tensorrt_rtx] tensorrt_rtx cannot be imported" in relaxed.stdout
    strict = _pytest(tmp_path, node, strict=True)  # tensorrt_rtx installed: the test runs and passes
    assert strict.returncode == 0 and "1 passed" in strict.stdout, strict.stdout
    red = _pytest(tmp_path, node, strict=True, shadow="tensorrt_rtx")
    assert red.returncode == 1, red.stdout
    assert "GEN_REPO_STRICT_SKIPS=1: skipped for tensorrt_rtx, which CI installs or has" in red.stdout
    assert "simulated: tensorrt_rtx is not installed" in red.stdout


def test_strict_run_allows_and_counts_gpu_skips_and_fails_an_unrouted_skip(tmp_path: Path) -> None:
    probe = ROOT / "tests" / f"test_zz_strict_probe_{os.getpid()}.py"
    probe.write_text(
        "import pytest\nfrom tests.requirements import missing\n\n\n"
        "def test_gpu():\n    raise missing('tensorrt_gpu', 'no GPU')\n\n\n"
        "def test_ampere():\n    raise missing('gpu_ampere', 'no Ampere GPU')\n\n\n"
        "def test_free_text():\n    pytest." + "skip('some free text')\n"
    )
    try:
        run = _pytest(tmp_path, str(probe.relative_to(ROOT)), strict=True)
    finally:
        probe.unlink()
    assert run.returncode == 1, run.stdout
    assert "1 failed, 2 skipped" in run.stdout, run.stdout
    assert "a skip not routed through tests/requirements.py: Skipped: some free text" in run.stdout
    assert "gpu_ampere: 1 (allowed in CI)" in run.stdout and "tensorrt_gpu: 1 (allowed in CI)" in run.stdout


def test_hypothesis_is_derandomized_in_ci() -> None:
    # CI (GEN_REPO_STRICT_SKIPS=1 or CI=true) runs a fixed seed; bench/fuzz_long.py is the long randomized run.
    from hypothesis import settings

    from tests.test_fuzz import SETTINGS

    ci = os.environ.get("GEN_REPO_STRICT_SKIPS") == "1" or os.environ.get("CI") == "true"
    assert settings.default.derandomize is ci
    assert SETTINGS.derandomize is ci  # the suite's own settings objects inherit the profile


def test_no_test_accepts_any_exception() -> None:
    # A test names the error type (and its message): a case broken for another reason must not pass.
    broad = re.compile(r"raises\(\(?(Base)?Exception\b")
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "tests").glob("*.py")) if path.name != "test_requirements.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if broad.search(line)
    ]
    assert offenders == []
