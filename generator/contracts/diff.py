"""Client-visible changes between two model contracts, each classified as a client experiences it.

Breaking when a request valid before is refused or a response changes shape or type; what a config-derived contract
cannot tell is an :class:`UnknownFact` (docs/diff.md). Pure data, through :class:`ContractLike`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from generator.contracts.tensor_contract import TensorContract
from generator.planning.values import ValueDomain

__all__ = [
    "ContractChange",
    "ContractDiff",
    "ModelComparison",
    "ServedSettings",
    "UnknownFact",
    "diff_models",
    "diff_repositories",
    "is_exact",
]

DIFF_FORMAT = "gen-repo-diff/1"
BREAKING = "breaking"
COMPATIBLE = "compatible"
#: An integer value range is compared value by value against a set of values up to this many integers.
_MAX_ENUMERATED = 4096


class ContractLike(Protocol):
    """What the diff reads of a model's contract (:class:`generator.contracts.model_contract.ModelContract`).

    A protocol, not that class: its ``compatible_with`` calls this module, which therefore cannot import it.
    """

    @property
    def name(self) -> str:
        """The model name."""

    @property
    def max_batch_size(self) -> int:
        """Triton's max_batch_size (0: no batch axis)."""

    @property
    def inputs(self) -> Sequence[TensorContract]:
        """Inputs in config order."""

    @property
    def outputs(self) -> Sequence[TensorContract]:
        """Outputs in config order."""

    @property
    def platform(self) -> str:
        """The config's platform (``ensemble`` for an ensemble)."""

    @property
    def source(self) -> str:
        """Where it was read from (a contract.json path ends so)."""


@dataclass(frozen=True, slots=True)
class ContractChange:
    """One client-visible change of one model.

    ``subject`` is ``model``, ``max_batch_size``, ``input:<name>``, ``output:<name>``, ``instance_group`` or
    ``dynamic_batching`` (a served setting); ``axis`` the axis of a full
    request shape (batch axis first when the model batches) for shape changes, else None.
    """

    model: str
    kind: str
    subject: str
    axis: int | None
    old: Any
    new: Any
    breaking: bool
    message: str

    @property
    def classification(self) -> str:
        """``"breaking"`` or ``"compatible"``."""
        return BREAKING if self.breaking else COMPATIBLE

    def sort_key(self) -> tuple[str, int, str, str, int]:
        """Model, breaking first, kind, subject, axis (the order every output uses)."""
        return (self.model, 0 if self.breaking else 1, self.kind, self.subject, -1 if self.axis is None else self.axis)

    def to_dict(self) -> dict[str, Any]:
        """The ``changes`` entry of ``gen-repo diff --json``."""
        return {"model": self.model, "kind": self.kind, "subject": self.subject, "axis": self.axis,
                "old": self.old, "new": self.new, "classification": self.classification, "message": self.message}


@dataclass(frozen=True, slots=True)
class UnknownFact:
    """A fact a side's contract cannot tell (it was derived from a config.pbtxt), so it was not compared."""

    model: str
    fact: str
    why: str

    def to_dict(self) -> dict[str, str]:
        """The ``unknown`` entry of ``gen-repo diff --json``."""
        return {"model": self.model, "fact": self.fact, "why": self.why}


@dataclass(frozen=True, slots=True)
class ServedSettings:
    """How a config serves a model, which no request or response shows: what ``gen-repo tune`` changes.

    ``instance_groups``: ``"<kind> x<count>"`` per group; ``max_queue_delay_microseconds`` and
    ``preferred_batch_size`` are None without dynamic batching.
    """

    instance_groups: tuple[str, ...]
    max_queue_delay_microseconds: int | None
    preferred_batch_size: tuple[int, ...] | None


@dataclass(frozen=True, slots=True)
class ModelComparison:
    """The changes between two contracts of one model, and what could not be compared."""

    changes: tuple[ContractChange, ...]
    unknown: tuple[UnknownFact, ...] = ()

    @property
    def breaking(self) -> tuple[ContractChange, ...]:
        """The breaking changes."""
        return tuple(c for c in self.changes if c.breaking)

    @property
    def compatible(self) -> bool:
        """True when no change breaks a client (unknown facts aside)."""
        return not self.breaking


