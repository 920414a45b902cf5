"""GPU detection without TensorRT: the real machine, and nvidia-smi faked at its subprocess boundary."""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path

import pytest

from generator.gpu import (
    GpuInfo,
    current_gpu,
    detect_gpus,
    import_tensorrt,
    parse_nvidia_smi,
)
from tests.requirements import missing, require


def _fake_nvidia_smi(folder: Path, body: str) -> Path:
    """An executable ``nvidia-smi`` shell script in ``folder`` that logs its arguments to ``folder/args``."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    script.write_text(f'#!/bin/sh\necho "$@" >> "{folder / "args"}"\n{body}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


TWO_GPUS = """cat <<'EOF'
0, NVIDIA GeForce RTX 4090, 8.9, GPU-11111111-2222-3333-4444-555555555555
1, NVIDIA H100 80GB HBM3, 9.0, GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee
EOF"""


def test_this_machine_without_gpu_returns_empty_list() -> None:
    has_smi = shutil.which("nvidia-smi") is not None
    has_nodes = any(p.name[len("nvidia") :].isdigit() for p in Path("/dev").glob("nvidia*"))
    gpus = detect_gpus()
    assert all(isinstance(gpu, GpuInfo) for gpu in gpus)
    if has_smi or has_nodes:
        raise missing("no_gpu", "this machine has nvidia-smi or /dev/nvidia* nodes")
    assert gpus == []


def test_nothing_present_is_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    (tmp_path / "dev").mkdir()
    assert detect_gpus(dev_dir=tmp_path / "dev") == []
    assert detect_gpus(dev_dir=tmp_path / "missing-dev") == []


def test_fake_nvidia_smi_on_path_is_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    _fake_nvidia_smi(bin_dir, TWO_GPUS)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    gpus = detect_gpus(dev_dir=tmp_path)  # no device nodes there: nvidia-smi alone is the authority
    assert gpus == [
        GpuInfo(0, "NVIDIA GeForce RTX 4090", "8.9", "GPU-11111111-2222-3333-4444-555555555555"),
        GpuInfo(1, "NVIDIA H100 80GB HBM3", "9.0", "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"),
    ]
    args = (bin_dir / "args").read_text().split()
    assert "--format=csv,noheader" in args
    query = next(a for a in args if a.startswith("--query-gpu="))
    assert {"name", "compute_cap"} <= set(query.split("=", 1)[1].split(","))


def test_failing_nvidia_smi_means_no_gpu(tmp_path: Path) -> None:
    body = "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.' >&2; exit 9"
    script = _fake_nvidia_smi(tmp_path / "bin", body)
    assert detect_gpus(nvidia_smi=str(script), dev_dir=tmp_path) == []


def test_old_driver_without_compute_cap_field(tmp_path: Path) -> None:
    body = """case "$*" in
  *compute_cap*) echo 'Field "compute_cap" is not a valid field to query.'; exit 2;;
  *) echo '0, Tesla T4, GPU-0123'; exit 0;;
esac"""
    script = _fake_nvidia_smi(tmp_path / "bin", body)
    assert detect_gpus(nvidia_smi=str(script), dev_dir=tmp_path) == [GpuInfo(0, "Tesla T4", None, "GPU-0123")]
    assert len((tmp_path / "bin" / "args").read_text().splitlines()) == 2  # asked twice: new query, then old


def test_hanging_nvidia_smi_is_given_up(tmp_path: Path) -> None:
    script = _fake_nvidia_smi(tmp_path / "bin", "exec sleep 60")
    assert detect_gpus(nvidia_smi=str(script), dev_dir=tmp_path, timeout_s=0.5) == []


def test_device_nodes_without_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia1", "nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-modeset"):
        (dev / name).touch()
    gpus = detect_gpus(dev_dir=dev)
    assert [(gpu.index, gpu.compute_capability) for gpu in gpus] == [(0, None), (1, None)]


def test_parse_skips_malformed_lines_and_na() -> None:
    text = "\n0, A10, 8.6, [N/A]\ngarbage line\n1, L4, [N/A], GPU-9\n\n"
    assert parse_nvidia_smi(text) == [GpuInfo(0, "A10", "8.6", None), GpuInfo(1, "L4", None, "GPU-9")]


@pytest.mark.parametrize(
    ("visible", "expected"),
    [(None, 0), ("1", 1), ("1,0", 1), ("GPU-aaaa", 1), ("", None), ("-1", None), ("7", None)],
)
def test_current_gpu_follows_cuda_visible_devices(visible: str | None, expected: int | None) -> None:
    gpus = [GpuInfo(0, "A", "8.9", "GPU-1111"), GpuInfo(1, "B", "9.0", "GPU-aaaa-bbbb")]
    environ = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    chosen = current_gpu(gpus, environ)
    assert (chosen.index if chosen else None) == expected
    assert current_gpu([], {}) is None


def test_import_tensorrt_reports_a_missing_native_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A real package that fails to import the way PyPI's tensorrt shim does here (its native library is missing).
    package = tmp_path / "broken_trt_for_test"
    package.mkdir()
    (package / "__init__.py").write_text(
        "raise OSError('libnvonnxparser.so.11: cannot open shared object file: No such file or directory')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "broken_trt_for_test", raising=False)
    with pytest.raises(ImportError, match="libnvonnxparser"):
        import_tensorrt("broken_trt_for_test")


def test_import_tensorrt_finds_tensorrt_rtx_and_its_builder_api() -> None:
    """CI builds engines with TensorRT-RTX on a CPU, imported as the build imports it (the strict-skip test's node)."""
    require("tensorrt_rtx")
    trt = import_tensorrt("tensorrt_rtx")
    assert trt.__name__ == "tensorrt_rtx"
    assert all(hasattr(trt, name) for name in ("Builder", "OnnxParser", "ILogger", "BuilderFlag")), dir(trt)
