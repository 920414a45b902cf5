"""The flat wrapper: a module whose forward takes flat tensors in plan order and returns a flat tuple.

The wrapper (:class:`FlatModule`) re-nests the flat inputs by semantic path into forward's parameters and flattens its
result by the output plans' paths; the export and the reference cases both run through it.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from generator.building.export.exchange import ExportError, TensorPlanLike
from generator.naming import SemanticPath

if TYPE_CHECKING:
    from generator.specs.sample_metadata import ForwardSignature

__all__ = ["FlatModule", "RECORDED_NAME", "flat_module_for"]

#: The wrapper class's module and qualified name, which torch's dynamo exporter records in every ONNX file it writes
#: (the ``namespace`` and ``pkg.torch.onnx.class_hierarchy`` metadata of each node). Pinned, so that where the class
#: lives inside gen-repo never changes the bytes of an exported model (nor the artifacts a build cache holds): these
#: are the names gen-repo's exports have carried since the wrapper was written (in ``generator/export/onnx.py``).
RECORDED_NAME = ("generator.export.onnx", "_make_flat_module_class.<locals>._FlatModule")


# -- Flat wrapper ----------------------------------------------------------------------------------------------------
def _steps(path: SemanticPath) -> tuple[str | int, ...]:
    return path if isinstance(path, tuple) else (path,)


def _nest(leaves: Sequence[tuple[tuple[str | int, ...], Any]]) -> Any:
    """Build nested dicts (string keys) and tuples (int indices) from ``(steps, value)`` pairs."""
    if len(leaves) == 1 and not leaves[0][0]:
        return leaves[0][1]
    children: dict[str | int, list[tuple[tuple[str | int, ...], Any]]] = {}
    for steps, value in leaves:
        if not steps:
            raise ExportError("a tensor path is both a leaf and a container")
        children.setdefault(steps[0], []).append((steps[1:], value))
    keys = list(children)
    if all(isinstance(k, int) for k in keys):
        indices = sorted(keys)
        if indices != list(range(len(indices))):
            raise ExportError(f"sequence indices {indices} are not 0..{len(indices) - 1}")
        return tuple(_nest(children[i]) for i in indices)
    return {k: _nest(v) for k, v in children.items()}


def _bind_arguments(
    signature: inspect.Signature, arguments: Mapping[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Positional and keyword arguments for forward from values keyed by parameter name."""
    ordered = {p: arguments[p] for p in signature.parameters if p in arguments}
    bound = inspect.BoundArguments(signature, ordered)
    return bound.args, bound.kwargs


def _forward_signature(module: Any, forward_signature: ForwardSignature | None) -> inspect.Signature:
    if forward_signature is not None:
        kinds = {kind.name: kind for kind in inspect._ParameterKind}
        return inspect.Signature(
            [
                inspect.Parameter(p.name, kinds[p.kind], default=None if p.has_default else inspect.Parameter.empty)
                for p in forward_signature.parameters
            ]
        )
    return inspect.signature(module.forward)