@dataclass(frozen=True, slots=True)
class ContractDiff:
    """Every change between two repositories (or two versions of one model), as ``gen-repo diff`` reports it."""

    old: str
    new: str
    changes: tuple[ContractChange, ...]
    unknown: tuple[UnknownFact, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]
    unchanged: tuple[str, ...]

    @property
    def breaking(self) -> int:
        """How many changes are breaking."""
        return sum(1 for c in self.changes if c.breaking)

    @property
    def compatible(self) -> int:
        """How many changes are compatible."""
        return sum(1 for c in self.changes if not c.breaking)

    def to_json(self) -> dict[str, Any]:
        """The ``gen-repo diff --json`` document (schema ``gen-repo-diff/1``, docs/diff.md)."""
        return {
            "schema": DIFF_FORMAT,
            "old": self.old,
            "new": self.new,
            "breaking": self.breaking,
            "compatible": self.compatible,
            "models": {"added": list(self.added), "removed": list(self.removed), "changed": list(self.changed),
                       "unchanged": list(self.unchanged)},
            "changes": [c.to_dict() for c in self.changes],
            "unknown": [u.to_dict() for u in self.unknown],
        }

    def render_json(self) -> str:
        """:meth:`to_json` as text: keys sorted, indent 2, trailing newline (same diff, same bytes)."""
        return json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n"


# -- Classification --------------------------------------------------------------------------------------------------
def is_exact(contract: ContractLike) -> bool:
    """Whether ``contract`` came from ``gen_repo/contract.json`` (exact ranges and value domains).

    contract.json gives every input its ``opt_shape`` (the profile's); a contract derived from a config has none.
    """
    if contract.source.endswith("contract.json"):
        return True
    return bool(contract.inputs) and all(t.opt_shape is not None for t in contract.inputs)


def _is_ensemble(contract: ContractLike) -> bool:
    return contract.platform == "ensemble"


def _range_text(low: int, high: int | None) -> str:
    return f"{low}..{'' if high is None else high}" if low != high else str(low)


def _shape_ranges(tensor: TensorContract) -> list[list[int | None]]:
    return [[low, high] for low, high in zip(tensor.min_shape, tensor.max_shape, strict=True)]


