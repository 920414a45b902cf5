"""The checks that an ONNX file is right: its I/O against the plans, and onnxruntime against torch on every case.

Tolerances and the element test are :mod:`generator.planning.compare`'s (the smoke test compares the same way).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from generator.bounded import read_bytes
from generator.building.export.exchange import (
    CaseLike,
    CaseResult,
    OnnxCheckError,
    TensorPlanLike,
    dynamic_axes_of,
    short_error,
)
from generator.dtypes import by_onnx, normalize_dtype
from generator.errors import Problem
from generator.planning.compare import DEFAULT_TOLERANCES, CompareSettings, compare_output, tolerance_for

__all__ = [
    "DEFAULT_TOLERANCES",
    "check_onnx",
    "compare_with_onnxruntime",
    "onnx_io_problems",
    "tolerance_for",
]


# -- Checks ----------------------------------------------------------------------------------------------------------
def _value_info_dims(value_info: Any) -> list[int | str | None]:
    dims: list[int | str | None] = []
    for dim in value_info.type.tensor_type.shape.dim:
        if dim.HasField("dim_value"):
            dims.append(int(dim.dim_value))
        elif dim.HasField("dim_param"):
            dims.append(dim.dim_param)
        else:
            dims.append(None)
    return dims


def onnx_io_problems(
    onnx_model: Path | str | Any,
    inputs: Sequence[TensorPlanLike],
    outputs: Sequence[TensorPlanLike],
    *,
    allow_external_data: bool = False,
) -> list[Problem]:
    """Everything wrong with an ONNX graph's inputs/outputs against the plans (empty when it fits).

    Checks names and order, element types, ranks, that static axes have the plan's size and that dynamic axes
    (min != max) are not fixed, and (unless ``allow_external_data``) that no initializer lives in an external file.
    """
    import onnx

    if isinstance(onnx_model, (str, Path)):
        file = str(onnx_model)
        try:
            model = onnx.load_model_from_string(read_bytes(file, "onnx_bytes"))
        except Exception as exc:
            return [Problem(file, "", f"not a readable ONNX file: {short_error(exc)}")]
    else:
        file, model = "<onnx>", onnx_model
    problems: list[Problem] = []
    initializers = {i.name for i in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in initializers]
    for kind, plans, values in (("input", inputs, graph_inputs), ("output", outputs, list(model.graph.output))):
        expected = [p.name for p in plans]
        actual = [v.name for v in values]
        if sorted(expected) != sorted(actual):
            missing = [n for n in expected if n not in actual]
            extra = [n for n in actual if n not in expected]
            text = f"graph {kind}s are {actual}, the plan expects {expected}"
            if missing:
                text += f"; missing {missing}"
            if extra:
                text += f"; unexpected {extra}"
            problems.append(Problem(file, f"/graph/{kind}", text))
        elif expected != actual:
            problems.append(
                Problem(file, f"/graph/{kind}", f"graph {kind}s are in order {actual}, the plan expects {expected}")
            )
        by_name = {v.name: (i, v) for i, v in enumerate(values)}
        for plan in plans:
            if plan.name not in by_name:
                continue
            index, value = by_name[plan.name]
            pointer = f"/graph/{kind}/{index}"
            elem = value.type.tensor_type.elem_type
            want = normalize_dtype(plan.dtype)
            found = by_onnx(elem)
            if found is None or found.numpy != want:
                # Named as numpy names it where torch has the type; else the bare element number (strings too).
                shown = found.numpy if found is not None and found.torch is not None else elem
                problems.append(
                    Problem(
                        file,
                        pointer,
                        f"{kind} {plan.name!r} has element type {shown}, the plan expects {want}",
                    )
                )
            dims = _value_info_dims(value)
            if len(dims) != len(plan.max_shape):
                problems.append(
                    Problem(
                        file,
                        pointer,
                        f"{kind} {plan.name!r} has rank {len(dims)} "
                        f"({dims}), the plan expects rank {len(plan.max_shape)}",
                    )
                )
                continue
            dynamic = set(dynamic_axes_of(plan))
            for axis, dim in enumerate(dims):
                if axis in dynamic and isinstance(dim, int):
                    problems.append(
                        Problem(
                            file,
                            pointer,
                            f"{kind} {plan.name!r} axis {axis} is fixed to {dim}, "
                            f"the plan lets it vary {plan.min_shape[axis]}..{plan.max_shape[axis]}",
                        )
                    )
                elif axis not in dynamic and isinstance(dim, int) and dim != plan.max_shape[axis]:
                    problems.append(
                        Problem(
                            file,
                            pointer,
                            f"{kind} {plan.name!r} axis {axis} has size {dim}, the plan says {plan.max_shape[axis]}",
                        )
                    )
    if not allow_external_data:
        external = [i.name for i in model.graph.initializer if i.data_location == onnx.TensorProto.EXTERNAL]
        if external:
            problems.append(
                Problem(
                    file,
                    "/graph/initializer",
                    f"{len(external)} initializer(s) keep their data in "
                    f"an external file (e.g. {external[0]!r}); the file must be self-contained",
                )
            )
    return problems


def _session(onnx_path: Path | str, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(str(onnx_path), sess_options=options, providers=["CPUExecutionProvider"])


def compare_with_onnxruntime(
    onnx_path: Path | str,
    cases: Sequence[CaseLike],
    *,
    compare: CompareSettings | None = None,
    threads: int = 1,
    inputs: Sequence[TensorPlanLike] = (),
    outputs: Sequence[TensorPlanLike] = (),
) -> tuple[list[CaseResult], list[Problem]]:
    """Run every case in onnxruntime and compare with its stored (torch) outputs (:mod:`generator.planning.compare`).

    Tolerances from ``compare`` (the manifest's) or the dtype table (:mod:`generator.planning.compare`); padding
    positions are left out. Cases hold request-side arrays; ``inputs``/``outputs`` plans map them to the graph's shapes
    and back. Returns per-output results and the problems (empty when all pass).
    """
    from generator.planning.contract import to_model, to_request

    settings = compare or CompareSettings()
    in_plans = {p.name: p for p in inputs}
    out_plans = {p.name: p for p in outputs}
    file = str(onnx_path)
    try:
        session = _session(onnx_path, threads)
    except Exception as exc:
        return [], [Problem(file, "", f"onnxruntime cannot load the model: {short_error(exc)}")]
    output_names = [o.name for o in session.get_outputs()]
    results: list[CaseResult] = []
    problems: list[Problem] = []
    for case in cases:
        pointer = f"/cases/{case.name}"
        feed = {n: to_model(in_plans[n], a) if n in in_plans else a for n, a in case.inputs.items()}
        try:
            got = dict(zip(output_names, session.run(output_names, feed), strict=True))
            got = {n: to_request(out_plans[n], a) if n in out_plans else a for n, a in got.items()}
        except Exception as exc:
            problems.append(Problem(file, pointer, f"onnxruntime fails on case {case.name!r}: {short_error(exc)}"))
            continue
        for name, want in case.outputs.items():
            want = np.asarray(want)
            if name not in got:
                problems.append(Problem(file, pointer, f"case {case.name!r}: onnxruntime gives no output {name!r}"))
                continue
            have = np.asarray(got[name])
            if have.shape != want.shape or have.dtype != want.dtype:
                problems.append(
                    Problem(
                        file,
                        pointer,
                        f"case {case.name!r} output {name!r}: onnxruntime gives "
                        f"{have.dtype}{list(have.shape)}, torch {want.dtype}{list(want.shape)}",
                    )
                )
                continue
            compared, rtol, atol, problem = compare_output(settings, name, have, want, case.inputs)
            if compared is not None:
                results.append(CaseResult(case.name, name, compared.max_abs_error or 0.0,
                                          compared.max_rel_error or 0.0, rtol, atol, compared.ok, compared.left_out))
            if problem:
                problems.append(Problem(file, pointer, f"case {case.name!r} output {name!r}: onnxruntime differs "
                                        f"from torch: {problem}" if compared is not None else
                                        f"case {case.name!r} output {name!r}: {problem}"))
    return results, problems


def check_onnx(
    onnx_path: Path | str,
    inputs: Sequence[TensorPlanLike],
    outputs: Sequence[TensorPlanLike],
    cases: Sequence[CaseLike] = (),
    *,
    compare: CompareSettings | None = None,
    threads: int = 1,
) -> list[CaseResult]:
    """Check an ONNX file against its plans and torch's outputs; raise :class:`OnnxCheckError` with every problem.

    I/O first (:func:`onnx_io_problems`); then, if that passed, each case through onnxruntime
    (:func:`compare_with_onnxruntime`). Returns the comparison results.
    """
    problems = onnx_io_problems(onnx_path, inputs, outputs)
    if problems:
        raise OnnxCheckError(problems)
    results, problems = compare_with_onnxruntime(onnx_path, cases, compare=compare, threads=threads,
                                                 inputs=inputs, outputs=outputs)
    if problems:
        raise OnnxCheckError(problems)
    return results
