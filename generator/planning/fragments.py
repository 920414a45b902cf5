"""The one table of what a manifest's raw ``pbtxt`` fragment may set, per kind of model and per target backend.

Decided before :mod:`generator.planning.config` merges a fragment: which fields belong to the model (a wrong scheduler
would silently replace ours) and which settings the target's backend reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from generator.planning.options import TARGETS

__all__ = ["BACKEND_READS", "FRAGMENT_FIELDS", "FRAGMENT_REFUSALS", "BackendReads", "fragment_kind",
           "fragment_refusals"]


def fragment_kind(target: str, max_batch_size: int) -> str:
    """The kind of a planned model in :data:`FRAGMENT_FIELDS`: its target, and whether it batches."""
    return f"{target} model{' that batches' if max_batch_size > 0 else ' without batching'}"


#: The ModelConfig fields every model's raw ``pbtxt`` fragment may set: tuning, versions, warmup, metrics, agents
#: (``optimization`` and ``parameters`` then as far as the target's backend reads them: :data:`BACKEND_READS`).
_FRAGMENT_ANY_KIND = frozenset({
    "version_policy", "optimization", "instance_group", "default_model_filename", "metric_tags", "parameters",
    "model_warmup", "model_repository_agents", "response_cache", "model_metrics",
})


@dataclass(frozen=True, slots=True)
class BackendReads:
    """What one target's Triton backend reads of a config beyond core's fields (Triton 2.51 backends' sources)."""

    backend: str
    #: ModelConfig fields only this backend reads.
    fields: frozenset[str]
    #: ``optimization`` (ModelOptimizationPolicy) fields it reads.
    optimization: frozenset[str]
    #: ``parameters`` keys it reads.
    parameters: frozenset[str]
    #: ``optimization.execution_accelerators`` list -> accelerator names it knows (others fail the load).
    accelerators: dict[str, frozenset[str]]


#: Target -> what its backend reads: python_backend python_be.cc (ModelState), onnxruntime_backend onnxruntime.cc
#: (ModelState::ModelState, the execution accelerators, RegisterCustomOpsLibrary), tensorrt_backend model_state.cc
#: and instance_state.cc. Ensembles take no fragment: their ModelConfig comes from the manifest's maps alone.
BACKEND_READS: dict[str, BackendReads] = {
    "python": BackendReads("python", frozenset(), frozenset(),
                           frozenset({"EXECUTION_ENV_PATH", "FORCE_CPU_ONLY_INPUT_TENSORS"}), {}),
    "onnx": BackendReads(
        "onnxruntime", frozenset({"model_operations"}),
        frozenset({"graph", "execution_accelerators", "input_pinned_memory"}),
        frozenset({"execution_mode", "intra_op_thread_count", "inter_op_thread_count", "enable_mem_arena",
                   "enable_mem_pattern", "memory.enable_memory_arena_shrinkage",
                   "session.use_device_allocator_for_initializers", "cudnn_conv_algo_search", "gpu_mem_limit",
                   "arena_extend_strategy", "do_copy_in_default_stream"}),
        {"gpu_execution_accelerator": frozenset({"tensorrt", "cuda"}),
         "cpu_execution_accelerator": frozenset({"openvino"})}),
    "tensorrt": BackendReads(
        "tensorrt", frozenset({"cc_model_filenames"}),
        frozenset({"priority", "cuda", "eager_batching", "gather_kernel_buffer_threshold", "input_pinned_memory",
                   "output_pinned_memory"}),
        frozenset({"execution_context_allocation_strategy", "enable_multi_device", "multi_device_gpus",
                   "multi_device_per_rank_engines"}), {}),
}

#: The one table of what a manifest's raw ``pbtxt`` fragment may set, per kind of model gen-repo plans
#: (:func:`fragment_kind`: the target, and whether it batches). Every other ModelConfig field is refused, those
#: of a newer Triton included, with the reason in :data:`FRAGMENT_REFUSALS` (or that the table does not list it).
FRAGMENT_FIELDS: dict[str, frozenset[str]] = {
    fragment_kind(target, batch): _FRAGMENT_ANY_KIND | ({"dynamic_batching"} if batch else set())
    | BACKEND_READS[target].fields
    for target in TARGETS for batch in (1, 0)
}
#: Why a fragment may not set a field, for the fields refused on purpose.
FRAGMENT_REFUSALS = {
    "name": "it comes from the manifest (use name)",
    "platform": "it comes from the target (use target)",
    "backend": "it comes from the target (use target)",
    "runtime": "it names the backend's library or script, which comes from the target",
    "max_batch_size": "it comes from the plan (use max_batch_size or batching)",
    "input": "inputs come from the spec (use tensor_names to rename them)",
    "output": "outputs come from the spec (use tensor_names to rename them)",
    "batch_input": "it adds tensors the exported model does not take",
    "batch_output": "it changes outputs the spec describes",
    "dynamic_batching": "the model does not batch (max_batch_size 0), and Triton's dynamic batcher forms batches",
    "sequence_batching": "gen-repo plans stateless models: no sequence control inputs, reference data or smoke "
                         "checks exist for the sequence batcher (and it would replace the planned scheduler)",
    "ensemble_scheduling": "only an ensemble has steps; declare one under ensembles:, whose steps come from its maps",
    "cc_model_filenames": "it names TensorRT plans per compute capability: the tensorrt target only",
    "model_transaction_policy": "gen-repo's models answer each request once (the python target's model.py returns "
                                "one response per request; onnxruntime and TensorRT run one inference each), so a "
                                "decoupled policy contradicts them",
    "model_operations": "it loads custom operator libraries into ONNX Runtime: the onnx target only",
}
# Triton's scheduling_choice is a oneof: a fragment's sequence or ensemble scheduler would silently replace the
# planned dynamic batcher (MergeFrom keeps the last of a oneof), which is why the table decides before merging.


def fragment_refusals(fragment: Any, kind: str, target: str) -> list[str]:
    """One message per setting of the ModelConfig ``fragment`` that ``kind`` (of ``target``) may not have.

    Fields :data:`FRAGMENT_FIELDS` does not allow, and optimization settings, accelerators and parameters the
    target's backend does not read (:data:`BACKEND_READS`).
    """
    reads = BACKEND_READS[target]
    out = [(field.name, FRAGMENT_REFUSALS.get(field.name, "not a field a fragment may set for this kind of model"))
           for field, _ in fragment.ListFields() if field.name not in FRAGMENT_FIELDS[kind]]
    ignored = f"the {reads.backend} backend does not read it"
    out += [(f"optimization.{field.name}", ignored) for field, _ in fragment.optimization.ListFields()
            if field.name not in reads.optimization]
    if "execution_accelerators" in reads.optimization:
        for field, accelerators in fragment.optimization.execution_accelerators.ListFields():
            known = reads.accelerators.get(field.name, frozenset())
            out += [(f"optimization.execution_accelerators.{field.name}[{k}] {a.name!r}",
                     f"the {reads.backend} backend knows {', '.join(sorted(known)) or 'none'} there and fails the "
                     "load on another") for k, a in enumerate(accelerators) if a.name not in known]
    out += [(f"parameters[{key!r}]", f"{ignored} (it reads {', '.join(sorted(reads.parameters))})")
            for key in sorted(fragment.parameters) if key not in reads.parameters]
    return [f"pbtxt fragment may not set {what} ({kind}): {why}" for what, why in out]
