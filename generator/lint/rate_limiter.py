"""The rate limiter's resources across every model of the repositories, as a server with ``--rate-limit`` checks them.

A resource both global and per-device, or above what ``--rate-limit-resource`` gives, is refused; with Triton's
default ``--rate-limit=off`` every resource is ignored, so these rules apply only with ``execution_count``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from generator.lint.backends import ENSEMBLE
from generator.lint.environment import Environment, normalized_kind
from generator.lint.findings import ConfigFile
from generator.lint.folders import ModelFolder
from generator.lint.locator import FieldPath
from generator.triton.proto import model_config_pb2 as mc

__all__ = ["check_rate_limiter"]

RULE = "rate-limiter-resource"


@dataclass(frozen=True, slots=True)
class _Declaration:
    """One resource of one instance group: where it is, and the devices its instances run on (None: unknown)."""

    cf: ConfigFile
    model: str
    group: int
    index: int
    name: str
    is_global: bool
    count: int
    devices: tuple[int, ...] | None

    @property
    def where(self) -> FieldPath:
        return ("instance_group", self.group, "rate_limiter", 0, "resources", self.index)

    @property
    def label(self) -> str:
        return f"model '{self.model}' instance_group #{self.group}"


def _devices(group: mc.ModelInstanceGroup, gpus: int | None) -> tuple[int, ...] | None:
    kind = normalized_kind(group, gpus)
    if kind is None:
        return None
    if kind != mc.ModelInstanceGroup.KIND_GPU:
        return (0,)
    if group.gpus:
        return tuple(sorted(set(group.gpus)))
    return tuple(range(gpus)) if gpus is not None else None


def _declarations(folders: Sequence[ModelFolder], gpus: int | None) -> list[_Declaration]:
    out = []
    for folder in sorted(folders, key=lambda f: (f.name, str(f.repository.root))):
        cf, resolved = folder.cf, folder.resolved
        if cf is None or resolved is None or resolved.platform == ENSEMBLE:
            continue
        for g, group in enumerate(cf.config.instance_group):
            devices = _devices(group, gpus)
            out += [_Declaration(cf, folder.name, g, k, resource.name, getattr(resource, "global"),
                                 resource.count, devices)
                    for k, resource in enumerate(group.rate_limiter.resources)]
    return out


def check_rate_limiter(folders: Sequence[ModelFolder], environment: Environment) -> None:
    """Both rate limiter refusals, on every instance group of every model (findings go to each declaration)."""
    if environment.rate_limit == "off":
        return
    declarations = _declarations(folders, environment.gpus)
    by_name: dict[str, list[_Declaration]] = defaultdict(list)
    for declaration in declarations:
        by_name[declaration.name].append(declaration)
    for name, group in by_name.items():
        scopes = {True: [d for d in group if d.is_global], False: [d for d in group if not d.is_global]}
        if scopes[True] and scopes[False]:
            for d in group:
                other = scopes[not d.is_global][0]
                d.cf.add(RULE, f"resource '{name}' is {'global' if d.is_global else 'device-specific'} here and "
                         f"{'global' if other.is_global else 'device-specific'} in {other.label}; with "
                         f"--rate-limit={environment.rate_limit} Triton refuses whichever of them loads second "
                         "('present as both global and device-specific')", d.where)
    if environment.rate_limit_resources:
        _check_explicit(declarations, environment)


def _check_explicit(declarations: Sequence[_Declaration], environment: Environment) -> None:
    """ParseAndValidateExplicitResources: each count against what ``--rate-limit-resource`` gives.

    Repeated entries keep the smallest count; a global resource takes the largest count given on any device.
    """
    given: dict[int | None, dict[str, int]] = defaultdict(dict)
    for r in environment.rate_limit_resources:
        given[r.device][r.name] = min(r.count, given[r.device].get(r.name, r.count))
    for d in declarations:
        if d.is_global:
            available = max((names[d.name] for names in given.values() if d.name in names), default=0)
            on = ""
        elif d.devices is None:
            if any(d.name in names for device, names in given.items() if device is not None):
                continue  # a device-specific count on devices lint cannot tell: undecided
            available, on = given[None].get(d.name, 0), ""
        else:
            counts = {device: max(given[device].get(d.name, 0), given[None].get(d.name, 0)) for device in d.devices}
            device = min(counts, key=lambda k: (counts[k], k))
            available, on = counts[device], f" on device {device}"
        if d.count > available:
            shown = " ".join(f"--rate-limit-resource={r}" for r in environment.rate_limit_resources)
            d.cf.add(RULE, f"{d.label} needs {d.count} of resource '{d.name}', but the server is given "
                     f"{available}{on} ({shown}); Triton refuses the model ('Resource count for \"{d.name}\" is "
                     f"limited to {available}')", d.where)
