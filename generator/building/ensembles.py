"""An ensemble's artifacts: its contract and reference data, made by chaining the built steps in onnxruntime.

The reference inputs go through the steps' ONNX files in order, as Triton would run them; with ``--allow-code`` and a
factory for the whole pipeline, torch must agree on every case.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from generator.building.artifacts import StageFailed
from generator.building.factories import import_factory
from generator.building.reference import CASE_SHAPES, reference_inputs
from generator.contracts.reference_data import ReferenceCase, write_reference
from generator.contracts.request_schema import REQUEST_SCHEMA_FILE, write_contract_files
from generator.errors import GenRepoError, Problem
from generator.json_reader import read_json
from generator.planning.compare import compare_output
from generator.planning.contract import to_model, to_request
from generator.planning.ensemble_plan import EnsemblePlan
from generator.planning.model_files import CONTRACT_FILE, contract_text
from generator.planning.options import BuildOptions
from generator.planning.plan import ModelPlan
from generator.planning.values import ValueDomain

__all__ = ["ENSEMBLE_FILES", "build_ensemble_artifacts"]

#: What an ensemble's version folder holds (Triton needs the folder; gen_repo/ is ignored by it).
ENSEMBLE_FILES = (CONTRACT_FILE, REQUEST_SCHEMA_FILE, "gen_repo/reference.json", "gen_repo/reference.npz")


def build_ensemble_artifacts(
    ensemble: EnsemblePlan,
    steps: Mapping[str, ModelPlan],
    step_folders: Mapping[str, Path],
    options: BuildOptions,
    workdir: Path,
) -> list[str]:
    """Write the ensemble's contract and reference data into ``workdir``; return notes. Raise StageFailed.

    ``step_folders`` are the built step models' artifact folders (their cache entries).
    """
    where = Problem(str(ensemble.manifest_file), ensemble.manifest_pointer, "")
    notes: list[str] = []
    stage = "reference"
    try:
        domains = _step_domains(ensemble, step_folders)
        names = sorted({ensemble.steps[j].model_name for j in ensemble.step_order})
        without_onnx = [n for n in names if not (step_folders[n] / "model.onnx").is_file()]
        inputs = [(case, reference_inputs(ensemble.inputs, model_name=ensemble.name, case=case, domains=domains))
                  for case in CASE_SHAPES]
        cases = [ReferenceCase(case, int(next(iter(a.values())).shape[0]) if ensemble.max_batch_size > 0 else None,
                               a) for case, a in inputs]
        if without_onnx:
            # TensorRT steps keep only their engines: the whole torch pipeline gives the reference instead.
            if ensemble.source is None:
                raise GenRepoError([Problem(where.file, where.pointer, f"step model(s) {without_onnx} keep no "
                                            "model.onnx to chain (target tensorrt): give the ensemble a source: "
                                            "{factory: module:callable} for the whole pipeline, whose outputs "
                                            "become the reference")])
            module = _pipeline(ensemble, options, where)
            for case in cases:
                case.outputs = _torch_outputs(ensemble, module, case.inputs)
            notes.append(f"reference outputs: the torch pipeline {ensemble.source.factory} (steps {without_onnx} "
                         "keep no ONNX to chain)")
        else:
            runners = {name: _runner(steps[name], step_folders[name]) for name in names}
            for case in cases:
                case.outputs = _chain(ensemble, steps, runners, case.inputs)
            notes.append("reference outputs: the steps' ONNX chained in onnxruntime, "
                         + " -> ".join(ensemble.steps[j].model_name for j in ensemble.step_order))
            if ensemble.source is not None:
                stage = "check"
                notes.append(_check_with_torch(ensemble, cases, options, where))
        write_contract_files(workdir, contract_text(ensemble, domains))
        write_reference(workdir / "gen_repo", cases, ensemble.compare)
    except StageFailed:
        raise
    except GenRepoError as error:
        raise StageFailed(stage, error.problems) from error
    except Exception as error:  # onnxruntime or user code: still this ensemble's failure, with the stage
        raise StageFailed(stage, [Problem(where.file, where.pointer, f"{stage} failed: {type(error).__name__}: "
                                          f"{error}")], error) from error
    return notes


def _step_domains(ensemble: EnsemblePlan, step_folders: Mapping[str, Path]) -> dict[str, ValueDomain]:
    """Value domains of the ensemble's inputs: what the consuming step's contract says (the build found them)."""
    domains: dict[str, ValueDomain] = {}
    for step in (ensemble.steps[j] for j in ensemble.step_order):
        contract = read_json(step_folders[step.model_name] / CONTRACT_FILE)
        by_name = {t["name"]: t for t in contract["inputs"]}
        for key, tensor in step.input_map.items():
            entry = by_name.get(key)
            if entry is not None and tensor not in domains and ("value_range" in entry or "values" in entry):
                domains[tensor] = ValueDomain.from_json(entry, entry.get("source", ""))
    return domains


def _runner(model: ModelPlan, folder: Path) -> Callable[[Mapping[str, np.ndarray]], dict[str, Any]]:
    """Model-side outputs of one step from its ``model.onnx`` in onnxruntime."""
    import onnxruntime as ort

    path = folder / "model.onnx"
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # deterministic reference data
    session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    names = [o.name for o in model.outputs]

    def run(arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
        return dict(zip(names, session.run(names, dict(arrays)), strict=True))

    return run


def _chain(
    ensemble: EnsemblePlan,
    steps: Mapping[str, ModelPlan],
    runners: Mapping[str, Callable[[Mapping[str, np.ndarray]], dict[str, Any]]],
    inputs: Mapping[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """Run the steps in order on request-side ``inputs``; the ensemble's outputs (request-side, as Triton returns)."""
    tensors: dict[str, np.ndarray] = dict(inputs)
    for j in ensemble.step_order:
        step = ensemble.steps[j]
        model = steps[step.model_name]
        plans = {t.name: t for t in (*model.inputs, *model.outputs)}
        feed = {key: to_model(plans[key], tensors[tensor]) for key, tensor in step.input_map.items()}
        produced = runners[step.model_name](feed)
        for key, tensor in step.output_map.items():
            tensors[tensor] = to_request(plans[key], produced[key])
    return {t.name: tensors[t.name] for t in ensemble.outputs}


