"""Ensemble rules: the scheduling config, steps resolved across every repository, versions, dependencies, wiring.

The wiring rules are :mod:`generator.triton.ensemble`'s (shared with ``plan``). Models named as loaded elsewhere
(``--external-model``) satisfy a step; their wiring is not checked.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from generator.lint.findings import ConfigFile
from generator.lint.folders import ModelFolder, Resolved
from generator.lint.layout import gen_repo_contract
from generator.lint.locator import FieldPath
from generator.triton.ensemble import Location, Step, StepModel, Wiring, WiringTensor, dims_compatible, wiring_problems
from generator.triton.proto import model_config_pb2 as mc

__all__ = ["check_ensemble_config", "check_ensembles"]

ENSEMBLE = "ensemble"
LATEST = -1


# ---------------------------------------------------------------------------- one config
def check_ensemble_config(cf: ConfigFile, resolved: Resolved) -> None:
    """ValidateModelConfig's ensemble pairing and ValidateEnsembleSchedulingConfig's structure, on one config."""
    config = cf.config
    is_ensemble = resolved.platform == ENSEMBLE
    if is_ensemble and resolved.backend:
        cf.add("ensemble-config", f"ensemble model sets backend '{resolved.backend}'; an ensemble has platform "
               "'ensemble' and no backend", ("backend",))
    if config.HasField("ensemble_scheduling") and not is_ensemble:
        cf.add("ensemble-config", "ensemble_scheduling is set but platform is not 'ensemble'", ("ensemble_scheduling",))
        return
    if not is_ensemble:
        return
    if not config.HasField("ensemble_scheduling"):
        cf.add("ensemble-config", "platform 'ensemble' needs ensemble_scheduling", ("platform",))
        return
    for field_name in ("instance_group", "model_warmup"):
        if len(getattr(config, field_name)):
            cf.add("ensemble-config", f"an ensemble cannot set {field_name}", (field_name,))
    if config.HasField("optimization"):
        cf.add("ensemble-config", "an ensemble cannot set optimization", ("optimization",))
    steps = config.ensemble_scheduling.step
    if not steps:
        cf.add("ensemble-config", "ensemble_scheduling has no step", ("ensemble_scheduling",))
    for index, step in enumerate(steps):
        where = ("ensemble_scheduling", 0, "step", index)
        if not step.model_name:
            cf.add("ensemble-config", f"ensemble step #{index} must specify model_name", where)
            continue
        for kind in ("input_map", "output_map"):
            if not getattr(step, kind):
                cf.add("ensemble-config", f"ensemble step #{index} ('{step.model_name}') needs {kind}",
                       (*where, "model_name"))


# ---------------------------------------------------------------------------- across models
def check_ensembles(models: Mapping[str, ModelFolder], external: frozenset[str] = frozenset()) -> None:
    """Every ensemble against the models its steps name (in any repository, or ``external``).

    Findings go to the ensemble's config. A name in two repositories is ``model-duplicate``'s finding, not repeated.
    """
    ensembles = {name: m for name, m in models.items()
                 if m.cf is not None and m.resolved is not None and m.resolved.platform == ENSEMBLE
                 and m.cf.config.HasField("ensemble_scheduling")}
    cycles = _cycle_members(ensembles)
    #: ensemble -> why Triton makes it decoupled ("" when it does not): inner ensembles first, as Triton loads them
    decoupled: dict[str, str] = {}
    for name in _inner_first(ensembles):
        folder = ensembles[name]
        assert folder.cf is not None
        cf = folder.cf
        steps = cf.config.ensemble_scheduling.step
        for index, step in enumerate(steps):
            where: FieldPath = ("ensemble_scheduling", 0, "step", index, "model_name")
            target = models.get(step.model_name)
            if not step.model_name or step.model_name in external:
                continue
            if target is None:
                cf.add("ensemble-model-missing", f"ensemble step #{index} uses model '{step.model_name}', which is in "
                       "none of the repositories (name models loaded from elsewhere with --external-model)", where)
            elif step.model_name in cycles.get(name, ()):
                cf.add("ensemble-cycle", f"ensemble step #{index} runs '{step.model_name}', which "
                       + ("is this ensemble itself" if step.model_name == name else
                          f"depends on '{name}' again ({cycles[name][step.model_name]})"), where)
            else:
                _check_step_version(cf, index, step, target)
        if any(f.rule == "ensemble-config" for f in cf.findings):
            continue  # Triton stops at the structure; the wiring of a malformed ensemble says nothing more
        steps_ok = all(s.model_name in models and models[s.model_name].cf is not None for s in steps)
        why = _wiring(cf, folder, models, None if not steps_ok or name in cycles else decoupled)
        if why is not None:
            decoupled[name] = why


def _inner_first(ensembles: Mapping[str, ModelFolder]) -> list[str]:
    """Every ensemble after the ensembles its steps run (depth first, by name; a cycle is broken where it closes).

    Iterative, so a deep nesting of ensembles cannot exhaust the interpreter's stack.
    """
    order: list[str] = []
    seen: set[str] = set()
    for root in sorted(ensembles):
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(ensembles[root].cf.config.ensemble_scheduling.step))]  # type: ignore[union-attr]
        while stack:
            name, steps = stack[-1]
            inner = next((s.model_name for s in steps if s.model_name in ensembles and s.model_name not in seen), None)
            if inner is None:
                order.append(name)
                stack.pop()
                continue
            seen.add(inner)
            stack.append((inner, iter(ensembles[inner].cf.config.ensemble_scheduling.step)))  # type: ignore[union-attr]
    return order


def _check_step_version(cf: ConfigFile, index: int, step: Any, target: ModelFolder) -> None:
    """CheckNode: a step's model_version must be -1 (latest) or a version its model loads (omitted means 0)."""
    if step.model_version == LATEST or target.cf is None:
        return
    if step.model_version not in target.loaded:
        given = "model_version is not set, which means version 0" if step.model_version == 0 else \
            f"model_version is {step.model_version}"
        loaded = ", ".join(str(v) for v in target.loaded) or "none"
        path: FieldPath = ("ensemble_scheduling", 0, "step", index,
                           "model_version" if step.model_version else "model_name")
        cf.add("ensemble-step-version", f"ensemble step #{index}: {given}, but '{step.model_name}' loads version(s) "
               f"{loaded} (use model_version: -1 for the latest)", path)


