"""The manifest as plain data: its models (GraphSpec, source, samples, options), ensembles and refusals.

What :func:`generator.manifest.loading.load_manifest` returns and planning reads; no I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from generator.errors import Problem, json_pointer
from generator.specs.graphspec import GraphSpec
from generator.triton.ensemble import Step

__all__ = [
    "DICT_MERGED_OPTIONS",
    "OPTION_KEYS",
    "Manifest",
    "ManifestEnsemble",
    "ManifestModel",
    "ModelSource",
    "ProfilesFile",
    "RefusedModel",
    "SampleSource",
]

#: Option keys a model (or ``defaults``) may carry besides name/version/spec/source.
OPTION_KEYS = (
    "target",
    "max_batch_size",
    "batching",
    "widen_batch_min",
    "dynamic_batching",
    "instance_group",
    "version_policy",
    "warmup",
    "response_cache",
    "parameters",
    "cuda_graphs",
    "tensor_names",
    "onnx_tensorrt_accelerator",
    "compute_capabilities",
    "shapes",
    "pbtxt",
    "compare",
    "export",
    "profiles",
    "narrow_to_profiles",
    "execution_context_allocation_strategy",
)
#: Options whose object values merge key by key (model keys win); every other option is replaced as a whole.
DICT_MERGED_OPTIONS = ("parameters", "tensor_names", "dynamic_batching", "compare", "export")


@dataclass(frozen=True, slots=True)
class ModelSource:
    """Where a model (or its samples) comes from.

    A file (``kind`` onnx, pt2, npz or safetensors; ``path`` set) or a ``module:callable`` (``kind`` factory).
    """

    kind: str
    path: Path | None = None
    factory: str | None = None


@dataclass(frozen=True, slots=True)
class ProfilesFile:
    """AITune's saved ``model_optimization_profiles.json``, read and schema-checked by loading (the plan checks it).

    ``profiles``: one mapping per optimization profile, in engine order, from AITune's TensorRT input name
    (``input_<path>``) to ``[min, opt, max]`` full shapes.
    """

    path: Path
    profiles: tuple[Mapping[str, Any], ...]


#: Real sample inputs: ``kind`` npz|safetensors (``path`` set) or factory (``factory`` = ``module:callable``).
SampleSource = ModelSource


@dataclass(frozen=True, slots=True)
class RefusedModel:
    """A model that cannot be built, with every reason; ``--keep-going`` reports it and builds the others."""

    index: int
    name: str
    problems: tuple[Problem, ...]
    #: The entry's pointer (``/models/<i>``, or ``/ensembles/<i>`` for an ensemble).
    pointer: str = ""


@dataclass(frozen=True, slots=True)
class ManifestModel:
    """One model entry after loading: names resolved, GraphSpec loaded, defaults merged into ``options``.

    ``spec_file``/``spec_pointer`` locate the graph; ``own_options``: the option keys the model set itself; ``graph``
    carries the manifest's ``dynamic_shapes`` and ``batch_axis_multipliers`` (``graph_fixes`` says which);
    ``input_values``: ``inputs:`` as written; ``profiles_file``: the AITune profiles file, read.
    """

    index: int
    name: str
    version: int
    graph: GraphSpec
    spec_file: Path
    spec_pointer: str
    source: ModelSource | None
    target: str
    options: Mapping[str, Any]
    own_options: frozenset[str] = frozenset()
    assumptions: tuple[str, ...] = ()
    module_name: str | None = None
    samples: SampleSource | None = None
    input_values: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    graph_fixes: tuple[str, ...] = ()
    #: Per definition of ``graph.dynamic_shapes``: the manifest ``dynamic_shapes`` index it came from, or None (the
    #: spec's own); empty when the manifest declares none.
    shape_origins: tuple[int | None, ...] = ()
    profiles_file: ProfilesFile | None = None
    #: The entry's ``tuned:`` block as written (``instance_group``, ``dynamic_batching``, ``measured``), written by
    #: ``gen-repo tune``; the plan applies it over ``options`` (None: the model was never tuned).
    tuned: Mapping[str, Any] | None = None

    @property
    def pointer(self) -> str:
        """JSON pointer of this model entry in the manifest."""
        return f"/models/{self.index}"

    def option_pointer(self, key: str, *rest: str | int) -> str:
        """Pointer of option ``key`` where it was set: the model entry, else ``/defaults``."""
        if key in self.own_options:
            return json_pointer(("models", self.index, key, *rest))
        return json_pointer(("defaults", key, *rest))

    def tuned_pointer(self, *rest: str | int) -> str:
        """Pointer of ``tuned/<rest>`` in this model entry."""
        return json_pointer(("models", self.index, "tuned", *rest))


@dataclass(frozen=True, slots=True)
class ManifestEnsemble:
    """One ``ensembles:`` entry; ``inputs``/``outputs`` are None when the maps decide them.

    Each step's maps go from the step model's tensor names to ensemble tensor names, as in Triton's config.
    """

    index: int
    name: str
    version: int
    steps: tuple[Step, ...]
    max_batch_size: int | None = None
    inputs: tuple[str, ...] | None = None
    outputs: tuple[str, ...] | None = None
    source: ModelSource | None = None
    #: The entry's ``compare:`` as written (tolerances and a padding mask; resolved by the plan).
    compare: Mapping[str, Any] | None = None

    @property
    def pointer(self) -> str:
        """JSON pointer of this ensemble entry in the manifest."""
        return f"/ensembles/{self.index}"


@dataclass(frozen=True, slots=True)
class Manifest:
    """A loaded manifest: its file, the folder paths are relative to, the output folder and the models.

    ``refused`` holds the models that could not be loaded (only with ``keep_going``; otherwise loading raises).
    ``code_path`` lists the manifest's extra folders for ``module:callable`` factories.
    """

    file: Path
    base_dir: Path
    output_dir: Path
    models: tuple[ManifestModel, ...]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    code_path: tuple[Path, ...] = ()
    refused: tuple[RefusedModel, ...] = ()
    ensembles: tuple[ManifestEnsemble, ...] = ()
