"""Find NVIDIA GPUs and an importable TensorRT module without creating any TensorRT runtime.

A ``trt.Runtime`` created without a GPU can crash the process later, so GPUs are found from outside TensorRT:
``nvidia-smi`` (with a timeout, so a wedged driver cannot hang a build), else the ``/dev/nvidia<N>`` device nodes.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

__all__ = [
    "GpuInfo", "compute_capability_key", "current_gpu", "detect_gpus", "import_tensorrt", "parse_nvidia_smi",
]

_log = logging.getLogger(__name__)

#: ``nvidia-smi --query-gpu`` fields, in the order :func:`parse_nvidia_smi` reads them.
NVIDIA_SMI_FIELDS = ("index", "name", "compute_cap", "uuid")
#: Fallback query for drivers too old to know ``compute_cap`` (added in driver 510).
NVIDIA_SMI_FIELDS_OLD = ("index", "name", "uuid")

_DEVICE_NODE = re.compile(r"^nvidia(\d+)$")
_COMPUTE_CAPABILITY = re.compile(r"^(\d+)\.(\d+)$")



def compute_capability_key(compute_capability: str) -> tuple[int, int]:
    """``"8.9"`` as ``(8, 9)``; raises ValueError on anything else."""
    match = _COMPUTE_CAPABILITY.match(compute_capability)
    if not match:
        raise ValueError(f"compute capability must look like '8.9', got {compute_capability!r}")
    return int(match.group(1)), int(match.group(2))


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """One NVIDIA GPU: its ``nvidia-smi`` index, name and compute capability (``"8.9"``; None when unknown)."""

    index: int
    name: str
    compute_capability: str | None
    uuid: str | None = None


def parse_nvidia_smi(text: str, fields: Sequence[str] = NVIDIA_SMI_FIELDS) -> list[GpuInfo]:
    """GPUs from ``nvidia-smi --query-gpu=<fields> --format=csv,noheader`` output; malformed lines are skipped."""
    gpus = []
    for position, line in enumerate(line for line in text.splitlines() if line.strip()):
        values = [value.strip() for value in line.split(",")]
        if len(values) != len(fields):
            _log.debug("nvidia-smi line not understood: %r", line)
            continue
        row = dict(zip(fields, values, strict=True))
        index_text = row.get("index", str(position))
        index = int(index_text) if index_text.isdigit() else position
        cap = row.get("compute_cap")
        uuid = row.get("uuid")
        gpus.append(
            GpuInfo(
                index=index,
                name=row.get("name", "NVIDIA GPU"),
                compute_capability=cap if cap and _COMPUTE_CAPABILITY.match(cap) else None,
                uuid=uuid if uuid and uuid != "[N/A]" else None,
            )
        )
    return gpus


def _run_nvidia_smi(binary: str, fields: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str] | None:
    command = [binary, f"--query-gpu={','.join(fields)}", "--format=csv,noheader"]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        # A hung or unrunnable nvidia-smi means the driver is not usable: treat as no GPU rather than wait.
        _log.warning("nvidia-smi did not answer (%s); assuming no usable GPU", error)
        return None


def detect_gpus(nvidia_smi: str | None = None, dev_dir: Path | str = "/dev", timeout_s: float = 10.0) -> list[GpuInfo]:
    """List the machine's NVIDIA GPUs in ``nvidia-smi`` order; an empty list when there are none.

    ``nvidia-smi`` (``nvidia_smi``, else the one on PATH) is the authority when present: a non-zero exit (driver not
    loaded, no device) means no usable GPU. Without it, each ``<dev_dir>/nvidia<N>`` node counts as a GPU of unknown
    name and compute capability. Never touches CUDA or TensorRT.
    """
    binary = nvidia_smi or shutil.which("nvidia-smi")
    if binary:
        result = _run_nvidia_smi(binary, NVIDIA_SMI_FIELDS, timeout_s)
        if result is not None and result.returncode != 0 and "compute_cap" in (result.stdout + result.stderr):
            fields: Sequence[str] = NVIDIA_SMI_FIELDS_OLD
            result = _run_nvidia_smi(binary, fields, timeout_s)
        else:
            fields = NVIDIA_SMI_FIELDS
        if result is None:
            return []
        if result.returncode != 0:
            _log.info("nvidia-smi exited %s: %s", result.returncode, (result.stderr or result.stdout).strip())
            return []
        return parse_nvidia_smi(result.stdout, fields)
    try:
        nodes = sorted(
            int(match.group(1)) for entry in Path(dev_dir).iterdir() if (match := _DEVICE_NODE.match(entry.name))
        )
    except OSError:
        return []
    return [GpuInfo(index=n, name="NVIDIA GPU", compute_capability=None) for n in nodes]


def current_gpu(gpus: Sequence[GpuInfo], environ: Mapping[str, str] | None = None) -> GpuInfo | None:
    """Pick the GPU that CUDA calls device 0 in this process (what a TensorRT builder builds for), or None.

    Honours ``CUDA_VISIBLE_DEVICES`` given as indices or UUIDs (an empty value or ``-1`` hides every GPU). Indices
    are ``nvidia-smi``'s (PCI bus order); CUDA agrees when ``CUDA_DEVICE_ORDER=PCI_BUS_ID``.
    """
    env = os.environ if environ is None else environ
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return gpus[0] if gpus else None
    first = visible.split(",")[0].strip()
    if not first or first.startswith("-"):
        return None
    for gpu in gpus:
        if (first.isdigit() and gpu.index == int(first)) or (gpu.uuid and gpu.uuid.startswith(first)):
            return gpu
    return None


def import_tensorrt(name: str) -> ModuleType:
    """Import a TensorRT flavour by module name; raises ImportError (with the cause) when it cannot be loaded.

    PyPI's ``tensorrt`` shim imports but its native libraries are missing on machines that could not download them,
    which surfaces as ImportError or OSError; both become ImportError here.
    """
    try:
        return importlib.import_module(name)
    except ImportError:
        raise
    except OSError as error:
        raise ImportError(f"{name}: {error}") from error

