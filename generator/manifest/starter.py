"""``gen-repo init``: a starter manifest from GraphSpec files and AITune tune reports.

One model per graph, named Triton-safe and unique, ``target: auto``, every other option a comment with its default;
``gen-repo plan`` accepts the text unchanged. Nothing is written over an existing file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from generator.atomic_write import write_atomically
from generator.errors import GenRepoError, Problem
from generator.naming import MAX_MODEL_NAME_LENGTH, model_name_from_graph
from generator.specs.schema import LoadedGraph, load_graphspecs

__all__ = ["OPTION_COMMENTS", "write_starter_manifest"]

#: Every option besides ``target``, in the manifest's order: (default as YAML, or None where the default depends on
#: the model or is Triton's own, and what it means). A literal default can be uncommented without changing the plan.
OPTION_COMMENTS: dict[str, tuple[str | None, str]] = {
    "max_batch_size": (None, "default: the spec's max batch; set a lower one (never higher)"),
    "batching": ("auto", "auto | batch | none"),
    "widen_batch_min": ("false", "true: widen an explicit BatchDim min > 1 to 1"),
    "dynamic_batching": ("true", "false, or {preferred_batch_size: [...], max_queue_delay_microseconds: 100}"),
    "instance_group": (None, "default: 2 KIND_CPU instances (python), else one (per GPU for GPU kinds); e.g. "
                             "[{kind: KIND_GPU, count: 2}]"),
    "version_policy": (None, "default: Triton's (the latest version); {latest: N}, {all: true} or {specific: [1]}"),
    "warmup": (None, "default: on for tensorrt, off otherwise"),
    "response_cache": ("false", "Triton's response cache"),
    "parameters": ("{}", "backend parameters, string to string"),
    "cuda_graphs": ("false", "tensorrt: CUDA graphs at the opt shape"),
    "tensor_names": ("{}", "new tensor names by default name or access path, e.g. {input_x: pixels}"),
    "onnx_tensorrt_accelerator": ("false", "onnx: ONNX Runtime's TensorRT execution provider (needs a GPU)"),
    "compute_capabilities": (None, "tensorrt: one plan per capability, e.g. [\"8.0\", \"9.0\"]; default: this GPU's"),
    "shapes": ("intersect", "intersect | widen: axes that must agree but were recorded with different ranges"),
    "pbtxt": ('""', "raw config.pbtxt text merged last"),
    "compare": ("{}", "{rtol: 1e-4, atol: 1e-5, outputs: {<output>: {atol: ...}}, padding: {mask: attention_mask}}: "
                      "tolerances and padded positions left out (docs/manifest.md)"),
    "export": ("{exporter: auto}", "auto | dynamo | torchscript: the torch -> ONNX exporter (auto: one, then the "
                                   "other; docs/manifest.md)"),
    "profiles": (None, "default: one profile over the whole range; buckets [{name: short, axes: {batch: {min: 1, opt: "
                       "4, max: 4}, <input>:1: {min: 6, opt: 8, max: 12}}}, ...] (`gen-repo plan` names the axes) or "
                       "{aitune: model_optimization_profiles.json} (docs/manifest.md)"),
    "narrow_to_profiles": ("false", "true: promise only the profiles' union where they leave a gap"),
    "execution_context_allocation_strategy": (None, "tensorrt: STATIC (the backend's default) | ON_PROFILE_CHANGE "
                                                    "(Triton 25.05+)"),
}

_HEADER = """\
# gen-repo manifest written by `gen-repo init` from:
{sources}
# `gen-repo plan {flag}{name}` shows what would be generated; `gen-repo config {flag}{name}` writes the
# configs.{outside}
# `gen-repo build` also needs each model's source: uncomment its `source:` line and point it at an ONNX file
# ({{onnx: model.onnx}}), a torch.export file ({{pt2: model.pt2}}) or a factory ({{factory: "package.module:make"}},
# imported only with --allow-code). Paths are relative to this file.
output: model_repository
defaults:
  target: auto  # tensorrt where TensorRT and a GPU exist, else onnx; or tensorrt | onnx | python
  # Every other option with its default: uncomment to change it for every model, or copy it under one model
  # (a model's own value wins).
