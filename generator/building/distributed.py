"""Distributed builds on an existing Ray cluster (``gen-repo build --ray auto|ADDRESS``).

Ray only schedules (one export task per model, one engine task per compute capability); the driver caches the files
under the local build's keys, so the result is byte-identical (docs/release-pipelines.md).
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import pickle
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from generator.building.results import Progress
from generator.errors import GenRepoError, Problem, one_line
from generator.planning.plan import ModelPlan
from generator.repository.cache import BuildCache

#: Custom Ray resource a node offers per GPU of a compute capability: ``cc_9.0`` for an H100/H200.
CC_RESOURCE_PREFIX = "cc_"
#: How often Ray re-runs a task whose worker or node died, or that raised a system error.
DEFAULT_MAX_RETRIES = 3
#: A pending task no alive node can run (resources gone, e.g. the only GPU node died) fails after this long.
DEFAULT_INFEASIBLE_TIMEOUT_S = 60.0
#: Exceptions raised by a task that Ray retries (a node's disk or memory), unlike model problems.
RETRYABLE_EXCEPTIONS: tuple[type[BaseException], ...] = (OSError, MemoryError)
INSTALL_HINT = "pip install 'gen-repo[ray]' (Ray is needed only for --ray)"



def cc_resource(compute_capability: str) -> str:
    """Return the custom resource name of a compute capability (``"9.0"`` -> ``"cc_9.0"``)."""
    return f"{CC_RESOURCE_PREFIX}{compute_capability}"


@dataclass(frozen=True, slots=True)
class TaskOutput:
    """What a task sends back: artifact bytes by relative path, notes, problems and where it ran."""

    files: dict[str, bytes] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
    node: str = ""
    tools: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TaskDemand:
    """Ray resources one task asks for (``ray.remote(...).options(**as_options())``)."""

    num_cpus: float = 1.0
    num_gpus: float = 0.0
    resources: tuple[tuple[str, float], ...] = ()

    def as_options(self) -> dict[str, Any]:
        """Keyword arguments for ``RemoteFunction.options``."""
        options: dict[str, Any] = {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus}
        if self.resources:
            options["resources"] = dict(self.resources)
        return options

    def as_dict(self) -> dict[str, float]:
        """Return the demand in Ray's resource names (``CPU``, ``GPU``, custom), zeros left out."""
        demand = {"CPU": self.num_cpus, "GPU": self.num_gpus, **dict(self.resources)}
        return {name: amount for name, amount in demand.items() if amount}

    def describe(self) -> str:
        """Return the demand as ``{"CPU": 1, "GPU": 1, "cc_9.0": 1}`` for messages."""
        return "{" + ", ".join(f'"{k}": {v:g}' for k, v in sorted(self.as_dict().items())) + "}"


def export_demand() -> TaskDemand:
    """ONNX export, checks and reference data run on one CPU of any node."""
    return TaskDemand(num_cpus=1.0)


def engine_demand(tensorrt_module: str, compute_capability: str | None) -> TaskDemand:
    """A TensorRT engine build: a GPU, of the given compute capability when the plan is for one.

    TensorRT-RTX builds on a CPU (it exercises the build path; its engines are not Triton plans): no GPU asked.
    """
    if compute_capability is not None:
        return TaskDemand(num_cpus=1.0, num_gpus=1.0, resources=((cc_resource(compute_capability), 1.0),))
    if tensorrt_module == "tensorrt":
        return TaskDemand(num_cpus=1.0, num_gpus=1.0)
    return TaskDemand(num_cpus=1.0)


def engine_plan(model: ModelPlan) -> dict[str, str | None]:
    """Engine file -> compute capability it must be built on (None: any GPU, or a CPU for TensorRT-RTX)."""
    if model.config.cc_model_filenames:
        return {name: cc for cc, name in sorted(model.config.cc_model_filenames.items())}
    return {model.config.default_model_filename or "model.plan": None}


# -- Tasks (run on cluster nodes; module-level so workers import them by reference) ----------------------------------
def _node_name() -> str:
    import socket

    try:
        import ray

        return f"{socket.gethostname()}/{ray.get_runtime_context().get_node_id()[:12]}"
    except Exception:  # outside Ray (tests call the tasks directly)
        return socket.gethostname()


def _pack(model: ModelPlan, options: Any) -> bytes:
    """Task arguments as bytes (a ModelPlan pickles its ModelConfig as bytes, see ``ModelPlan.__reduce__``)."""
    return pickle.dumps((model, options), protocol=pickle.HIGHEST_PROTOCOL)


def _unpack(payload: bytes) -> tuple[ModelPlan, Any]:
    model, options = pickle.loads(payload)
    return model, options


