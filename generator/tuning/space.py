"""What ``gen-repo tune`` may vary, and nothing else: a model's facts, its settings, their neighbours and the grid.

A :class:`Setting` is the served part of a config that needs no rebuild and no client sees; ``max_batch_size`` never
varies and no preferred batch size exceeds the profile's max batch (:func:`setting_problems`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from generator.contracts.served import FolderReader, ServedModel, read_served_model
from generator.errors import GenRepoError, Problem
from generator.triton.proto import model_config_pb2

__all__ = [
    "DELAY_LADDER_US",
    "MAX_CONCURRENCY",
    "MAX_INSTANCES",
    "TuneFacts",
    "Setting",
    "candidate_config",
    "default_concurrency",
    "facts_from_repository",
    "grid",
    "loaded_preferred",
    "neighbours",
    "setting_problems",
]

#: Queue delays tried, in microseconds: none, gen-repo's default, then steps that gather a few requests at the
#: latencies of small CPU models (~1-10 ms) without adding more than a few ms to a request.
DELAY_LADDER_US = (0, 100, 500, 2000, 4000)
#: Most instances of one model tried on one machine (the issue's measurements peaked at 2-3 on 2 CPUs; more only
#: competes for the same cores or GPU).
MAX_INSTANCES = 4
#: Upper bound of the default concurrency (Triton's rule 2 x max_batch_size x instances can reach thousands).
MAX_CONCURRENCY = 64


@dataclass(frozen=True, slots=True)
class TuneFacts:
    """What bounds one model's search: read from its config.pbtxt and gen-repo contract, never changed by tuning."""

    name: str
    max_batch_size: int
    #: The largest batch the engine accepts: the contract's max batch (a TensorRT profile's), <= max_batch_size.
    profile_max_batch: int
    kind: str
    instance_count: int
    dynamic_batching: bool
    max_queue_delay_us: int
    preferred_batch_size: tuple[int, ...]
    #: Ensembles and decoupled models have nothing tune may vary (Triton refuses instance groups on an ensemble).
    tunable: bool = True
    why_not: str = ""

    @property
    def baseline(self) -> Setting:
        """The generated config's setting: where the search starts."""
        return Setting(self.instance_count, self.kind, self.max_queue_delay_us, self.preferred_batch_size)


@dataclass(frozen=True, slots=True, order=True)
class Setting:
    """One candidate: instance count and kind, queue delay (us) and preferred batch sizes (() for none)."""

    instance_count: int
    kind: str
    max_queue_delay_us: int
    preferred_batch_size: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        """The candidate's fields in the tune report's CANDIDATE form."""
        return {"instance_count": self.instance_count, "kind": self.kind,
                "max_queue_delay_microseconds": self.max_queue_delay_us,
                "preferred_batch_size": list(self.preferred_batch_size)}


def _preferred_options(facts: TuneFacts) -> list[tuple[int, ...]]:
    """The preferred sizes tried: none (whatever the queue holds), and the generated ones.

    The generated sizes are cut to what the profile accepts; where the generated config has none, the profile's max
    batch stands in (unless it is max_batch_size, which the server loads as none).
    """
    generated = tuple(s for s in facts.preferred_batch_size if 1 <= s <= facts.profile_max_batch)
    other = generated or ((facts.profile_max_batch,) if facts.profile_max_batch > 0 else ())
    # Triton fills an empty list with max_batch_size: [max_batch_size] is "none" once loaded, not another option.
    return [()] if not other or other == (facts.max_batch_size,) else [(), other]


def _delays(facts: TuneFacts) -> list[int]:
    return sorted({*DELAY_LADDER_US, facts.max_queue_delay_us})


def _counts(facts: TuneFacts) -> list[int]:
    return list(range(1, max(MAX_INSTANCES, facts.instance_count) + 1))


def neighbours(setting: Setting, facts: TuneFacts) -> list[Setting]:
    """The settings one step from ``setting``, inside the space.

    One instance more or fewer, the next delay up or down, the other preferred batch option; only dynamic-batching
    models vary delay and preferred sizes.
    """
    out: list[Setting] = []
    counts = _counts(facts)
    for count in (setting.instance_count - 1, setting.instance_count + 1):
        if count in counts:
            out.append(replace(setting, instance_count=count))
    if facts.dynamic_batching:
        delays = _delays(facts)
        at = delays.index(setting.max_queue_delay_us) if setting.max_queue_delay_us in delays else 0
        for k in (at - 1, at + 1):
            if 0 <= k < len(delays):
                out.append(replace(setting, max_queue_delay_us=delays[k]))
        for preferred in _preferred_options(facts):
            if preferred != setting.preferred_batch_size:
                out.append(replace(setting, preferred_batch_size=preferred))
    return [s for s in out if not setting_problems(s, facts)]


def grid(facts: TuneFacts) -> list[Setting]:
    """Every setting of the space (what the benchmark's exhaustive search measures), baseline first."""
    delays = _delays(facts) if facts.dynamic_batching else [facts.max_queue_delay_us]
    preferred = _preferred_options(facts) if facts.dynamic_batching else [facts.preferred_batch_size]
    everything = [Setting(c, facts.kind, d, p) for c in _counts(facts) for d in delays for p in preferred]
    base = facts.baseline
    return [base, *[s for s in everything if s != base]]


