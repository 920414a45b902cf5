"""Which version folders Triton loads for a model, and which one answers a request that names no version.

``specific`` loads the listed versions that exist, ``latest { num_versions: n }`` the n highest, ``all`` every one; no
policy is ``latest 1``. A request without a version goes to the highest loaded one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from generator.triton.proto import model_config_pb2

__all__ = ["policy_name", "served_version", "versions_to_load"]


def policy_name(config: model_config_pb2.ModelConfig | None) -> str:
    """``specific``, ``latest`` or ``all``; "" where the config sets no policy (Triton's default, latest 1)."""
    if config is None or not config.HasField("version_policy"):
        return ""
    return str(config.version_policy.WhichOneof("policy_choice") or "")


def versions_to_load(config: model_config_pb2.ModelConfig | None, existing: Iterable[int]) -> list[int]:
    """The versions Triton loads: the version policy over the versions found (no policy: the latest one)."""
    found = sorted(set(existing), reverse=True)
    policy = policy_name(config)
    if not policy:
        return found[:1]
    assert config is not None
    if policy == "specific":
        return sorted({v for v in config.version_policy.specific.versions if v in found})
    if policy == "latest":
        return sorted(found[: config.version_policy.latest.num_versions])
    return sorted(found)


def served_version(config: model_config_pb2.ModelConfig | None, existing: Iterable[int]) -> int | None:
    """The version a request naming none reaches: the highest one loaded (None when none is)."""
    loaded = versions_to_load(config, existing)
    return loaded[-1] if loaded else None
