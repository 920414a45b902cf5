"""The one table of what a manifest's raw ``pbtxt`` fragment may set, per kind of model, and why the rest is refused.

:mod:`generator.planning.config` merges a fragment last; this module decides, before the merge, which of its fields
belong to the model (Triton's ``scheduling_choice`` is a oneof, so a wrong scheduler would silently replace ours).
"""

from __future__ import annotations

from typing import Any

from generator.planning.options import TARGETS

__all__ = ["FRAGMENT_FIELDS", "FRAGMENT_REFUSALS", "fragment_kind", "fragment_refusals"]


def fragment_kind(target: str, max_batch_size: int) -> str:
    """The kind of a planned model in :data:`FRAGMENT_FIELDS`: its target, and whether it batches."""
    return f"{target} model{' that batches' if max_batch_size > 0 else ' without batching'}"


#: The ModelConfig fields every model's raw ``pbtxt`` fragment may set: tuning, versions, warmup, metrics, agents.
_FRAGMENT_ANY_KIND = frozenset({
    "version_policy", "optimization", "instance_group", "default_model_filename", "metric_tags", "parameters",
    "model_warmup", "model_operations", "model_transaction_policy", "model_repository_agents", "response_cache",
    "model_metrics",
})
#: The one table of what a manifest's raw ``pbtxt`` fragment may set, per kind of model gen-repo plans
#: (:func:`fragment_kind`: the target, and whether it batches). Every other ModelConfig field is refused, those
#: of a newer Triton included, with the reason in :data:`FRAGMENT_REFUSALS` (or that the table does not list it).
#: Ensembles take no fragment: their ModelConfig comes from the manifest's maps alone.
FRAGMENT_FIELDS: dict[str, frozenset[str]] = {
    fragment_kind(target, batch): _FRAGMENT_ANY_KIND | ({"dynamic_batching"} if batch else set())
    | ({"cc_model_filenames"} if target == "tensorrt" else set())
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
}
# Triton's scheduling_choice is a oneof: a fragment's sequence or ensemble scheduler would silently replace the
# planned dynamic batcher (MergeFrom keeps the last of a oneof), which is why the table decides before merging.


def fragment_refusals(fragment: Any, kind: str) -> list[str]:
    """One message per field the ModelConfig ``fragment`` sets that :data:`FRAGMENT_FIELDS` does not allow ``kind``."""
    return [f"pbtxt fragment may not set {field.name} ({kind}): "
            f"{FRAGMENT_REFUSALS.get(field.name, 'not a field a fragment may set for this kind of model')}"
            for field, _ in fragment.ListFields() if field.name not in FRAGMENT_FIELDS[kind]]
