"""What the target machine has: GPUs and installed backends, and the rules that need to know.

Triton refuses a KIND_GPU instance group on a machine without GPUs, or naming a GPU id it lacks (core
``model_config_utils.cc`` ValidateInstanceGroup, after NormalizeInstanceGroup turned KIND_AUTO into KIND_CPU where
GPUs are missing), and a backend it cannot find (``backend_model.cc`` GetBackendRuntimeLibraryName: a
``libtriton_<backend>.so`` in the version folder, the model folder or the backends folder, or a python-based
``<backends>/<backend>/model.py``). The repository alone cannot tell: :class:`Environment` says what the machine has
(``--gpus``, ``--backends``, or what a running server shows); what it leaves unknown is skipped, and said so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from generator.lint.backends import backend_refused
from generator.lint.folders import ModelFolder

if TYPE_CHECKING:
    from tritonclient.grpc import model_config_pb2 as mc
else:  # the same module, without tritonclient.grpc's grpc and numpy imports (see generator.triton.proto)
    from generator.triton.proto import model_config_pb2 as mc

__all__ = ["ENVIRONMENT_RULES", "Environment", "check_environment", "environment_from_server", "parse_backends"]

#: The rules that need an Environment, and what each needs to know.
ENVIRONMENT_RULES = {"environment-gpus": "the GPU count (--gpus N, or --url)",
                     "environment-backend": "the installed backends (--backends LIST, or --url)"}
_MISSING_BACKEND = re.compile(r"unable to find backend library for backend '([^']+)'")


@dataclass(frozen=True, slots=True)
class Environment:
    """The target machine: ``gpus`` (ids 0..gpus-1) and the complete set of installed ``backends``; None = unknown.

    ``absent`` are backends known to be missing although the complete list is unknown (a server's refusals);
    ``source`` says where the facts came from.
    """

    gpus: int | None = None
    backends: frozenset[str] | None = None
    absent: frozenset[str] = frozenset()
    source: str = ""

    def skipped(self) -> dict[str, str]:
        """Environment rules skipped for lack of facts: rule -> what would enable it."""
        out = {}
        if self.gpus is None:
            out["environment-gpus"] = ENVIRONMENT_RULES["environment-gpus"]
        if self.backends is None and not self.absent:
            out["environment-backend"] = ENVIRONMENT_RULES["environment-backend"]
        return out

    def lacks_backend(self, backend: str) -> bool:
        """Whether ``backend`` is known not to be installed."""
        return backend in self.absent or (self.backends is not None and backend not in self.backends)


def environment_from_server(url: str, protocol: str = "grpc", timeout: float = 10.0) -> Environment:
    """What a running server shows: the backends it refused models for are absent.

    That is a reason "unable to find backend library for backend 'X'" in its repository index. Triton's API lists
    neither its installed backends nor its GPUs, so the rest stays unknown (give --gpus and --backends for those).
    """
    from generator.triton.connection import Connection, check_reachable

    check_reachable(url, protocol, timeout)
    with Connection(url, protocol, timeout) as connection:
        reasons = [entry["reason"] for entry in connection.index()]
    absent = frozenset(m.group(1) for reason in reasons for m in [_MISSING_BACKEND.search(reason)] if m)
    return Environment(absent=absent, source=f"server {url}")


def _ships_backend(folder: ModelFolder, library: str) -> bool:
    """The backend library lies in a version folder or the model folder (Triton searches there first)."""
    return (folder.path / library).is_file() or any((folder.path / str(v) / library).is_file() for v in folder.loaded)


def check_environment(folder: ModelFolder, environment: Environment) -> None:
    """The environment rules on one model folder (its config must be parsed and resolved)."""
    cf, resolved = folder.cf, folder.resolved
    if cf is None or resolved is None or resolved.platform == "ensemble" or backend_refused(resolved):
        return
    config = cf.config
    backend = resolved.backend
    runtime = config.runtime
    if backend and not runtime and environment.lacks_backend(backend) \
            and not _ships_backend(folder, f"libtriton_{backend}.so"):
        how = f" ({resolved.how})" if resolved.how and "backend" in resolved.how else ""
        cf.add("environment-backend", f"backend '{backend}'{how} is not installed on the target machine "
               f"({environment.source}) and the model folder ships no libtriton_{backend}.so",
               ("backend",) if config.backend else ("name",))
    if environment.gpus is None:
        return
    for index, group in enumerate(config.instance_group):
        base = ("instance_group", index)
        label = f"instance_group #{index}" + (f" '{group.name}'" if group.name else "")
        if group.kind == mc.ModelInstanceGroup.KIND_AUTO and group.gpus \
                and (environment.gpus == 0 or max(group.gpus) >= environment.gpus):
            cf.add("environment-gpus", f"{label} has kind KIND_AUTO and lists gpus {list(group.gpus)}; on a machine "
                   f"with {_gpus_text(environment.gpus)} ({environment.source}) Triton turns it into KIND_CPU, which "
                   "refuses listed gpus", (*base, "gpus"))
        if group.kind != mc.ModelInstanceGroup.KIND_GPU:
            continue
        if not group.gpus and environment.gpus == 0:
            cf.add("environment-gpus", f"{label} has kind KIND_GPU, but the target machine has no GPU "
                   f"({environment.source})", (*base, "kind"))
        for k, gpu in enumerate(group.gpus):
            if gpu >= environment.gpus:
                cf.add("environment-gpus", f"{label} names GPU {gpu}, but the target machine has "
                       f"{_gpus_text(environment.gpus)} ({environment.source})", (*base, "gpus", "#", k))


def _gpus_text(count: int) -> str:
    return "no GPU" if count == 0 else f"GPUs {', '.join(str(i) for i in range(count))}"


def parse_backends(text: Iterable[str]) -> frozenset[str]:
    """``--backends python,onnxruntime`` (repeatable) as a set of names."""
    return frozenset(name.strip() for item in text for name in item.split(",") if name.strip())