class _Differ:
    """Collects the changes of one model (old contract -> new contract)."""

    def __init__(self, old: ContractLike, new: ContractLike) -> None:
        self.old, self.new = old, new
        self.model = new.name or old.name
        self.old_exact, self.new_exact = is_exact(old), is_exact(new)
        self.ensemble = _is_ensemble(old) or _is_ensemble(new)
        self.changes: list[ContractChange] = []
        self.unknown: list[UnknownFact] = []

    def add(self, kind: str, subject: str, old: Any, new: Any, breaking: bool, message: str,
            axis: int | None = None) -> None:
        self.changes.append(ContractChange(self.model, kind, subject, axis, old, new, breaking, message))

    def io_kind(self, kind: str) -> str:
        """Kinds about an ensemble's inputs and outputs say so: its wiring is what its clients see."""
        return f"ensemble_{kind}" if self.ensemble else kind

    def what(self, role: str, name: str) -> str:
        return f"{'ensemble ' if self.ensemble else ''}{role} '{name}'"

    # ---------------------------------------------------------------------------------------------------------------
    def run(self) -> ModelComparison:
        self.unknowns()
        self.batching()
        self.tensors("input", self.old.inputs, self.new.inputs)
        self.tensors("output", self.old.outputs, self.new.outputs)
        return ModelComparison(tuple(sorted(self.changes, key=ContractChange.sort_key)),
                               tuple(sorted(set(self.unknown), key=lambda u: (u.model, u.fact, u.why))))

    def unknowns(self) -> None:
        for side, exact, contract in (("old", self.old_exact, self.old), ("new", self.new_exact, self.new)):
            if exact:
                continue
            why = (f"the {side} contract is derived from config.pbtxt ({contract.source or 'no contract.json'}), "
                   "which does not say")
            if contract.inputs:
                self.unknown.append(UnknownFact(self.model, "value_domains",
                                                f"{why} which values each input takes"))
            if any(d < 0 for t in (*contract.inputs, *contract.outputs) for d in t.dims):
                self.unknown.append(UnknownFact(self.model, "shape_ranges",
                                                f"{why} the min/max of its variable (-1) dims"))

    def batching(self) -> None:
        old, new = self.old.max_batch_size, self.new.max_batch_size
        if old > 0 and new == 0:
            self.add("batching_off", "max_batch_size", old, new, True,
                     f"batching turned off (max_batch_size {old} -> 0): requests no longer carry a batch axis")
        elif old == 0 and new > 0:
            self.add("batching_on", "max_batch_size", old, new, False,
                     f"batching turned on (max_batch_size 0 -> {new}): the first axis is the batch axis now")
        elif new < old:
            self.add("max_batch_size_lowered", "max_batch_size", old, new, True,
                     f"max_batch_size lowered {old} -> {new}: batches of {new + 1}..{old} are refused")
        elif new > old:
            self.add("max_batch_size_raised", "max_batch_size", old, new, False,
                     f"max_batch_size raised {old} -> {new}")

    def tensors(self, role: str, old: Sequence[TensorContract], new: Sequence[TensorContract]) -> None:
        old_by = {t.name: t for t in old}
        new_by = {t.name: t for t in new}
        removed = [t for t in old if t.name not in new_by]
        added = [t for t in new if t.name not in old_by]
        for tensor in old:
            if tensor.name in new_by:
                self.tensor(role, tensor, new_by[tensor.name])
        # A removed tensor and an added one with the same data type and dims: most likely renamed (still breaking).
        pairs = _renames(role, removed, added)
        for old_name, match in pairs:
            self.add(self.io_kind(f"{role}_renamed"), f"{role}:{old_name}", old_name, match, True,
                     f"{self.what(role, old_name)} renamed to '{match}' (same data type and dims): "
                     f"clients using the old name are refused")
        renamed = dict(pairs)
        taken = set(renamed.values())
        for gone in removed:
            if gone.name not in renamed:
                detail = ("requests that send it are refused" if role == "input"
                          else "clients reading it get nothing")
                self.add(self.io_kind(f"{role}_removed"), f"{role}:{gone.name}", gone.name, None, True,
                         f"{self.what(role, gone.name)} removed: {detail}")
        for fresh in added:
            if fresh.name in taken:
                continue
            if role == "output":
                self.add(self.io_kind("output_added"), f"output:{fresh.name}", None, fresh.name, False,
                         f"{self.what(role, fresh.name)} added")
            elif fresh.optional:
                self.add(self.io_kind("input_added_optional"), f"input:{fresh.name}", None, fresh.name, False,
                         f"optional {self.what(role, fresh.name)} added")
            else:
                self.add(self.io_kind("input_added_required"), f"input:{fresh.name}", None, fresh.name, True,
                         f"required {self.what(role, fresh.name)} added: requests without it are refused")

    def tensor(self, role: str, old: TensorContract, new: TensorContract) -> None:
        subject = f"{role}:{old.name}"
        what = self.what(role, old.name)
        if role == "input" and old.optional != new.optional:
            if new.optional:
                self.add("input_optional", subject, False, True, False, f"{what} is optional now")
            else:
                self.add("input_required", subject, True, False, True,
                         f"{what} is required now: requests without it are refused")
        if old.data_type != new.data_type:
            self.add("data_type", subject, old.data_type, new.data_type, True,
                     f"{what} data type {old.data_type} -> {new.data_type}")
        if old.rank != new.rank:
            self.add("rank", subject, old.rank, new.rank, True,
                     f"{what} rank {old.rank} -> {new.rank} (request shape {_shape_ranges(old)} -> "
                     f"{_shape_ranges(new)})")
            return
        self.shapes(role, subject, what, old, new)
        if role == "input":
            self.values(subject, what, old.values, new.values)

    def shapes(self, role: str, subject: str, what: str, old: TensorContract, new: TensorContract) -> None:
        both_batch = self.old.max_batch_size > 0 and self.new.max_batch_size > 0
        # Where both sides batch, the batch axis is max_batch_size's (reported once, above).
        first = 1 if both_batch else 0
        old_dims = (None,) * (old.rank - len(old.dims)) + old.dims
        new_dims = (None,) * (new.rank - len(new.dims)) + new.dims
        for axis in range(first, old.rank):
            low, high = old.min_shape[axis], old.max_shape[axis]
            low2, high2 = new.min_shape[axis], new.max_shape[axis]
            if (low, high) == (low2, high2):
                continue
            static_old, static_new = low == high, low2 == high2
            # A variable dim of a config-derived side has no known range: only a static size can be compared.
            variable_unknown = ((not self.old_exact and old_dims[axis] == -1)
                                or (not self.new_exact and new_dims[axis] == -1))
            if variable_unknown and not (static_old and static_new):
                continue
            old_range, new_range = [low, high], [low2, high2]
            if (static_old and static_new) or (role == "output" and (static_old or static_new)):
                self.add("dims", subject, old_range, new_range, True,
                         f"{what} axis {axis} size {_range_text(low, high)} -> {_range_text(low2, high2)}", axis)
                continue
            narrower = low2 > low or (high2 is not None and (high is None or high2 < high))
            wider = low2 < low or (high is not None and (high2 is None or high2 > high))
            if role == "output":
                # A variable output axis: clients already read any size; report, never break.
                kind = "range_narrowed" if narrower and not wider else "range_widened"
                self.add(kind, subject, old_range, new_range, False,
                         f"{what} axis {axis} range {_range_text(low, high)} -> {_range_text(low2, high2)} "
                         "(a variable output axis)", axis)
                continue
            if narrower:
                self.add("range_narrowed", subject, old_range, new_range, True,
                         f"{what} axis {axis} range {_range_text(low, high)} -> {_range_text(low2, high2)}: "
                         "sizes outside it are refused now", axis)
            if wider:
                self.add("range_widened", subject, old_range, new_range, False,
                         f"{what} axis {axis} range {_range_text(low, high)} -> {_range_text(low2, high2)}", axis)

    def values(self, subject: str, what: str, old: ValueDomain | None, new: ValueDomain | None) -> None:
        if not (self.old_exact and self.new_exact):
            return  # listed as an unknown fact: a config says nothing about values
        old_json = _domain_json(old)
        new_json = _domain_json(new)
        if old_json == new_json:
            return
        old_text = old.describe() if old is not None else "any value"
        new_text = new.describe() if new is not None else "any value"
        if _contains(new, old) and not _contains(old, new):
            self.add("value_domain_widened", subject, old_json, new_json, False,
                     f"{what} values {old_text} -> {new_text}")
        elif not _contains(new, old):
            self.add("value_domain_narrowed", subject, old_json, new_json, True,
                     f"{what} values {old_text} -> {new_text}: values outside it are refused now")