def _cycle_members(ensembles: Mapping[str, ModelFolder]) -> dict[str, dict[str, str]]:
    """For each ensemble on a cycle: step model -> the cycle it closes, as ``a -> b -> a``."""
    edges = {name: [s.model_name for s in m.cf.config.ensemble_scheduling.step if s.model_name in ensembles]
             for name, m in ensembles.items() if m.cf is not None}
    out: dict[str, dict[str, str]] = {}
    for start in sorted(edges):
        for first in edges[start]:
            path = _path(edges, first, start)
            if path is not None:
                out.setdefault(start, {})[first] = " -> ".join([start, *path])
    return out


def _path(edges: Mapping[str, list[str]], source: str, target: str) -> list[str] | None:
    """Shortest path source..target through ``edges`` (breadth first), or None."""
    previous: dict[str, str | None] = {source: None}
    queue = deque([source])
    while queue:
        node = queue.popleft()
        if node == target:
            path = [node]
            while previous[path[-1]] is not None:
                path.append(previous[path[-1]])  # type: ignore[arg-type]
            return path[::-1]
        for nxt in edges.get(node, ()):
            if nxt not in previous:
                previous[nxt] = node
                queue.append(nxt)
    return None


# --------------------------------------------------------------------- wiring (generator.triton.ensemble's rules)
def _wiring_io(io: mc.ModelInput | mc.ModelOutput, shapes: Mapping[str, Any] | None = None) -> WiringTensor:
    """A config tensor for the wiring rules (Triton compares an ensemble's reshape when it has one)."""
    dims = io.reshape.shape if io.HasField("reshape") and not shapes else io.dims
    entry = (shapes or {}).get(io.name) or {}
    low, high = entry.get("min_shape"), entry.get("max_shape")
    return WiringTensor(io.name, mc.DataType.Name(io.data_type), tuple(dims), bool(getattr(io, "optional", False)),
                    tuple(low) if isinstance(low, list) else None, tuple(high) if isinstance(high, list) else None)


