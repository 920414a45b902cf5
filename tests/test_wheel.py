"""The built wheel works on its own: fresh virtual environment, installed console script, packaged schemas."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_output import output_mismatch, quickstart_steps
from tests.requirements import missing

REPO_ROOT = Path(__file__).resolve().parent.parent


def _run(command: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    # A clean environment: nothing may leak the checkout onto the installed package's import path.
    env = {key: value for key, value in os.environ.items() if key not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with gen-repo installed from its wheel (not editable), with its dependencies."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    dist = tmp_path / "dist"
    built = _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(REPO_ROOT)], tmp_path, 600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = dist.glob("gen_repo-*.whl")

    venv = tmp_path / "venv"
    created = _run([sys.executable, "-m", "venv", str(venv)], tmp_path, 300)
    assert created.returncode == 0, created.stderr
    python = venv / "bin" / "python"
    # numpy as in this environment: the Triton extra borrowed by the tour test (nvidia-pytriton) needs numpy < 2,
    # which `pip install 'gen-repo[serve]'` would resolve to as well.
    import numpy

    installed = _run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel),
                      f"numpy=={numpy.__version__}"], tmp_path, 600)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    return venv


def _site_packages(python: Path) -> Path:
    probe = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], Path.cwd(), 60)
    return Path(probe.stdout.strip())


@pytest.mark.slow
def test_wheel_installs_and_validates_outside_the_checkout(tmp_path: Path, wheel_venv: Path) -> None:
    venv = wheel_venv
    python = venv / "bin" / "python"

    work = tmp_path / "elsewhere"
    work.mkdir()
    spec = work / "mlp.graphspec.json"
    spec.write_text((REPO_ROOT / "examples" / "specs" / "mlp.graphspec.json").read_text())
    gen_repo = venv / "bin" / "gen-repo"

    result = _run([str(gen_repo), "validate", str(spec)], work, 120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "input_x" in result.stdout and "Traceback" not in result.stdout + result.stderr
    as_json = _run([str(gen_repo), "validate", "--json", str(spec)], work, 120)
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["ok"] is True

    bad = work / "bad.json"
    bad.write_text('{"graph": {"name": "x"}}')
    failed = _run([str(gen_repo), "validate", str(bad)], work, 120)
    assert failed.returncode == 2 and "'input_spec' is a required property" in failed.stderr
    assert "Traceback" not in failed.stdout + failed.stderr

    # The schemas (and the package) come from the installed wheel, not from the checkout.
    probe = _run(
        [str(python), "-c", "import generator, generator.resources as r; "
         "print(generator.__file__); print(r.resource_dir('schemas')); print(r.resource_dir('templates'))"],
        work, 120,
    )
    assert probe.returncode == 0, probe.stderr
    package_file, schemas, templates = (Path(line) for line in probe.stdout.splitlines())
    site_packages = package_file.parent.parent
    assert venv in package_file.parents
    assert schemas == site_packages / "generator" / "schemas"
    assert templates == site_packages / "generator" / "templates"
    assert REPO_ROOT not in schemas.parents
    assert {"graphspec.schema.json", "tune_report.schema.json"} <= {p.name for p in schemas.glob("*.schema.json")}


def _tour() -> list[tuple[list[str], tuple[str, ...]]]:
    """README's quickstart: each step's ``gen-repo`` command lines and the output it shows (``output`` blocks)."""
    return [([line.split("#", 1)[0].strip() for line in block.body if line.strip().startswith("gen-repo ")],
             shown.body) for block, shown in quickstart_steps()[1]]


@pytest.mark.slow
@pytest.mark.triton
def test_readme_tour_runs_from_the_repository_root_with_the_wheel(tmp_path: Path, wheel_venv: Path) -> None:
    """README's quickstart, verbatim, from a copy of the repository root, with gen-repo installed from its wheel.

    ``examples.models:make_mlp`` resolves from the working folder, as an app does for uvicorn; nothing puts the
    checkout on the import path. The fresh environment borrows the heavy extras (torch, onnx, onnxruntime, the CPU
    Triton) from the test environment through a path entry rather than installing them again; gen-repo itself comes
    from the wheel (checked below).
    """
    from generator.serving.server import TritonNotFoundError, find_tritonserver

    try:
        find_tritonserver()
    except TritonNotFoundError as exc:
        raise missing("tritonserver", f"no tritonserver available: {exc}") from exc
    tour = _tour()
    assert [c.split()[1] for commands, _ in tour for c in commands] == ["validate", "plan", "build", "verify", "lint",
                                                                       "smoke"]
    root = tmp_path / "checkout"
    tracked = subprocess.run(["git", "ls-files", "-z", "README.md", "examples"], cwd=REPO_ROOT, check=True,
                             capture_output=True).stdout.decode().split("\0")
    for name in filter(None, tracked):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO_ROOT / name, root / name)
    (root / ".venv").symlink_to(wheel_venv)
    python = wheel_venv / "bin" / "python"
    (_site_packages(python) / "gen_repo_test_extras.pth").write_text(f"{_site_packages(Path(sys.executable))}\n")
    probe = _run([str(python), "-c", "import generator, torch; print(generator.__file__)"], root, 120)
    assert probe.returncode == 0 and str(wheel_venv) in probe.stdout, probe.stdout + probe.stderr
    env_path = f"{wheel_venv / 'bin'}:{os.environ.get('PATH', '')}"
    for commands, shown in tour:
        printed = ""
        for command in commands:
            result = subprocess.run(command, shell=True, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, timeout=600,
                                    env={**_clean_env(), "PATH": env_path, "GEN_REPO_CACHE": str(tmp_path / "cache")})
            assert result.returncode == 0, (command, result.stdout[-3000:])
            assert "Traceback" not in result.stdout, command
            printed += result.stdout
        # The output README's quickstart shows, line for line but for its marked elisions (tests/docs_output.py).
        assert (why := output_mismatch(shown, printed)) is None, (commands, why)
    assert (root / "model_repository" / "mlp" / "1" / "model.onnx").is_file()


def _clean_env() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}}
