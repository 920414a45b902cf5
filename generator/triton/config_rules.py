"""Triton's refusals of dynamic batching and instance group settings, once, on plain data.

Core ``model_config_utils.cc`` ValidateModelConfig and ValidateInstanceGroup, asked by the manifest's options, the
planned config and ``gen-repo lint``, each locating a :data:`Location` its own way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from generator.triton.proto import model_config_pb2 as mc

__all__ = [
    "DynamicBatching",
    "InstanceGroup",
    "Location",
    "QueuePolicy",
    "REFUSED_KINDS",
    "Refusal",
    "batching_refusals",
    "dynamic_batching_of",
    "group_refusals",
    "instance_groups_of",
    "preferred_refusals",
]

#: Where a refusal is, in ``ModelConfig`` field names: ``("dynamic_batching", "priority_queue_policy", 3)`` (a map
#: key), ``("dynamic_batching", "default_queue_policy", "timeout_action")``, ``("instance_group", 0, "gpus", 1)``.
Location = tuple[str | int, ...]

#: Backend -> (instance kinds it refuses, its words): tensorrt creates only GPU instances, openvino only CPU ones.
REFUSED_KINDS: dict[str, tuple[frozenset[str], str]] = {
    "tensorrt": (frozenset({"KIND_CPU", "KIND_MODEL"}), "TensorRT backend supports only GPU device"),
    "openvino": (frozenset({"KIND_GPU", "KIND_MODEL"}), "Triton openVINO backend supports only CPU device"),
}


@dataclass(frozen=True, slots=True)
class QueuePolicy:
    """The parts of a ``ModelQueuePolicy`` Triton's rules read."""

    timeout_action: str = "REJECT"
    default_timeout_microseconds: int = 0


@dataclass(frozen=True, slots=True)
class DynamicBatching:
    """The priority and ordering settings of a ``dynamic_batching`` block (unset: proto defaults)."""

    priority_levels: int = 0
    default_priority_level: int = 0
    preserve_ordering: bool = False
    default_queue_policy: QueuePolicy = QueuePolicy()
    priority_queue_policy: Mapping[int, QueuePolicy] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class InstanceGroup:
    """An instance group's kind (``KIND_CPU``...) and the GPU ids it lists."""

    kind: str
    gpus: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Refusal:
    """One setting Triton refuses: where, why, and the lint rule it belongs to."""

    where: Location
    message: str
    rule: str


def batching_refusals(dyn: DynamicBatching) -> list[Refusal]:
    """Priority levels and preserve_ordering as Triton checks them (every problem, not the first)."""
    out: list[Refusal] = []
    levels = dyn.priority_levels
    if levels != 0:  # Triton checks the levels only when priorities are on
        if dyn.default_priority_level == 0:
            out.append(Refusal(("dynamic_batching", "priority_levels"), f"priority_levels {levels} needs a "
                               "default_priority_level in 1..priority_levels", "priority-level"))
        elif not 1 <= dyn.default_priority_level <= levels:
            out.append(Refusal(("dynamic_batching", "default_priority_level"), "default_priority_level "
                               f"{dyn.default_priority_level} is outside 1..priority_levels ({levels})",
                               "priority-level"))
        out += [Refusal(("dynamic_batching", "priority_queue_policy", level), f"priority_queue_policy level {level} "
                        f"is outside 1..priority_levels ({levels})", "priority-level")
                for level in sorted(dyn.priority_queue_policy) if not 1 <= level <= levels]
    if not dyn.preserve_ordering:
        return out
    if levels > 1:
        out.append(Refusal(("dynamic_batching", "preserve_ordering"), "preserve_ordering cannot be combined with "
                           f"priority_levels {levels} (Triton allows one priority level when responses must keep "
                           "request order)", "preserve-ordering"))
    policies: list[tuple[Location, QueuePolicy]] = [(("default_queue_policy",), dyn.default_queue_policy)]
    policies += [(("priority_queue_policy", level), p) for level, p in sorted(dyn.priority_queue_policy.items())]
    out += [Refusal(("dynamic_batching", *at, "timeout_action"), "timeout_action DELAY (with a default timeout) "
                    "cannot be combined with preserve_ordering", "preserve-ordering")
            for at, p in policies if p.timeout_action == "DELAY" and p.default_timeout_microseconds != 0]
    return out


def preferred_refusals(sizes: Sequence[int], max_batch_size: int, at: Location) -> list[Refusal]:
    """Preferred batch sizes outside 1..max_batch_size (``at``: the list; each size at its index)."""
    return [Refusal((*at, k), f"preferred_batch_size {size} is outside 1..max_batch_size ({max_batch_size})",
                    "preferred-batch-size") for k, size in enumerate(sizes) if not 1 <= size <= max_batch_size]


def group_refusals(groups: Sequence[InstanceGroup]) -> list[Refusal]:
    """GPU ids on a CPU or model-chosen group, and negative GPU ids (whatever the model)."""
    out = []
    for g, group in enumerate(groups):
        if group.kind in ("KIND_CPU", "KIND_MODEL") and group.gpus:
            out.append(Refusal(("instance_group", g, "gpus"), f"gpus cannot be listed for {group.kind}",
                               "instance-group-gpus"))
        out += [Refusal(("instance_group", g, "gpus", k), f"gpu id {gpu} is negative; GPU ids are >= 0",
                        "instance-group-gpus") for k, gpu in enumerate(group.gpus) if gpu < 0]
    return out


def _policy_of(policy: mc.ModelQueuePolicy) -> QueuePolicy:
    return QueuePolicy(mc.ModelQueuePolicy.TimeoutAction.Name(policy.timeout_action),
                       policy.default_timeout_microseconds)


def dynamic_batching_of(config: mc.ModelConfig) -> DynamicBatching:
    """The plain data of a parsed config's ``dynamic_batching``."""
    db = config.dynamic_batching
    return DynamicBatching(db.priority_levels, db.default_priority_level, db.preserve_ordering,
                           _policy_of(db.default_queue_policy),
                           {level: _policy_of(p) for level, p in db.priority_queue_policy.items()})


def instance_groups_of(config: mc.ModelConfig) -> list[InstanceGroup]:
    """The plain data of a parsed config's instance groups."""
    return [InstanceGroup(mc.ModelInstanceGroup.Kind.Name(g.kind), tuple(g.gpus)) for g in config.instance_group]
