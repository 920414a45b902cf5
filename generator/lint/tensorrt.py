"""TensorRT plans: the optimization profiles each instance group lists, against each other and against the plan's.

Any instance may get any request, so every group must list every profile. A plan's profiles come from gen-repo's
contract where there is one (docs/tensorrt.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from generator.lint.findings import ConfigFile
from generator.lint.folders import ModelFolder, Resolved
from generator.lint.layout import gen_repo_contract
from generator.lint.model_config import TENSORRT_PLAN, profile_index

__all__ = ["check_plan_profiles", "check_profile_sets"]

#: Where the backend refuses a profile index the plan lacks (tensorrt_backend).
_AUTOFILL = "unable to autofill for '{model}', configuration specified invalid profile {profile} . Number of " \
            "profiles supported by TensorRT engine: {count}"
_NO_AUTOFILL = "Can not set the specified optimization profile {profile}[{index}] for {model}_0_0. Expected " \
               "optimization profile index range 0-{last}"


def _label(index: int, name: str) -> str:
    return f"instance_group #{index}" + (f" '{name}'" if name else "")


def _indices(profiles: Sequence[str]) -> set[int]:
    """The profile indices a group's ``profile`` list gives Triton (none listed: profile 0, the "default")."""
    found = {value for p in profiles if (value := profile_index(p)) is not None}
    return found if profiles else {0}


def check_profile_sets(cf: ConfigFile, resolved: Resolved) -> None:
    """Instance groups of a TensorRT plan that list different profiles (a per-config rule)."""
    if resolved.platform != TENSORRT_PLAN:
        return
    groups = list(cf.config.instance_group)
    if not groups:
        return
    first = _indices(groups[0].profile)
    for index, group in enumerate(groups[1:], start=1):
        listed = _indices(group.profile)
        if listed != first:
            cf.add("instance-group-profile-sets", f"{_label(index, group.name)} lists optimization profiles "
                   f"{sorted(listed)}, {_label(0, groups[0].name)} {sorted(first)}: Triton hands a request to any "
                   "instance whatever its shape, so a request only one group's profiles hold fails on the other's "
                   "instances (server PR #1987: every instance group must list every profile)",
                   ("instance_group", index, "profile") if group.profile else ("instance_group", index))


def check_plan_profiles(folder: ModelFolder) -> None:
    """The groups' profiles against the number the plan holds, where gen-repo's contract says it."""
    cf, resolved = folder.cf, folder.resolved
    if cf is None or resolved is None or resolved.platform != TENSORRT_PLAN:
        return
    counts = sorted({count for version in folder.loaded if (count := _profile_count(folder, version)) is not None})
    if not counts:
        return
    count = counts[0]  # the fewest any loaded version's plan holds: an index past it fails there
    groups = list(cf.config.instance_group)
    model = cf.config.name or folder.name
    if not groups and max(counts) > 1:
        cf.add("tensorrt-profiles-unlisted", _unlisted(max(counts), "no instance_group lists a profile"),
               ("platform",) if cf.config.platform else ())
    for index, group in enumerate(groups):
        label = _label(index, group.name)
        listed = _indices(group.profile)
        for k, profile in enumerate(group.profile):
            value = profile_index(profile)
            if value is not None and count <= value <= 2**31 - 1:
                words = _AUTOFILL.format(model=model, profile=profile, count=count)
                alternative = _NO_AUTOFILL.format(profile=profile, index=value, model=model, last=count - 1)
                cf.add("instance-group-profile-range", f"{label} lists profile {profile!r}, but the plan holds "
                       f"{count} optimization profiles (gen_repo/contract.json): Triton's TensorRT backend refuses "
                       f"the model ('{words}'; with --disable-auto-complete-config: '{alternative}')",
                       ("instance_group", index, "profile", "#", k))
        missing = sorted(set(range(max(counts))) - listed)
        if not group.profile and max(counts) > 1:
            cf.add("tensorrt-profiles-unlisted", _unlisted(max(counts), f"{label} lists none"),
                   ("instance_group", index))
        elif missing and max(counts) > 1:
            cf.add("tensorrt-profiles-unlisted", f"{label} lists optimization profiles {sorted(listed)} of the "
                   f"{max(counts)} the plan holds (gen_repo/contract.json): Triton gives only listed profiles an "
                   "execution context and hands requests to any instance whatever their shape, so requests that only "
                   f"profile(s) {missing} hold fail on this group's instances; list every profile in every group",
                   ("instance_group", index, "profile"))


def _unlisted(count: int, what: str) -> str:
    every = ", ".join(f'"{k}"' for k in range(count))
    return (f"the plan holds {count} optimization profiles (gen_repo/contract.json), but {what}: Triton's TensorRT "
            "backend then gives only profile 0 an execution context, and requests outside its shapes fail ('model "
            "expected the shape of dimension 1 to be between ... but received ...', Triton server issue #8629); list "
            f"every profile in every instance group: profile: [ {every} ]")


def _profile_count(folder: ModelFolder, version: int) -> int | None:
    """How many optimization profiles version ``version``'s plan holds, per its gen-repo contract (None: unknown)."""
    contract = gen_repo_contract(folder, version)
    profiles = contract.get("optimization_profiles") if contract is not None else None
    return len(profiles) if isinstance(profiles, list) and profiles else None