def export_task(payload: bytes) -> TaskOutput:
    """Export, check and make reference data for a model on this node; files come back as bytes.

    ``payload`` is ``_pack(model_plan, build_options)``. For the tensorrt target this is the CPU half (``model.onnx``
    and ``gen_repo/*``); engines are built by :func:`engine_task`.
    """
    from generator.building.artifacts import build_model_artifacts
    from generator.building.results import tool_versions
    from generator.contracts.request_schema import contract_files
    from generator.planning.model_files import contract_text
    from generator.planning.plan import with_output_ranges

    model, options = _unpack(payload)
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    node = _node_name()
    staged = replace(model, target="onnx") if model.target == "tensorrt" else model
    with tempfile.TemporaryDirectory(prefix="gen-repo-ray-") as tmp:
        try:
            artifacts = build_model_artifacts(staged, options, Path(tmp))
        except GenRepoError as error:
            raw = getattr(error, "raw", None)
            if isinstance(raw, RETRYABLE_EXCEPTIONS):
                raise raw from None  # the node's disk or memory: Ray retries the task (retry_exceptions)
            return TaskOutput(problems=tuple(error.problems), node=node)
        files = {name: (artifacts.folder / name).read_bytes() for name in artifacts.files}
    if model.target == "tensorrt":  # the contract (and its request schema) of the tensorrt model, not the onnx one
        text = contract_text(with_output_ranges(model, artifacts.output_ranges), artifacts.values)
        files.update({name: data.encode("utf-8") for name, data in contract_files(text).items()})
    return TaskOutput(files, tuple(artifacts.notes), (), node, tool_versions())


def engine_task(payload: bytes, onnx_bytes: bytes, filename: str, compute_capability: str | None) -> TaskOutput:
    """Build one TensorRT engine from ``onnx_bytes`` on this node (Ray has set ``CUDA_VISIBLE_DEVICES``).

    ``payload`` is ``_pack(model_plan, build_options)``.
    """
    from generator.building.export.tensorrt import engine_bytes, profile_shapes, tensorrt_build_options

    model, options = _unpack(payload)
    node = _node_name()
    with tempfile.TemporaryDirectory(prefix="gen-repo-ray-") as tmp:
        onnx_path = Path(tmp) / "model.onnx"
        onnx_path.write_bytes(onnx_bytes)
        try:
            plan_bytes, summary = engine_bytes(
                options.tensorrt_module, str(onnx_path), [profile_shapes(p) for p in model.engine_profiles()],
                tensorrt_build_options(options, None),
            )
        except GenRepoError as error:
            return TaskOutput(problems=tuple(error.problems), node=node)
        except RETRYABLE_EXCEPTIONS:
            raise
        except Exception as error:
            message = f"{filename}: engine build failed on {node}: {type(error).__name__}: {error}"
            return TaskOutput(problems=(Problem(str(model.spec_file), model.spec_pointer, message),), node=node)
    built_for = summary.get("compute_capability") or "none (no GPU)"
    if compute_capability is not None and summary.get("compute_capability") not in (None, compute_capability):
        message = (
            f"{filename}: node {node} offers resource {cc_resource(compute_capability)} but its GPU has compute "
            f"capability {summary.get('compute_capability')}; fix the node's --resources"
        )
        return TaskOutput(problems=(Problem(str(model.spec_file), model.spec_pointer, message),), node=node)
    flavor = f"{summary.get('flavor', '?')} {summary.get('trt_version', '?')}"
    note = f"{filename}: {flavor} for compute capability {built_for}"
    return TaskOutput({filename: plan_bytes}, (f"{note}, {len(plan_bytes)} bytes, built on {node}",), (), node)


# -- The driver ------------------------------------------------------------------------------------------------------
def _import_ray() -> Any:
    try:
        import ray
    except ImportError as error:
        raise GenRepoError([Problem("<ray>", "", f"--ray needs Ray: {INSTALL_HINT} ({error})")]) from error
    return ray


def _loopback_host(address: str) -> str | None:
    """The address's host when it is a loopback IP (the driver then registers on it too), else None."""
    host = address.removeprefix("ray://").rsplit(":", 1)[0].strip("[]")
    try:
        return host if ipaddress.ip_address(host).is_loopback else None
    except ValueError:
        return None