def _make_flat_module_class() -> type:
    import torch

    class _FlatModule(torch.nn.Module):
        """``forward(*inputs)`` with flat tensors in plan order -> tuple of output tensors in plan order."""

        def __init__(
            self,
            module: torch.nn.Module,
            input_paths: Sequence[SemanticPath],
            output_paths: Sequence[SemanticPath],
            signature: inspect.Signature,
            constants: Mapping[SemanticPath, Any] | None = None,
            scalars: tuple[Sequence[bool], Sequence[bool]] = ((), ()),
        ) -> None:
            super().__init__()
            self.module = module
            # 0-d tensors travel as [1] (Triton never carries a 0-d tensor): squeezed in, unsqueezed out.
            self.scalar_inputs = [bool(flag) for flag in scalars[0]]
            self.scalar_outputs = [bool(flag) for flag in scalars[1]]
            _set_eval(module)
            self.training = False
            self.input_paths = [_steps(p) for p in input_paths]
            self.output_paths = [_steps(p) for p in output_paths]
            self.signature = signature
            self.constants = [(_steps(p), v) for p, v in (constants or {}).items()]
            unknown = {s[0] for s in self.input_paths} - set(signature.parameters)
            if unknown and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()):
                raise ExportError(f"input paths start at {sorted(map(str, unknown))}, which forward does not take")

        def nest_inputs(self, flat: Sequence[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
            """Return forward's (args, kwargs) from flat tensors in plan order."""
            leaves = list(zip(self.input_paths, flat, strict=True)) + self.constants
            roots: dict[str | int, list[tuple[tuple[str | int, ...], Any]]] = {}
            for steps, value in leaves:
                roots.setdefault(steps[0], []).append((steps[1:], value))
            arguments = {str(k): _nest(v) for k, v in roots.items()}
            return _bind_arguments(self.signature, arguments)

        def flatten_outputs(self, result: Any) -> tuple[Any, ...]:
            """Return forward's result as a tuple in output-plan order."""
            out = []
            for steps in self.output_paths:
                value = result
                for depth, step in enumerate(steps):
                    container_ok = isinstance(value, Mapping) if isinstance(step, str) else (
                        isinstance(value, (tuple, list)) and step < len(value)
                    )
                    if not container_ok or (isinstance(value, Mapping) and step not in value):
                        shown = "output" + "".join(f"[{s!r}]" for s in steps[: depth + 1])
                        raise ExportError(f"forward's result has no {shown} (found {type(value).__name__} there)")
                    value = value[step]
                out.append(value)
            return tuple(out)

        def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
            flat = [t.reshape(()) if i < len(self.scalar_inputs) and self.scalar_inputs[i] else t
                    for i, t in enumerate(inputs)]
            args, kwargs = self.nest_inputs(flat)
            result = self.flatten_outputs(self.module(*args, **kwargs))
            return tuple(
                value.reshape((1,)) if i < len(self.scalar_outputs) and self.scalar_outputs[i]
                and isinstance(value, torch.Tensor) else value
                for i, value in enumerate(result)
            )

    _FlatModule.__module__, _FlatModule.__qualname__ = RECORDED_NAME
    return _FlatModule


_FLAT_CLASS: type | None = None


def FlatModule(  # noqa: N802 (a class factory: torch is imported lazily)
    module: Any,
    input_paths: Sequence[SemanticPath],
    output_paths: Sequence[SemanticPath],
    *,
    forward_signature: ForwardSignature | None = None,
    constants: Mapping[SemanticPath, Any] | None = None,
    scalars: tuple[Sequence[bool], Sequence[bool]] = ((), ()),
) -> Any:
    """Wrap ``module`` as an ``nn.Module`` taking flat tensors (``input_paths`` order) and returning a tuple.

    ``forward_signature`` (the GraphSpec's) decides how parameters are passed; by default ``module.forward``'s own.
    ``constants`` are non-tensor leaves (the spec's ``other_data``) placed at their paths on every call.
    ``scalars`` flags, per input and per output, a 0-d tensor of forward that the wrapper carries as ``[1]``.
    """
    global _FLAT_CLASS
    if _FLAT_CLASS is None:
        _FLAT_CLASS = _make_flat_module_class()
    signature = _forward_signature(module, forward_signature)
    return _FLAT_CLASS(module, input_paths, output_paths, signature, constants, scalars)


def flat_module_for(
    module: Any,
    inputs: Sequence[TensorPlanLike],
    outputs: Sequence[TensorPlanLike],
    *,
    forward_signature: ForwardSignature | None = None,
    constants: Mapping[SemanticPath, Any] | None = None,
) -> Any:
    """:func:`FlatModule` for tensor plans: their paths, and their 0-d tensors carried as ``[1]``."""
    return FlatModule(
        module, [p.path for p in inputs], [p.path for p in outputs], forward_signature=forward_signature,
        constants=constants,
        scalars=([getattr(p, "torch_scalar", False) for p in inputs], [getattr(p, "torch_scalar", False)
                                                                       for p in outputs]),
    )


def _set_eval(module: Any) -> None:
    """Inference mode for export and references; a torch.export ``.module()`` refuses ``train()``/``eval()``."""
    with contextlib.suppress(NotImplementedError):
        module.eval()
