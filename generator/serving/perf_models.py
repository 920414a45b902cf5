"""What ``gen-repo perf-config`` and ``perf`` load: each model's inputs and profile, and the search space inside it.

A :class:`PerfModel` comes from the model's ``gen_repo/contract.json`` or the plan; its shape variants, batch sizes and
concurrency levels never leave what the engine supports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from generator.confinement import refuse_symlinks
from generator.errors import GenRepoError, Problem
from generator.triton.proto import model_config_pb2

if TYPE_CHECKING:
    from generator.contracts.served import ServedModel
    from generator.planning.plan import RepositoryPlan
    from generator.planning.values import ValueDomain

__all__ = [
    "MAX_CONCURRENCY",
    "VARIANTS",
    "PerfModel",
    "PerfTensor",
    "Variant",
    "batch_size_candidates",
    "concurrency_range",
    "concurrency_values",
    "models_from_plan",
    "models_from_repository",
    "served_models",
    "powers_of_two",
    "variants",
]

#: Shape variants written per model, in this order.
VARIANTS = ("min", "opt", "max")

#: Upper bound of any generated concurrency (more only queues requests on one server).
MAX_CONCURRENCY = 64


@dataclass(frozen=True, slots=True)
class PerfTensor:
    """One input: config dims, the full request shapes (batch axis first when the model batches), its values."""

    name: str
    data_type: str
    dims: tuple[int, ...]
    min_shape: tuple[int, ...]
    opt_shape: tuple[int, ...]
    max_shape: tuple[int, ...]
    values: ValueDomain | None = None

    @property
    def dynamic(self) -> bool:
        """Whether a config dim is ``-1`` (perf_analyzer then needs ``--shape``)."""
        return any(d < 0 for d in self.dims)


@dataclass(frozen=True, slots=True)
class PerfModel:
    """What the load configuration needs about one model."""

    name: str
    version: int
    max_batch_size: int
    inputs: tuple[PerfTensor, ...]
    opt_batch_size: int = 1
    #: Instances serving the model (sum of the config's instance_group counts; 1 when unknown).
    instance_count: int = 1
    #: ``KIND_GPU``/``KIND_CPU``... of the first instance group (Model Analyzer's search keeps the kind).
    instance_kind: str = "KIND_AUTO"
    dynamic_batching: bool = False
    max_queue_delay_us: int = 0
    #: A Triton ensemble: Triton refuses instance groups and batching options on it, so nothing of its config varies.
    ensemble: bool = False

    @property
    def batching(self) -> bool:
        """Whether requests carry a batch axis first (``max_batch_size > 0``)."""
        return self.max_batch_size > 0


@dataclass(frozen=True, slots=True)
class Variant:
    """One shape variant: the batch size a request carries and each input's shape without the batch axis."""

    name: str
    batch_size: int
    item_shapes: Mapping[str, tuple[int, ...]]
    #: Full request shapes (batch axis first when batching): what the profile must contain.
    request_shapes: Mapping[str, tuple[int, ...]]


def _model_from_contract(
    doc: Mapping[str, Any], config: model_config_pb2.ModelConfig | None, source: str
) -> PerfModel:
    """A PerfModel from a ``gen-repo-contract/1`` document and (optionally) the model's ModelConfig."""
    if doc.get("format") != "gen-repo-contract/1":
        raise GenRepoError([Problem(source, "/format", f"expected 'gen-repo-contract/1', got {doc.get('format')!r}")])
    from generator.bounded import limit
    from generator.contracts.model_contract import ContractShapeError, contract_shape
    from generator.number_limits import element_count
    from generator.planning.values import ValueDomain

    inputs = []
    elements = limit("array_elements")
    for k, t in enumerate(doc.get("inputs", [])):
        where = f"/inputs/{k}"
        try:
            max_shape = contract_shape(t, "max_shape", where)
            inputs.append(
                PerfTensor(
                    name=str(t["name"]),
                    data_type=str(t["data_type"]),
                    dims=contract_shape(t, "dims", where),
                    min_shape=contract_shape(t, "min_shape", where),
                    opt_shape=contract_shape(t, "opt_shape", where) if "opt_shape" in t else max_shape,
                    max_shape=max_shape,
                    values=ValueDomain.from_json(t) if "value_range" in t or "values" in t else None,
                )
            )
        except ContractShapeError as error:
            raise GenRepoError([Problem(source, error.pointer, str(error))]) from None
        except (KeyError, TypeError, ValueError) as error:
            raise GenRepoError([Problem(source, where, f"malformed tensor entry: {error}")]) from None
        # perf_analyzer's input data holds every element of the largest request: bounded before it is drawn.
        if element_count(max_shape, elements) is None:
            raise GenRepoError([Problem(source, f"{where}/max_shape", f"a request of this shape holds more than "
                                        f"{elements} elements (limit array_elements; GEN_REPO_MAX_ARRAY_ELEMENTS "
                                        "changes it)")])
    max_batch_size = int(doc.get("max_batch_size", 0))
    opt_batch = inputs[0].opt_shape[0] if inputs and max_batch_size > 0 else 1
    count, kind, dyn, delay = 1, "KIND_AUTO", False, 0
    if config is not None:
        if config.instance_group:
            count = sum(max(int(g.count), 1) for g in config.instance_group)
            kind = model_config_pb2.ModelInstanceGroup.Kind.Name(config.instance_group[0].kind)
        dyn = config.HasField("dynamic_batching")
        delay = int(config.dynamic_batching.max_queue_delay_microseconds) if dyn else 0
    elif str(doc.get("platform", "")) == "tensorrt_plan":
        kind = "KIND_GPU"
    return PerfModel(
        name=str(doc["model"]),
        version=int(doc.get("version", 1)),
        max_batch_size=max_batch_size,
        inputs=tuple(inputs),
        opt_batch_size=max(1, min(opt_batch, max_batch_size)) if max_batch_size > 0 else 1,
        instance_count=count,
        instance_kind=kind,
        dynamic_batching=dyn,
        max_queue_delay_us=delay,
        ensemble=str(doc.get("platform", "")) == "ensemble",
    )