def _step_model(folder: ModelFolder) -> StepModel:
    """A step model from its config, with shape ranges from its newest gen-repo contract when there is one."""
    assert folder.cf is not None
    config = folder.cf.config
    shapes: dict[str, Any] = {}
    contract = gen_repo_contract(folder, folder.loaded[-1]) if folder.loaded else None
    if contract is not None:
        with contextlib.suppress(TypeError, AttributeError, KeyError):
            shapes = {t["name"]: t for t in (*contract["inputs"], *contract["outputs"])}
    return StepModel(config.name or folder.name, config.max_batch_size,
                     tuple(_wiring_io(io, shapes) for io in config.input),
                     tuple(_wiring_io(io, shapes) for io in config.output))


def _wiring_path(cf: ConfigFile, where: Location) -> FieldPath:
    """The config field a wiring location points at."""
    if not where:
        return ("ensemble_scheduling",)
    head = where[0]
    if head in ("input", "output"):
        return (str(head), where[1], "name")
    if head == "max_batch_size":
        return ("max_batch_size",)
    step: FieldPath = ("ensemble_scheduling", 0, "step", where[1])
    if len(where) == 2:
        return step
    if where[2] == "model_name":
        return (*step, "model_name")
    return cf.entry((*step, str(where[2])), str(where[3]), "key")


def _wiring(cf: ConfigFile, folder: ModelFolder, models: Mapping[str, ModelFolder],
            decoupled: Mapping[str, str] | None) -> str | None:
    """generator.triton.ensemble's wiring rules, then the decoupled-origin, response-cache and step-batching checks.

    The latter run when the wiring passes and ``decoupled`` knows the inner ensembles.

    Returns why Triton makes the ensemble decoupled ("" when it does not; None when undecided): ValidateEnsembleConfig
    sets ``decoupled`` on the ensemble's loaded config when a decoupled step's outputs reach its walk, whatever its
    config.pbtxt says, and an outer ensemble reads that loaded config (``ensemble_utils.cc``).
    """
    config = cf.config
    steps = config.ensemble_scheduling.step
    # Each distinct step model once: a 10,000-step chain of one model would read its contract 10,000 times.
    step_models = {name: _step_model(models[name]) for name in dict.fromkeys(s.model_name for s in steps)
                   if name in models and models[name].cf is not None and name != folder.name}
    wiring = Wiring(folder.name, config.max_batch_size, tuple(_wiring_io(io) for io in config.input),
                    tuple(_wiring_io(io) for io in config.output),
                    tuple(Step(s.model_name, dict(s.input_map), dict(s.output_map)) for s in steps))
    problems = [p for p in wiring_problems(wiring, step_models)
                if p.rule not in ("ensemble-config", "ensemble-model-missing")]
    for problem in problems:
        cf.add(problem.rule, problem.message, _wiring_path(cf, problem.where))
    if decoupled is None or any(p.rule != "ensemble-shape-range" for p in problems):
        return None
    origins = {s.model_name: _decoupled_origin(s.model_name, models, decoupled) for s in steps}
    reached = _check_decoupled(cf, wiring, {name: bool(why) for name, why in origins.items()})
    _check_step_batching(cf, wiring, step_models)
    if reached is None:
        return None
    why = f"step {reached[0]!r} {origins[reached[0]]}" if reached else ""
    if why and config.response_cache.enable and not config.model_transaction_policy.decoupled:
        cf.add("response-cache", f"response_cache is enabled on an ensemble that Triton makes decoupled (its {why}); "
               "Triton does not support a response cache on a decoupled model", ("response_cache",))
    return why


def _decoupled_origin(name: str, models: Mapping[str, ModelFolder], ensembles: Mapping[str, str]) -> str:
    """Why step model ``name`` is decoupled ("" when it is not): its own policy, or an ensemble made decoupled."""
    if name in ensembles:
        return f"is an ensemble Triton makes decoupled ({ensembles[name]})" if ensembles[name] else ""
    config = models[name].config
    is_ensemble = models[name].resolved is not None and models[name].resolved.platform == ENSEMBLE  # type: ignore[union-attr]
    return "is decoupled" if config is not None and not is_ensemble and config.model_transaction_policy.decoupled \
        else ""


@dataclass(eq=False)
class _Node:
    """An ensemble tensor in ValidateEnsembleConfig's graph (or a step's symbolic sibling, or the output sink)."""

    where: FieldPath
    decoupled: bool = False
    model: str = ""  #: the step model that writes it
    label: int = 0
    visited: bool = False
    prev: list[_Node] = field(default_factory=list)
    next: list[_Node] = field(default_factory=list)
    sibling: _Node | None = None