def connect(address: str | None) -> bool:
    """Connect this process to the Ray cluster at ``address`` (``auto``: the running one); True if we connected.

    Worker output is not streamed to the driver (it would mix into ``--json`` output); a cluster given by a loopback
    address is joined on that address, so the driver does not announce another interface of the machine.
    """
    ray = _import_ray()
    if ray.is_initialized():
        return False
    target = address or "auto"
    kwargs: dict[str, Any] = {"address": target, "log_to_driver": False, "logging_level": logging.WARNING}
    host = _loopback_host(target)
    if host is not None and not target.startswith("ray://"):
        kwargs["_node_ip_address"] = host
    try:
        ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise GenRepoError(
            [Problem(f"ray:{target}", "", f"cannot connect to the Ray cluster: {type(error).__name__}: {error}")]
        ) from error
    return True


def _alive_nodes(ray: Any) -> list[dict[str, float]]:
    return [dict(node.get("Resources", {})) for node in ray.nodes() if node.get("Alive")]


def _feasible(demand: TaskDemand, nodes: Sequence[Mapping[str, float]]) -> bool:
    """Whether one alive node has (in total) every resource the task asks for."""
    wanted = demand.as_dict()
    return any(all(node.get(name, 0.0) >= amount for name, amount in wanted.items()) for node in nodes)


@dataclass(slots=True)
class _Pending:
    """One submitted task: whose, what kind, what it asked for, since when it could not run anywhere."""

    model: str
    kind: str  # "export" or the engine file name
    demand: TaskDemand
    compute_capability: str | None = None
    infeasible_since: float | None = None


@dataclass(slots=True)
class _ModelState:
    model: ModelPlan
    started: float
    files: dict[str, bytes] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    engines_left: int = 0


def run_models_on_ray(
    models: Sequence[ModelPlan],
    options: Any,
    cache_root: Path,
    keys: Mapping[str, str],
    progress: Progress,
    tensorrt: Any = None,
    *,
    address: str | None = None,
    max_retries: int = DEFAULT_MAX_RETRIES,
    infeasible_timeout_s: float = DEFAULT_INFEASIBLE_TIMEOUT_S,
    poll_s: float = 1.0,
) -> list[Any]:
    """Build ``models`` (the cache misses) on the Ray cluster; return one ``ModelResult`` per model, in order.

    Each built model's files go into the local build cache under ``keys[model]``, which
    :func:`generator.building.pipeline.build_repository` stages from; ``tensorrt`` is for notes only.
    """
    from generator.building.results import ModelResult, tool_versions

    cache = BuildCache(cache_root)
    results: dict[str, ModelResult] = {}
    todo = list(models)
    if todo:
        ray = _import_ray()
        # Ray's driver prints cluster messages ("Task ... failed, retrying") on stdout from a background thread:
        # they are diagnostics, and stdout may carry `--json` output, so they go to stderr while Ray runs.
        with contextlib.redirect_stdout(sys.stderr):
            connected = connect(address or getattr(options, "ray_address", None))
            try:
                for result in _run(ray, todo, options, cache, keys, progress, tool_versions(), max_retries,
                                   infeasible_timeout_s, poll_s):
                    results[result.name] = result
            finally:
                if connected:
                    ray.shutdown()
    return [results[m.name] for m in todo]