def setting_problems(setting: Setting, facts: TuneFacts) -> list[str]:
    """Why ``setting`` is outside what the engine and the contract allow (empty when it is inside)."""
    out = []
    if setting.kind != facts.kind:
        out.append(f"instance kind {setting.kind} is not the generated {facts.kind}")
    if not 1 <= setting.instance_count <= max(MAX_INSTANCES, facts.instance_count):
        out.append(f"instance count {setting.instance_count} is outside 1..{max(MAX_INSTANCES, facts.instance_count)}")
    if setting.max_queue_delay_us < 0:
        out.append("a negative queue delay")
    for size in setting.preferred_batch_size:
        if not 1 <= size <= facts.profile_max_batch:
            out.append(f"preferred_batch_size {size} is outside the engine's 1..{facts.profile_max_batch}")
    if not facts.dynamic_batching and (setting.preferred_batch_size != facts.preferred_batch_size
                                       or setting.max_queue_delay_us != facts.max_queue_delay_us):
        out.append("batching settings on a model without dynamic batching")
    return out


def default_concurrency(facts: TuneFacts) -> list[int]:
    """Triton's rule for throughput: 2 x max_batch_size x instances (the largest count tried), capped.

    One level, the same for every candidate, so candidates compare; at least 2 (one request executing, one queued).
    """
    instances = max(MAX_INSTANCES, facts.instance_count)
    return [max(2, min(MAX_CONCURRENCY, 2 * max(facts.max_batch_size, 1) * instances))]


def candidate_config(base: model_config_pb2.ModelConfig, setting: Setting) -> model_config_pb2.ModelConfig:
    """``base`` with the setting's instance group and batching: what Triton loads as the candidate's override.

    The first instance group keeps everything but its count (its profiles, GPUs); other groups are dropped, since a
    candidate says how many instances serve the model in all.
    """
    config = model_config_pb2.ModelConfig()
    config.CopyFrom(base)
    first = model_config_pb2.ModelInstanceGroup()
    if base.instance_group:
        first.CopyFrom(base.instance_group[0])
    first.count = setting.instance_count
    first.kind = model_config_pb2.ModelInstanceGroup.Kind.Value(setting.kind)
    del config.instance_group[:]
    config.instance_group.append(first)
    if base.HasField("dynamic_batching"):
        config.dynamic_batching.max_queue_delay_microseconds = setting.max_queue_delay_us
        del config.dynamic_batching.preferred_batch_size[:]
        config.dynamic_batching.preferred_batch_size.extend(setting.preferred_batch_size)
    return config


def _facts(name: str, config: model_config_pb2.ModelConfig, contract: dict[str, Any] | None) -> TuneFacts:
    mbs = int(config.max_batch_size)
    profile_max = mbs
    if contract is not None and mbs > 0:
        batches = [int(t["max_shape"][0]) for t in contract.get("inputs", []) if t.get("max_shape")]
        profile_max = min([mbs, *[b for b in batches if b > 0]])
    kinds = model_config_pb2.ModelInstanceGroup.Kind
    groups = list(config.instance_group)
    kind = kinds.Name(groups[0].kind) if groups else "KIND_AUTO"
    count = sum(max(int(g.count), 1) for g in groups) if groups else 1
    dyn = config.HasField("dynamic_batching")
    why = ""
    if config.platform == "ensemble":
        why = "an ensemble: Triton refuses instance groups and batching options on it"
    elif config.model_transaction_policy.decoupled:
        why = "a decoupled model: its throughput is not a request rate"
    return TuneFacts(
        name=name, max_batch_size=mbs, profile_max_batch=profile_max, kind=kind, instance_count=count,
        dynamic_batching=dyn, max_queue_delay_us=int(config.dynamic_batching.max_queue_delay_microseconds),
        preferred_batch_size=loaded_preferred(config),
        tunable=not why, why_not=why,
    )


def facts_from_repository(repo: Path | str, names: Sequence[str] = ()) -> list[tuple[TuneFacts, ServedModel]]:
    """Every model folder of ``repo`` (or those named) with a config: its facts and what Triton serves of it.

    Read by :func:`generator.contracts.served.read_served_model` (the served version). Its contract bounds the batch
    where present; a hand-written repository without one is bounded by ``max_batch_size`` alone. Every problem at once.
    """
    root = Path(repo)
    if not root.is_dir():
        raise GenRepoError([Problem(str(root), "", "model repository folder does not exist")])
    reader = FolderReader(root)
    folders = [m for m in reader.models() if (root / m / "config.pbtxt").is_file()]
    problems = [Problem(str(root), "", f"no model {n!r} (models: {', '.join(folders) or 'none'})")
                for n in names if n not in folders]
    out = []
    for name in folders:
        if names and name not in names:
            continue
        try:
            served = read_served_model(reader, name)
        except GenRepoError as error:
            problems += error.problems
            continue
        assert served.config is not None
        out.append((_facts(name, served.config, served.contract_doc), served))
    if problems:
        raise GenRepoError(problems)
    if not out:
        raise GenRepoError([Problem(str(root), "", "no models (no <model>/config.pbtxt folders)")])
    return out


def loaded_preferred(config: model_config_pb2.ModelConfig) -> tuple[int, ...]:
    """A config's preferred batch sizes as the server loads them: ``[max_batch_size]`` alone is none.

    Triton fills an empty list with max_batch_size, so the two are one setting, named by the shorter.
    """
    sizes = tuple(int(s) for s in config.dynamic_batching.preferred_batch_size)
    return () if sizes == (int(config.max_batch_size),) else sizes