def _check_decoupled(cf: ConfigFile, wiring: Wiring, decoupled: Mapping[str, bool]) -> list[str] | None:
    """ValidateEnsembleConfig's walk: tensors carry a label per decoupled origin; a consumer of mixed labels is refused.

    A decoupled step's outputs get a new label; anything else inherits its inputs' one. Tensors from an ensemble input
    and from a decoupled step (or from two decoupled steps) may not meet in one step, nor in the ensemble's outputs.
    Returns the decoupled steps the walk reached, in order (Triton then makes the ensemble decoupled), or None when
    it refused the ensemble.
    """
    tensors: dict[str, _Node] = {}
    for i, io in enumerate(wiring.inputs):
        tensors.setdefault(io.name, _Node(("input", i, "name")))
    sink = _Node(("output",))
    for i, io in enumerate(wiring.outputs):
        node = tensors.setdefault(io.name, _Node(("output", i, "name")))
        sink.prev.append(node)
        node.next.append(sink)
    for j, step in enumerate(wiring.steps):
        step_path: FieldPath = ("ensemble_scheduling", 0, "step", j, "model_name")
        for tensor in step.input_map.values():
            tensors.setdefault(tensor, _Node(step_path))
        sibling = _Node(step_path)
        for tensor in step.output_map.values():
            node = tensors.setdefault(tensor, _Node(step_path))
            node.sibling, node.where = sibling, step_path  # located at its producer
        for tensor in step.output_map.values():
            node = tensors[tensor]
            node.decoupled, node.model = decoupled.get(step.model_name, False), step.model_name
            for source in step.input_map.values():
                node.prev.append(tensors[source])
                tensors[source].next.append(node)
    reached: list[str] = []
    queue = deque(tensors[io.name] for io in wiring.inputs)
    for node in queue:
        node.visited = True
    while queue:
        current = queue.popleft()
        for nxt in current.next:
            if nxt.visited or not all(p.visited for p in nxt.prev):
                continue
            label = nxt.prev[0].label
            if any(p.label != label for p in nxt.prev):
                what = "the ensemble's outputs come" if nxt is sink else "a step is fed by tensors that come"
                cf.add("ensemble-decoupled", f"{what} from different decoupled models (or from a decoupled model and "
                       "elsewhere); Triton refuses that", nxt.where)
                return None
            if nxt.sibling is not None and nxt.sibling.visited:
                nxt.label = nxt.sibling.label
            else:
                if nxt.decoupled:
                    reached.append(nxt.model)
                nxt.label = len(reached) if nxt.decoupled else label
                if nxt.sibling is not None:
                    nxt.sibling.label, nxt.sibling.visited = nxt.label, True
            nxt.visited = True
            queue.append(nxt)
    return reached


def _check_step_batching(cf: ConfigFile, wiring: Wiring, step_models: Mapping[str, StepModel]) -> None:
    """A non-batching step fed batched tensors in a batching ensemble: only batch-1 requests pass its shape check."""
    if wiring.max_batch_size <= 0:
        return
    batched: dict[str, tuple[int, ...]] = {io.name: io.dims for io in wiring.inputs}
    for j, step in enumerate(wiring.steps):
        model = step_models.get(step.model_name)
        if model is None:
            continue
        if model.max_batch_size > 0:
            outputs = {io.name: io.dims for io in model.outputs}
            batched.update({tensor: outputs[key] for key, tensor in step.output_map.items() if key in outputs})
            continue
        inputs = {io.name: io for io in model.inputs}
        for key, tensor in sorted(step.input_map.items()):
            if tensor in batched and key in inputs and not _accepts_batch(inputs[key].dims, batched[tensor]):
                cf.add("ensemble-step-batching", f"step {j} ('{step.model_name}', max_batch_size 0) takes "
                       f"'{tensor}' with dims {list(inputs[key].dims)}, but the ensemble batches it "
                       f"({[-1, *batched[tensor]]}): requests with batch > 1 fail its shape check",
                       cf.entry(("ensemble_scheduling", 0, "step", j, "input_map"), key, "key"))


def _accepts_batch(step_dims: Sequence[int], batched_dims: Sequence[int]) -> bool:
    return dims_compatible(step_dims, False, [-1, *batched_dims], False)
