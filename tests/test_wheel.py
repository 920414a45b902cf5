"""The built wheel works on its own: fresh virtual environment, installed console script, packaged schemas."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def _run(command: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    # A clean environment: nothing may leak the checkout onto the installed package's import path.
    env = {key: value for key, value in os.environ.items() if key not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.slow
def test_wheel_installs_and_validates_outside_the_checkout(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    built = _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(REPO_ROOT)], tmp_path, 600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = dist.glob("gen_repo-*.whl")

    venv = tmp_path / "venv"
    created = _run([sys.executable, "-m", "venv", str(venv)], tmp_path, 300)
    assert created.returncode == 0, created.stderr
    python = venv / "bin" / "python"
    installed = _run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)],
                     tmp_path, 600)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]

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