def _renames(role: str, removed: Sequence[TensorContract],
             added: Sequence[TensorContract]) -> list[tuple[str, str]]:
    """(removed name, the added name it was most likely renamed to), in the order of ``removed``.

    Each removed tensor, in order, takes the first untaken added tensor with its data type and dims; a required input
    never matches an optional one. Linear: added tensors are bucketed by (data type, dims) and each bucket is walked
    once per kind of match, never back over a taken tensor.
    """
    buckets: dict[tuple[str, tuple[int, ...]], tuple[list[TensorContract], list[TensorContract]]] = {}
    for tensor in added:
        every, required = buckets.setdefault((tensor.data_type, tuple(tensor.dims)), ([], []))
        every.append(tensor)
        if role == "output" or not tensor.optional:
            required.append(tensor)
    cursors: dict[int, int] = {}  # id of a bucket list -> index of its first tensor not known to be taken
    taken: set[str] = set()
    pairs: list[tuple[str, str]] = []
    for gone in removed:
        bucket = buckets.get((gone.data_type, tuple(gone.dims)))
        if bucket is None:
            continue
        candidates = bucket[0] if role == "output" or gone.optional else bucket[1]
        index = cursors.get(id(candidates), 0)
        while index < len(candidates) and candidates[index].name in taken:
            index += 1  # taken by an earlier match (through either list): never a candidate again
        cursors[id(candidates)] = index
        if index < len(candidates):
            pairs.append((gone.name, candidates[index].name))
            taken.add(candidates[index].name)
    return pairs


def _domain_json(domain: ValueDomain | None) -> Any:
    """A domain as the diff reports it: ``{"value_range": [lo, hi]}``, ``{"values": [...]}`` or None (any value)."""
    if domain is None:
        return None
    if domain.values is not None:
        return {"values": list(domain.values)}
    return {"value_range": [domain.low, domain.high]}


def _contains(outer: ValueDomain | None, inner: ValueDomain | None) -> bool:
    """Whether every value ``inner`` allows is allowed by ``outer`` (None: any value)."""
    if outer is None:
        return True
    if inner is None:
        return False
    if outer.values is None:
        low = float("-inf") if outer.low is None else outer.low
        high = float("inf") if outer.high is None else outer.high
        if inner.values is not None:
            return all(isinstance(v, (int, float)) and low <= v <= high for v in inner.values)
        inner_low = float("-inf") if inner.low is None else inner.low
        inner_high = float("inf") if inner.high is None else inner.high
        return low <= inner_low and inner_high <= high
    allowed = set(outer.values)
    if inner.values is not None:
        return set(inner.values) <= allowed
    # A range inside a set of values: only an integer range small enough to enumerate can be.
    if inner.low is None or inner.high is None or not float(inner.low).is_integer() \
            or not float(inner.high).is_integer() or inner.high - inner.low >= _MAX_ENUMERATED:
        return False
    return all(v in allowed for v in range(int(inner.low), int(inner.high) + 1))