def served_models(repo_dir: Path | str, names: Sequence[str] = ()) -> list[ServedModel]:
    """Every model of a gen-repo repository folder (or those named), read once at the version Triton serves.

    Read by :func:`generator.contracts.served.read_served_model`. A model without a contract is a problem: only the
    contract knows the profile's ranges (a config's ``-1`` dims do not bound anything).
    """
    from generator.contracts.served import FolderReader, read_served_model

    root = Path(repo_dir)
    if not root.is_dir():
        raise GenRepoError([Problem(str(root), "", "model repository folder does not exist")])
    refuse_symlinks(root)  # the one rule for every reader of a repository (generator.confinement.walk_tree)
    reader = FolderReader(root)
    folders = [m for m in reader.models() if (root / m / "config.pbtxt").is_file()]
    problems = [Problem(str(root), "", f"no model {n!r} (models: {', '.join(folders)})")
                for n in sorted(set(names) - set(folders))]
    served: list[ServedModel] = []
    for name in folders:
        if names and name not in names:
            continue
        try:
            model = read_served_model(reader, name)
        except GenRepoError as error:
            problems.extend(error.problems)
            continue
        if model.contract_doc is None:
            problems.append(Problem(str(root / name), "", f"{model.describe()} has no gen_repo/contract.json: "
                                    "only gen-repo's contract knows the profile's shape ranges (rebuild the "
                                    "repository with gen-repo)"))
            continue
        served.append(model)
    if problems:
        raise GenRepoError(problems)
    if not served:
        raise GenRepoError([Problem(str(root), "", "no models (no <model>/config.pbtxt folders)")])
    return served


def models_from_repository(repo_dir: Path | str, names: Sequence[str] = ()) -> list[PerfModel]:
    """:func:`served_models` as what the load configuration needs."""
    models: list[PerfModel] = []
    problems: list[Problem] = []
    for served in served_models(repo_dir, names):
        assert served.contract_doc is not None
        try:
            models.append(_model_from_contract(served.contract_doc, served.config, served.contract_where))
        except GenRepoError as error:
            problems.extend(error.problems)
    if problems:
        raise GenRepoError(problems)
    return models


def models_from_plan(plan: RepositoryPlan, names: Sequence[str] = ()) -> list[PerfModel]:
    """The models and ensembles of a plan (what the build would write as contract.json and config.pbtxt)."""
    from generator.planning.contract import PlannedModel, contract_from_plan

    planned: list[PlannedModel] = [*plan.models, *plan.ensembles]
    known = [m.name for m in planned]
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise GenRepoError(
            [Problem(str(plan.manifest_file), "", f"no model {n!r} (models: {', '.join(known)})") for n in unknown]
        )
    return [
        _model_from_contract(contract_from_plan(m), m.config, str(plan.manifest_file))
        for m in planned
        if not names or m.name in names
    ]


def variants(model: PerfModel) -> list[Variant]:
    """The min, opt and max variants: each input at that profile shape, the batch axis split off when batching."""
    out = []
    for name in VARIANTS:
        full = {t.name: tuple(getattr(t, f"{name}_shape")) for t in model.inputs}
        if model.batching:
            batch = full[model.inputs[0].name][0] if model.inputs else 1
            items = {k: s[1:] for k, s in full.items()}
        else:
            batch, items = 1, dict(full)
        out.append(Variant(name, int(batch), items, full))
    return out


def powers_of_two(high: int) -> list[int]:
    """The powers of two up to ``high``: 1, 2, 4, ... (none when ``high`` is below 1)."""
    return [1 << k for k in range(max(high, 1).bit_length()) if 1 << k <= high]


def batch_size_candidates(model: PerfModel) -> list[int]:
    """Client batch sizes worth sweeping, never above ``max_batch_size``.

    Powers of two up to the profile's max batch, plus opt and max; ``[1]`` when the model does not batch.
    """
    if not model.batching:
        return [1]
    return sorted({*powers_of_two(model.max_batch_size), model.opt_batch_size, model.max_batch_size})


def _max_concurrency(model: PerfModel, batch_size: int) -> int:
    """Concurrency at which more requests can only queue.

    Enough in flight to fill the largest batch the dynamic batcher may form from ``batch_size``-item requests, on
    every instance, twice over (one batch executing, one being gathered); at least 2, at most
    :data:`MAX_CONCURRENCY`.
    """
    fill = max(1, model.max_batch_size // max(batch_size, 1)) if model.batching else 1
    return max(2, min(MAX_CONCURRENCY, 2 * fill * max(model.instance_count, 1)))


def concurrency_range(model: PerfModel, batch_size: int) -> tuple[int, int, int]:
    """perf_analyzer's ``--concurrency-range start:end:step`` for requests of ``batch_size`` items."""
    high = _max_concurrency(model, batch_size)
    step = max(1, high // 8)
    return 1, high, step


def concurrency_values(model: PerfModel, batch_size: int = 1) -> list[int]:
    """Model Analyzer's concurrency list: powers of two up to the same bound as :func:`concurrency_range`."""
    high = _max_concurrency(model, batch_size)
    return sorted({*powers_of_two(high), high})