def _run(
    ray: Any,
    models: Sequence[ModelPlan],
    options: Any,
    cache: BuildCache,
    keys: Mapping[str, str],
    progress: Progress,
    driver_tools: Mapping[str, str],
    max_retries: int,
    infeasible_timeout_s: float,
    poll_s: float,
) -> list[Any]:
    from generator.building.results import BuildEvent, ModelResult

    remote_options = {"max_retries": max_retries, "retry_exceptions": list(RETRYABLE_EXCEPTIONS)}
    export_remote = ray.remote(export_task)
    engine_remote = ray.remote(engine_task)
    states = {m.name: _ModelState(m, time.monotonic()) for m in models}
    pending: dict[Any, _Pending] = {}
    done: list[ModelResult] = []

    def fail(state: _ModelState, message: str) -> None:
        state.problems.append(Problem(str(state.model.spec_file), state.model.spec_pointer, message))

    def finish(state: _ModelState) -> None:
        model = state.model
        key = keys[model.name]
        seconds = time.monotonic() - state.started
        if not state.problems:
            try:
                cache.put(key, state.files)
            except (GenRepoError, OSError) as error:
                fail(state, f"cannot store the artifacts in the build cache: {error}")
        if state.problems:
            result = ModelResult(model.name, model.target, "failed", seconds, key, (), tuple(state.problems))
            progress(BuildEvent(model.name, "failed", "; ".join(p.message for p in state.problems)))
        else:
            result = ModelResult(model.name, model.target, "built", seconds, key, tuple(state.notes))
            progress(BuildEvent(model.name, "built", f"built on the Ray cluster in {seconds:.1f} s"))
        done.append(result)

    def submit(remote: Any, task: _Pending, name: str, *args: Any) -> None:
        ref = remote.options(name=name, **remote_options, **task.demand.as_options()).remote(*args)
        pending[ref] = task

    nodes = _alive_nodes(ray)
    for model in models:
        demand = export_demand()
        if not _feasible(demand, nodes):
            fail(states[model.name], f"no node of the Ray cluster offers {demand.describe()} for the export")
            finish(states[model.name])
            continue
        progress(BuildEvent(model.name, "queued", f"export task on the Ray cluster {demand.describe()}"))
        submit(export_remote, _Pending(model.name, "export", demand), f"gen-repo export {model.name}",
               _pack(model, options))

    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=poll_s)
        if not ready:
            _check_feasible(ray, pending, states, infeasible_timeout_s, fail, finish)
            continue
        ref = ready[0]
        task = pending.pop(ref)
        state = states[task.model]
        try:
            output: TaskOutput = ray.get(ref)
        except ray.exceptions.RayError as error:
            fail(state, f"{task.kind} task failed on the Ray cluster after {max_retries} retries: "
                        f"{type(error).__name__}: {one_line(error)}")
            output = TaskOutput()
        if state.problems or output.problems:
            state.problems.extend(output.problems)
            _cancel_model(ray, pending, task.model)
            if not any(t.model == task.model for t in pending.values()):
                finish(state)
            continue
        state.notes.extend(output.notes)
        if task.kind == "export":
            if output.tools and dict(output.tools) != dict(driver_tools):
                differ = sorted(k for k in set(output.tools) | set(driver_tools)
                                if output.tools.get(k) != driver_tools.get(k))
                fail(state, f"node {output.node} has other tool versions than this machine ({', '.join(differ)}); "
                            "its artifacts would not match the cache key: install the same versions on every node")
                finish(state)
                continue
            state.notes.append(f"exported on {output.node}")
            if state.model.target != "tensorrt":
                state.files.update(output.files)
                finish(state)
                continue
            onnx_ref = ray.put(output.files.pop("model.onnx"))
            state.files.update(output.files)
            engines = engine_plan(state.model)
            state.engines_left = len(engines)
            nodes = _alive_nodes(ray)
            for filename, cc in engines.items():
                demand = engine_demand(options.tensorrt_module, cc)
                if not _feasible(demand, nodes):
                    fail(state, f"{filename}: no node of the Ray cluster offers {demand.describe()}; start one with "
                                f"`ray start --address=HEAD --num-gpus=1 --resources='{{\"{cc_resource(cc or '9.0')}\""
                                ": 1}'` on a machine with such a GPU")
                    continue
                progress(BuildEvent(state.model.name, "tensorrt", f"{filename}: engine task {demand.describe()}"))
                submit(engine_remote, _Pending(state.model.name, filename, demand, cc),
                       f"gen-repo engine {state.model.name} {filename}", _pack(state.model, options), onnx_ref,
                       filename, cc)
            if state.problems:
                _cancel_model(ray, pending, task.model)
                finish(state)
            continue
        state.files.update(output.files)
        state.engines_left -= 1
        if state.engines_left == 0:
            finish(state)
    return done


def _check_feasible(
    ray: Any,
    pending: dict[Any, _Pending],
    states: Mapping[str, _ModelState],
    timeout_s: float,
    fail: Callable[[_ModelState, str], None],
    finish: Callable[[_ModelState], None],
) -> None:
    """Fail the models whose pending tasks no alive node could run for ``timeout_s`` (they would wait forever)."""
    nodes = _alive_nodes(ray)
    now = time.monotonic()
    for ref, task in list(pending.items()):
        if _feasible(task.demand, nodes):
            task.infeasible_since = None
            continue
        if task.infeasible_since is None:
            task.infeasible_since = now
            continue
        if now - task.infeasible_since < timeout_s or ref not in pending:
            continue
        state = states[task.model]
        fail(state, f"{task.kind} task waited {timeout_s:g} s for a node offering {task.demand.describe()}; "
                    "no alive node of the Ray cluster has it any more")
        _cancel_model(ray, pending, task.model)
        finish(state)


def _cancel_model(ray: Any, pending: dict[Any, _Pending], model: str) -> None:
    for ref in [r for r, t in pending.items() if t.model == model]:
        pending.pop(ref)
        try:
            ray.cancel(ref, force=True)
        except Exception:  # already finished or its node is gone: nothing left to cancel
            continue


__all__ = ["TaskDemand", "TaskOutput", "cc_resource", "connect", "engine_demand", "export_demand", "run_models_on_ray"]