"""


#: Said in the header when a spec lies outside the manifest's folder (written by ``init --allow-outside``).
_OUTSIDE_COMMENT = " Some specs lie outside this file's folder ('../'): plan, config and build need --allow-outside."

_SOURCE_COMMENT = '    # source: {onnx: model.onnx}  # or {pt2: model.pt2} or {factory: "package.module:make"}'


def _model_name(loaded: LoadedGraph) -> str:
    """The name the manifest would give the graph: module (or file name for AITune's numbered graphs) and graph."""
    prefix = loaded.module_name
    if prefix is None and loaded.graph.name.isdigit():
        prefix = Path(loaded.file).name.split(".")[0]
    return model_name_from_graph(loaded.graph.name, prefix)


def _unique(name: str, taken: set[str]) -> str:
    """``name``, or ``name_2``, ``name_3``... : the first not in ``taken`` (compared case-insensitively)."""
    candidate, k = name, 1
    while candidate.lower() in taken:
        k += 1
        suffix = f"_{k}"
        candidate = name[: MAX_MODEL_NAME_LENGTH - len(suffix)] + suffix
    taken.add(candidate.lower())
    return candidate


def _graph_key(graphs: list[LoadedGraph], index: int) -> str:
    """How the manifest picks graph ``index`` of a multi-graph file: ``module/graph`` where that is unambiguous."""
    loaded = graphs[index]
    label = f"{loaded.module_name}/{loaded.graph.name}" if loaded.module_name is not None else None
    labels = [f"{g.module_name}/{g.graph.name}" if g.module_name is not None else None for g in graphs]
    if label is not None and labels.count(label) == 1 and all(g.module_name != label for g in graphs) \
            and all(g.graph.name != label for g in graphs):
        return json.dumps(label)
    return str(index)


def _relative(spec: Path, manifest: Path, allow_outside: bool) -> str:
    """``spec`` relative to the manifest's folder (POSIX separators), as ``plan`` resolves it.

    A spec outside that folder is written as a ``../`` path with ``allow_outside`` (``plan`` then needs
    ``--allow-outside`` too) and refused without it, as ``plan`` would refuse it.
    """
    base = manifest.resolve().parent
    target = spec.resolve()
    if target.is_relative_to(base):
        return target.relative_to(base).as_posix()
    if not allow_outside:
        raise GenRepoError([Problem(str(spec), "", f"is outside {base}, the folder of the manifest {manifest}; "
                                    "write the manifest in a folder that holds every spec (-o), or pass "
                                    "--allow-outside to refer to it with '..' (plan and build then need "
                                    "--allow-outside too)")])
    return Path(os.path.relpath(target, base)).as_posix()


def _starter_manifest(specs: Sequence[Path | str], manifest: Path | str, *, allow_outside: bool = False) -> str:
    """The text of a starter manifest at ``manifest`` for every graph in ``specs`` (in order, duplicates once).

    Spec paths are relative to ``manifest``'s folder, wherever the command runs. Raises GenRepoError with every
    problem of every file (each validated as ``gen-repo validate`` does) and, unless ``allow_outside``, for a spec
    outside the manifest's folder.
    """
    manifest = Path(manifest)
    problems: list[Problem] = []
    files: list[tuple[Path, list[LoadedGraph]]] = []
    for spec in dict.fromkeys(Path(s) for s in specs):
        try:
            files.append((spec, load_graphspecs(spec)))
            _relative(spec, manifest, allow_outside)
        except GenRepoError as error:
            problems.extend(error.problems)
    if problems:
        raise GenRepoError(problems)
    paths = {spec: _relative(spec, manifest, allow_outside) for spec, _ in files}
    outside = any(path.startswith("../") for path in paths.values())
    flag = "--allow-outside " if outside else ""
    lines = [_HEADER.format(sources="\n".join(f"#   {spec}" for spec, _ in files), name=manifest.name, flag=flag,
                            outside=_OUTSIDE_COMMENT if outside else "").rstrip("\n")]
    for key, (default, note) in OPTION_COMMENTS.items():
        lines.append(f"  # {key}: {default}  # {note}" if default is not None else f"  # {key}:  # {note}")
    lines.append("models:")
    taken: set[str] = set()
    for spec, graphs in files:
        path = json.dumps(paths[spec])
        for index, loaded in enumerate(graphs):
            lines.append(f"  - name: {json.dumps(_unique(_model_name(loaded), taken))}")
            if len(graphs) == 1:
                lines.append(f"    spec: {path}")
            else:
                lines.append(f"    spec: {{file: {path}, graph: {_graph_key(graphs, index)}}}")
            lines.append(_SOURCE_COMMENT)
    return "\n".join(lines) + "\n"


def write_starter_manifest(specs: Sequence[Path | str], manifest: Path | str, *,
                           allow_outside: bool = False) -> tuple[Path, int, bool]:
    """Write :func:`_starter_manifest` to ``manifest``, never over an existing file.

    Returns the manifest, its model count and whether it refers to specs outside its folder (``plan`` then needs
    ``--allow-outside``). Written by :func:`generator.atomic_write.write_atomically` without overwrite: never
    half-written, never over a file that appears meanwhile.
    """
    manifest = Path(manifest)
    refused = Problem(str(manifest), "", "already exists; gen-repo init never overwrites a file (remove it or "
                                         "choose another name with -o)")
    if manifest.exists() or manifest.is_symlink():
        raise GenRepoError([refused])
    text = _starter_manifest(specs, manifest, allow_outside=allow_outside)
    folder = manifest.resolve().parent
    if not folder.is_dir():
        raise GenRepoError([Problem(str(manifest), "", f"folder {folder} does not exist")])
    try:
        write_atomically(folder / manifest.name, text, overwrite=False)
    except FileExistsError:
        raise GenRepoError([refused]) from None
    return manifest, text.count("\n  - name: "), _OUTSIDE_COMMENT in text