def diff_models(old: ContractLike, new: ContractLike) -> ModelComparison:
    """Every client-visible change from ``old`` to ``new`` (two contracts of one model), classified."""
    return _Differ(old, new).run()


def served_changes(model: str, old: ServedSettings | None, new: ServedSettings | None) -> list[ContractChange]:
    """The served settings' changes of one model, each compatible: clients send and read the same tensors."""
    if old is None or new is None:
        return []
    out = []
    if old.instance_groups != new.instance_groups:
        out.append(ContractChange(model, "instance_group", "instance_group", None, list(old.instance_groups),
                                  list(new.instance_groups), False,
                                  f"instance_group {', '.join(old.instance_groups) or 'none'} -> "
                                  f"{', '.join(new.instance_groups) or 'none'}: how many instances serve it, which no "
                                  "request or response shows"))
    if (old.max_queue_delay_microseconds is None) != (new.max_queue_delay_microseconds is None):
        out.append(ContractChange(model, "dynamic_batching", "dynamic_batching", None,
                                  old.max_queue_delay_microseconds is not None,
                                  new.max_queue_delay_microseconds is not None, False,
                                  "dynamic batching turned " + ("on" if old.max_queue_delay_microseconds is None
                                                                else "off") + ": the server batches requests or not, "
                                  "which no request or response shows"))
        return out
    if old.max_queue_delay_microseconds != new.max_queue_delay_microseconds:
        out.append(ContractChange(model, "queue_delay", "dynamic_batching", None, old.max_queue_delay_microseconds,
                                  new.max_queue_delay_microseconds, False,
                                  f"max_queue_delay_microseconds {old.max_queue_delay_microseconds} -> "
                                  f"{new.max_queue_delay_microseconds}: how long a request may wait for a batch "
                                  "(latency), which no request or response shows"))
    if old.preferred_batch_size != new.preferred_batch_size:
        before, after = list(old.preferred_batch_size or ()), list(new.preferred_batch_size or ())
        out.append(ContractChange(model, "preferred_batch_size", "dynamic_batching", None, before, after, False,
                                  f"preferred_batch_size {before or '[] (none)'} -> {after or '[] (none)'}: the "
                                  "batches the server forms, which no request or response shows"))
    return out


def diff_repositories(old: Mapping[str, ContractLike], new: Mapping[str, ContractLike], *, old_label: str,
                      new_label: str, unknown: Iterable[UnknownFact] = (),
                      old_served: Mapping[str, ServedSettings] | None = None,
                      new_served: Mapping[str, ServedSettings] | None = None) -> ContractDiff:
    """The diff of two repositories given as model name -> contract; ``*_label`` name them as the user gave them.

    ``unknown`` adds facts the loader could not tell (e.g. a model without a version folder); ``*_served`` the
    models' served settings (compared where both sides give them, every change compatible).
    """
    changes: list[ContractChange] = []
    facts: list[UnknownFact] = list(unknown)
    changed: list[str] = []
    unchanged: list[str] = []
    for name in sorted(set(old) - set(new)):
        changes.append(ContractChange(name, "model_removed", "model", None, name, None, True,
                                      f"model '{name}' removed: every request to it is refused"))
    for name in sorted(set(new) - set(old)):
        changes.append(ContractChange(name, "model_added", "model", None, None, name, False,
                                      f"model '{name}' added"))
    for name in sorted(set(old) & set(new)):
        comparison = diff_models(old[name], new[name])
        served = served_changes(name, (old_served or {}).get(name), (new_served or {}).get(name))
        changes += [*comparison.changes, *served]
        facts += comparison.unknown
        (changed if comparison.changes or served else unchanged).append(name)
    return ContractDiff(
        old=old_label, new=new_label,
        changes=tuple(sorted(changes, key=ContractChange.sort_key)),
        unknown=tuple(sorted(set(facts), key=lambda u: (u.model, u.fact, u.why))),
        added=tuple(sorted(set(new) - set(old))), removed=tuple(sorted(set(old) - set(new))),
        changed=tuple(changed), unchanged=tuple(unchanged),
    )