def _torch_outputs(ensemble: EnsemblePlan, module: Any, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The whole torch pipeline (the ensemble's ``source`` module) on ``inputs``, called by ensemble input name."""
    import torch

    with torch.no_grad():
        result = module(**{name: torch.from_numpy(np.ascontiguousarray(a)) for name, a in inputs.items()})
    return _by_output(result, [t.name for t in ensemble.outputs])


def _pipeline(ensemble: EnsemblePlan, options: BuildOptions, where: Problem) -> Any:
    assert ensemble.source is not None and ensemble.source.factory is not None
    return import_factory(ensemble.source.factory, options, Problem(where.file, where.pointer + "/source/factory",
                                                                   ""), what="ensemble source factory")


def _check_with_torch(
    ensemble: EnsemblePlan, cases: list[ReferenceCase], options: BuildOptions, where: Problem
) -> str:
    """The whole pipeline in torch (the ensemble's ``source`` factory) must give the chained outputs.

    Compared as every check compares (:func:`generator.planning.compare.compare_output`, with the ensemble's
    ``compare:``).
    """
    assert ensemble.source is not None
    module = _pipeline(ensemble, options, where)
    problems = []
    for case in cases:
        produced = _torch_outputs(ensemble, module, case.inputs)
        for tensor in ensemble.outputs:
            _, _, _, problem = compare_output(ensemble.compare, tensor.name, case.outputs[tensor.name],
                                              produced[tensor.name], case.inputs)
            if problem:
                problems.append(f"case {case.name!r} output {tensor.name!r}: the chained steps differ from torch: "
                                f"{problem}")
    if problems:
        raise GenRepoError([Problem(where.file, where.pointer + "/source", "check: " + p) for p in problems])
    return f"the chained steps match the torch pipeline {ensemble.source.factory} on every case"


def _by_output(result: Any, names: list[str]) -> dict[str, np.ndarray]:
    """A pipeline's return value (a tensor, a sequence in output order, or a mapping by name) as arrays by name."""
    import torch

    if isinstance(result, torch.Tensor):
        values = [result]
    elif isinstance(result, Mapping):
        values = [result[n] for n in names]
    else:
        values = list(result)
    if len(values) != len(names):
        raise GenRepoError([Problem("", "", f"the torch pipeline returns {len(values)} outputs; the ensemble has "
                                    f"{len(names)} ({', '.join(names)})")])
    return {n: v.detach().cpu().numpy() for n, v in zip(names, values, strict=True)}
