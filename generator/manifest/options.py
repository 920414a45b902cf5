"""A manifest entry's options and names checked: conflicts Triton would refuse, and model names it cannot use."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from generator.errors import Problem, json_pointer
from generator.manifest.proto_ranges import option_number_problems
from generator.naming import case_collisions, model_name_problems
from generator.triton.config_rules import (
    DynamicBatching,
    InstanceGroup,
    QueuePolicy,
    batching_refusals,
    group_refusals,
)

__all__ = ["name_problems", "option_problems", "tuned_problems", "tuned_settings_digest"]


def option_problems(
    file: str, index: int, options: Mapping[str, Any], own: frozenset[str], version: int
) -> list[Problem]:
    """Conflicting options (Triton would refuse the config, or the options contradict each other)."""

    def where(key: str, *rest: str | int) -> str:
        return json_pointer(("models", index, key, *rest) if key in own else ("defaults", key, *rest))

    problems: list[Problem] = []
    for name, value in options.items():  # numbers a config field cannot hold (protobuf would raise)
        at: tuple[str | int, ...] = ("models", index, name) if name in own else ("defaults", name)
        problems += option_number_problems(name, value, file, at)
    batching = options.get("batching", "auto")
    dyn = options.get("dynamic_batching")
    if batching == "none":
        if dyn is True or isinstance(dyn, dict):
            problems.append(
                Problem(file, where("dynamic_batching"), "dynamic_batching is set but batching is 'none' "
                        "(max_batch_size 0 cannot batch); remove one of them")
            )
        if "max_batch_size" in options:
            problems.append(
                Problem(file, where("max_batch_size"), "max_batch_size is set but batching is 'none'; remove one")
            )
    if isinstance(dyn, dict):
        keys = {int(key): key for key in dyn.get("priority_queue_policy", {})}  # the level as the manifest spells it
        for refusal in batching_refusals(_dynamic_batching(dyn)):
            rest = [keys.get(part, part) if isinstance(part, int) else part for part in refusal.where[1:]]
            problems.append(Problem(file, where("dynamic_batching", *rest), refusal.message))
    policy = options.get("version_policy")
    if isinstance(policy, dict) and "specific" in policy and version not in policy["specific"]:
        problems.append(
            Problem(file, where("version_policy", "specific"),
                    f"version_policy.specific {policy['specific']} does not include this model's version {version}, "
                    "so Triton would serve nothing")
        )
    groups_at = ("models", index, "instance_group") if "instance_group" in own else ("defaults", "instance_group")
    problems += _group_problems(file, options.get("instance_group") or [], groups_at)
    return problems


def _group_problems(file: str, groups: list[Mapping[str, Any]], at: tuple[str | int, ...]) -> list[Problem]:
    """Instance groups Triton refuses whatever the model (:func:`generator.triton.config_rules.group_refusals`)."""
    plain = [InstanceGroup(str(g.get("kind", "KIND_AUTO")), tuple(g.get("gpus", ()))) for g in groups]
    return [Problem(file, json_pointer((*at, *r.where[1:])), r.message) for r in group_refusals(plain)]


def _dynamic_batching(dyn: Mapping[str, Any]) -> DynamicBatching:
    def policy(p: Mapping[str, Any] | None) -> QueuePolicy:
        p = p or {}
        return QueuePolicy(str(p.get("timeout_action", "REJECT")), int(p.get("default_timeout_microseconds", 0)))

    return DynamicBatching(int(dyn.get("priority_levels", 0)), int(dyn.get("default_priority_level", 0)),
                           bool(dyn.get("preserve_ordering")), policy(dyn.get("default_queue_policy")),
                           {int(k): policy(p) for k, p in dyn.get("priority_queue_policy", {}).items()})


def tuned_problems(file: str, index: int, tuned: Mapping[str, Any]) -> list[Problem]:
    """A ``tuned:`` block's numbers its config fields cannot hold, and instance groups Triton would refuse.

    What the block may be against the model's engine and contract (a preferred size above max_batch_size, a kind the
    target cannot serve) is the plan's to say: it knows both.
    """
    problems: list[Problem] = []
    for name in ("instance_group", "dynamic_batching"):
        if name in tuned:
            problems += option_number_problems(name, tuned[name], file, ("models", index, "tuned", name))
    return problems + _group_problems(file, tuned.get("instance_group") or [],
                                      ("models", index, "tuned", "instance_group"))


def tuned_settings_digest(tuned: Mapping[str, Any]) -> str:
    """What a ``tuned:`` block's ``measured: {settings_digest}`` records: the settings its figures belong to.

    ``sha256:`` and 16 hex digits of the block's ``instance_group`` and ``dynamic_batching`` as canonical JSON; a
    block edited by hand no longer matches, so its figures are not shown for settings never measured.
    """
    settings = {key: tuned[key] for key in ("instance_group", "dynamic_batching") if key in tuned}
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def name_problems(file: str, models: list[tuple[int, str]]) -> list[Problem]:
    """Model names Triton cannot use, duplicates, and names equal on a case-insensitive file system.

    ``models``: ``(index, name)`` per entry.
    """
    problems = []
    seen: dict[str, int] = {}
    for index, name in models:
        for message in model_name_problems(name):
            problems.append(Problem(file, f"/models/{index}/name", message))
        if name in seen:
            problems.append(
                Problem(file, f"/models/{index}/name",
                        f"model name {name!r} is already used by /models/{seen[name]}; set a distinct name")
            )
        seen.setdefault(name, index)
    by_name = dict((name, index) for index, name in models)
    for first, second in case_collisions([name for _, name in models]):
        problems.append(
            Problem(file, f"/models/{by_name[second]}/name",
                    f"model name {second!r} differs from {first!r} only in case; they would share a folder on "
                    "case-insensitive file systems")
        )
    return problems
