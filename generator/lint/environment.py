"""What the target machine has (GPUs, installed backends) and how its server runs, and the rules that need to know.

:class:`Environment` says what the machine has (``--gpus``, ``--backends`` or a running server) and the tritonserver
options some refusals depend on; what it leaves unknown is skipped, and said so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from generator.lint.backends import backend_refused
from generator.lint.folders import ModelFolder
from generator.triton.proto import model_config_pb2 as mc

__all__ = [
    "RATE_LIMIT_MODES",
    "Environment",
    "RateLimitResource",
    "check_environment",
    "environment_from_server",
    "normalized_kind",
    "parse_backends",
    "parse_rate_limit_resource",
]

#: The rules that need an Environment, and what each needs to know.
ENVIRONMENT_RULES = {"environment-gpus": "the GPU count (--gpus N, or --url)",
                     "environment-backend": "the installed backends (--backends LIST, or --url)"}
_MISSING_BACKEND = re.compile(r"unable to find backend library for backend '([^']+)'")
#: tritonserver --rate-limit's values (server command_line_parser.cc; "off" is its default).
RATE_LIMIT_MODES = ("off", "execution_count")


@dataclass(frozen=True, slots=True)
class RateLimitResource:
    """One ``--rate-limit-resource=NAME:COUNT[:DEVICE]``: ``device`` None applies to every device."""

    name: str
    count: int
    device: int | None = None

    def __str__(self) -> str:
        return f"{self.name}:{self.count}" + ("" if self.device is None else f":{self.device}")


def parse_rate_limit_resource(text: str) -> RateLimitResource:
    """``NAME:COUNT[:DEVICE]`` as tritonserver's ParseRateLimiterResourceOption reads it; ValueError when malformed.

    The name is kept as written: tritonserver lowercases a copy of the option and parses the original.
    """
    parts = text.split(":")
    if len(parts) not in (2, 3) or not parts[0]:
        raise ValueError(f"{text!r} is not NAME:COUNT or NAME:COUNT:DEVICE")
    try:
        numbers = [int(part) for part in parts[1:]]
    except ValueError:
        raise ValueError(f"{text!r}: COUNT and DEVICE must be integers") from None
    if numbers[0] < 0 or (len(numbers) == 2 and numbers[1] < 0):
        raise ValueError(f"{text!r}: COUNT and DEVICE must be >= 0")
    return RateLimitResource(parts[0], numbers[0], numbers[1] if len(numbers) == 2 else None)


@dataclass(frozen=True, slots=True)
class Environment:
    """The target machine: ``gpus`` (ids 0..gpus-1) and the complete set of installed ``backends``; None = unknown.

    ``absent`` are backends known to be missing although the complete list is unknown (a server's refusals);
    ``source`` says where the facts came from. ``auto_complete``, ``rate_limit`` and ``rate_limit_resources`` are
    the server's options of those names, with tritonserver's defaults.
    """

    gpus: int | None = None
    backends: frozenset[str] | None = None
    absent: frozenset[str] = frozenset()
    source: str = ""
    auto_complete: bool = True
    rate_limit: str = "off"
    rate_limit_resources: tuple[RateLimitResource, ...] = ()

    @classmethod
    def from_tritonserver_args(cls, args: Iterable[str], **facts: Any) -> Environment:
        """The options of a tritonserver command line (others are ignored), with ``facts`` (``gpus``, ...).

        ``--strict-model-config=true`` is the deprecated spelling of ``--disable-auto-complete-config``. Raises
        ValueError for a value tritonserver refuses.
        """
        options: dict[str, Any] = {}
        resources: list[RateLimitResource] = []
        for arg in args:
            name, _, value = arg.partition("=")
            if name == "--disable-auto-complete-config":
                options["auto_complete"] = False
            elif name == "--strict-model-config":
                options["auto_complete"] = value.lower() not in ("true", "1")
            elif name == "--rate-limit":
                if value.lower() not in RATE_LIMIT_MODES:
                    raise ValueError(f"invalid argument for --rate-limit: {value!r}")
                options["rate_limit"] = value.lower()
            elif name == "--rate-limit-resource":
                resources.append(parse_rate_limit_resource(value))
        return cls(**facts, **options, rate_limit_resources=tuple(resources))

    def tritonserver_args(self) -> list[str]:
        """The tritonserver options this environment stands for (none where Triton's defaults hold)."""
        args = [] if self.auto_complete else ["--disable-auto-complete-config"]
        if self.rate_limit != "off":
            args.append(f"--rate-limit={self.rate_limit}")
        return args + [f"--rate-limit-resource={resource}" for resource in self.rate_limit_resources]

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


def normalized_kind(group: mc.ModelInstanceGroup, gpus: int | None) -> int | None:
    """The kind core's NormalizeInstanceGroup gives a group (None for KIND_AUTO when the GPU count is unknown).

    KIND_AUTO becomes KIND_CPU on a machine without GPUs or when it lists a GPU the machine lacks, else KIND_GPU.
    """
    if group.kind != mc.ModelInstanceGroup.KIND_AUTO:
        return int(group.kind)
    if gpus is None:
        return None
    if gpus == 0 or any(gpu >= gpus for gpu in group.gpus):
        return int(mc.ModelInstanceGroup.KIND_CPU)
    return int(mc.ModelInstanceGroup.KIND_GPU)


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
                and normalized_kind(group, environment.gpus) == mc.ModelInstanceGroup.KIND_CPU:
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

