"""``gen-repo report``: one self-contained HTML page about a model repository.

Rendered by Jinja2 with autoescape on (every repository string is hostile), charts inline as SVG, no scripts or
external resources, byte-identical for identical input (docs/report.md).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import markupsafe

from generator.client import ModelContract
from generator.confinement import refuse_symlinks
from generator.contracts.served import FolderReader, ServedModel, read_served_model
from generator.errors import GenRepoError, Problem
from generator.reports.charts import PerfPoint, ShapeRange, TunePoint, perf_chart, shape_range_chart, tune_chart
from generator.reports.ensemble_svg import EnsembleStep, ensemble_svg
from generator.repository.lock import LOCK_FILE_NAME, read_lock
from generator.repository.verify import verify_repository
from generator.resources import resource_dir
from generator.serving.smoke import repository_models
from generator.specs.documents import load_document
from generator.specs.json_schema import schema_problems
from generator.triton.proto import model_config_pb2

__all__ = [
    "LockStatus",
    "ModelSection",
    "RepositoryFacts",
    "ReportInputs",
    "TensorFacts",
    "build_report",
    "load_inputs",
]

#: The ``--json`` documents the report reads, by option: the schema each is checked against.
INPUT_SCHEMAS = {"smoke": "report_smoke.schema.json", "perf": "report_perf.schema.json",
                 "diff": "report_diff.schema.json", "tune": "report_tune.schema.json"}
#: Inputs drawn in a model's shape-range chart, the first ones in the contract's order. matplotlib's cost grows faster
#: than the panels it lays out (a model with 400 inputs took minutes); the inputs table lists every input's range.
CHARTED_INPUTS = 8
#: Steps an ensemble's picture draws, and perf variants (model, shape, batch) charted on one page: drawing costs grow
#: faster than their count (10,000 steps or 1,000 variants took minutes); the tables beside them list every one.
CHARTED_STEPS = 40
CHARTED_VARIANTS = 8
#: What the page says where the repository does not record the plan's batching decision.
DECISIONS_UNKNOWN = ("unknown: the repository does not record the plan's decisions; `gen-repo plan MANIFEST` prints "
                     "them, and `gen-repo report --manifest MANIFEST` shows them here")


@dataclass(frozen=True, slots=True)
class TensorFacts:
    """One input or output as the contract gives it (shapes are full request shapes, batch axis first)."""

    name: str
    data_type: str
    dims: tuple[int, ...]
    min_shape: tuple[int, ...]
    opt_shape: tuple[int, ...] | None
    max_shape: tuple[int | None, ...]
    values: str  # the value domain in words, "" when the contract gives none
    optional: bool = False


@dataclass(frozen=True, slots=True)
class ModelSection:
    """What the page shows about one model or ensemble (``steps`` non-empty only for an ensemble)."""

    name: str
    kind: str  # "model" or "ensemble"
    #: The version Triton serves, and why (:attr:`generator.contracts.served.ServedModel.chosen_by`).
    version: int | None
    chosen_by: str
    runtime: str  # platform or backend
    target: str  # from the lock file ("" when not a gen-repo build)
    max_batch_size: int
    batching: str
    inputs: tuple[TensorFacts, ...]
    outputs: tuple[TensorFacts, ...]
    instance_groups: tuple[str, ...]
    warmup: tuple[str, ...]
    steps: tuple[EnsembleStep, ...] = ()
    decisions: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()  # why part of it could not be read


@dataclass(frozen=True, slots=True)
class LockStatus:
    """What ``verify`` says: ``ok`` when every artifact matches the lock file; ``present`` False without one."""

    present: bool
    ok: bool
    artifacts: int | None
    problems: tuple[str, ...]
    tool_versions: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class RepositoryFacts:
    """A repository's models, lock check and lint findings, with its location as the user gave it."""

    location: str
    models: tuple[ModelSection, ...]
    lock: LockStatus
    lint_errors: int
    lint_warnings: int
    lint_findings: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ReportInputs:
    """The checked ``--smoke``, ``--perf``, ``--diff`` and ``--tune`` documents (None where not given), file names."""

    smoke: Mapping[str, Any] | None = None
    perf: Mapping[str, Any] | None = None
    diff: Mapping[str, Any] | None = None
    files: Mapping[str, str] = field(default_factory=dict)
    tune: Mapping[str, Any] | None = None


# -- The repository --------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def local_repository(location: str) -> Iterator[tuple[Path, list[Problem] | None]]:
    """Yield a local folder holding the repository at ``location``, and verify's answer when it was a bucket.

    A folder is used as it is (None: verify reads it there); s3:// and gs:// are copied to a temporary folder, removed
    afterwards, as far as the lock lists them (:func:`generator.repository.remote_copy.download_repository`).
    GenRepoError (exit 2) for a missing folder, StorageError (exit 2 or 3) for a bucket.
    """
    from generator.repository.remote_copy import download_repository
    from generator.repository.storage_urls import is_storage_url, local_location

    if not is_storage_url(location):
        folder = Path(local_location(location))  # file:///path: the folder it names
        if not folder.is_dir():
            raise GenRepoError([Problem(location, "", "not a directory")])
        refuse_symlinks(folder)
        yield folder, None
        return
    with tempfile.TemporaryDirectory(prefix="gen-repo-report-") as tmp:
        copy = download_repository(location, Path(tmp) / "repo")
        yield copy.folder, copy.problems


def _lock_status(folder: Path, location: str, verified: list[Problem] | None = None) -> LockStatus:
    """``verify``'s answer for ``folder`` (``verified``: already found for the bucket it was copied from)."""
    if not (folder / LOCK_FILE_NAME).is_file():
        return LockStatus(False, False, None, (f"no {LOCK_FILE_NAME}: not a repository gen-repo built",), ())
    problems = verify_repository(folder) if verified is None else verified
    try:
        lock = read_lock(folder)
        artifacts: int | None = len(lock["artifacts"])
        versions = tuple(sorted((str(k), str(v)) for k, v in dict(lock.get("tool_versions") or {}).items()))
    except (GenRepoError, TypeError, ValueError):
        artifacts, versions = None, ()  # a corrupt lock file: verify_repository reported it
    return LockStatus(True, not problems, artifacts, tuple(str(p) for p in problems), versions)


def _lock_models(folder: Path) -> Mapping[str, Any]:
    try:
        models = read_lock(folder).get("models")
    except (GenRepoError, OSError):
        return {}
    return models if isinstance(models, dict) else {}


def read_repository(folder: Path, location: str | None = None,
                    decisions: Mapping[str, Sequence[str]] | None = None,
                    verified: list[Problem] | None = None) -> RepositoryFacts:
    """Gather what the page shows about the repository in ``folder`` (``location``: how the user named it).

    ``verified``: verify's answer when ``folder`` is a bucket's copy (:func:`local_repository`); else it is verified.
    ``decisions``: per model the plan's decisions (``gen-repo plan``'s sentences), when a manifest was given.
    Never raises for a broken model: what could not be read is listed in its :attr:`ModelSection.problems`.
    """
    from generator.lint import lint

    where = location if location is not None else str(folder)
    locked = _lock_models(folder)
    models = tuple(_model_facts(folder, name, locked.get(name), decisions) for name in repository_models(folder))
    report = lint([folder])
    findings = tuple(str(f) for f in report.findings)
    return RepositoryFacts(where, models, _lock_status(folder, where, verified), report.errors,
                           len(report.findings) - report.errors, findings)


def _model_facts(folder: Path, name: str, lock_entry: Any, decisions: Mapping[str, Sequence[str]] | None,
                 ) -> ModelSection:
    problems: list[str] = []
    served: ServedModel | None = None
    contract: ModelContract | None = None
    try:
        served = read_served_model(FolderReader(folder), name)
        contract = ModelContract.from_served(served)
    except (OSError, GenRepoError) as error:
        problems.append(str(error))
    config = served.config if served is not None else None
    entry = lock_entry if isinstance(lock_entry, dict) else {}
    ensemble = config is not None and config.platform == "ensemble"
    runtime = (config.platform or config.backend) if config is not None else (
        (contract.platform or contract.backend) if contract is not None else "")
    known = decisions.get(name) if decisions is not None else None
    return ModelSection(
        name=name,
        kind="ensemble" if ensemble else "model",
        version=served.version if served is not None else None,
        chosen_by=served.chosen_by if served is not None else "",
        runtime=runtime,
        target=str(entry.get("target", "")),
        max_batch_size=contract.max_batch_size if contract is not None else (config.max_batch_size if config else 0),
        batching=_batching(config),
        inputs=tuple(_tensor(t) for t in contract.inputs) if contract is not None else (),
        outputs=tuple(_tensor(t) for t in contract.outputs) if contract is not None else (),
        instance_groups=_instance_groups(config) if config is not None else (),
        warmup=_warmup(config) if config is not None else (),
        steps=_steps(config) if ensemble and config is not None else (),
        decisions=tuple(known) if known is not None else (DECISIONS_UNKNOWN,),
        problems=tuple(problems),
    )


def _tensor(tensor: Any) -> TensorFacts:
    return TensorFacts(tensor.name, tensor.data_type, tuple(tensor.dims), tuple(tensor.min_shape),
                       tuple(tensor.opt_shape) if tensor.opt_shape is not None else None, tuple(tensor.max_shape),
                       tensor.values.describe() if tensor.values is not None else "", bool(tensor.optional))


def _batching(config: model_config_pb2.ModelConfig | None) -> str:
    """The config's batching in words: max_batch_size and the dynamic batcher's settings."""
    if config is None:
        return "unknown (no readable config.pbtxt)"
    if config.max_batch_size == 0:
        return "no batching (max_batch_size 0: requests carry full shapes)"
    text = f"max_batch_size {config.max_batch_size}"
    if not config.HasField("dynamic_batching"):
        return text + "; no dynamic batching"
    dynamic = config.dynamic_batching
    parts = [f"preferred_batch_size {list(dynamic.preferred_batch_size)}"] if dynamic.preferred_batch_size else []
    parts.append(f"max_queue_delay_microseconds {dynamic.max_queue_delay_microseconds}")
    return text + "; dynamic batching: " + ", ".join(parts)


def _instance_groups(config: model_config_pb2.ModelConfig) -> tuple[str, ...]:
    groups = []
    for group in config.instance_group:
        kind = model_config_pb2.ModelInstanceGroup.Kind.Name(group.kind)
        text = f"{group.name or '(unnamed)'}: count {group.count}, {kind}"
        if group.gpus:
            text += f", gpus {list(group.gpus)}"
        if group.profile:
            text += f", profile {list(group.profile)}"
        groups.append(text)
    return tuple(groups)


def _warmup(config: model_config_pb2.ModelConfig) -> tuple[str, ...]:
    samples = []
    for sample in config.model_warmup:
        inputs = []
        for name, data in sorted(sample.inputs.items()):
            source = data.WhichOneof("input_data_type") or "none"
            detail = f" {data.input_data_file}" if source == "input_data_file" else ""
            inputs.append(f"{name} {model_config_pb2.DataType.Name(data.data_type)} dims {list(data.dims)} "
                          f"{source}{detail}")
        samples.append(f"{sample.name or '(unnamed)'}: batch_size {sample.batch_size}, count "
                       f"{max(sample.count, 1)}; " + "; ".join(inputs))
    return tuple(samples)


def _steps(config: model_config_pb2.ModelConfig) -> tuple[EnsembleStep, ...]:
    return tuple(EnsembleStep(step.model_name, dict(sorted(step.input_map.items())),
                              dict(sorted(step.output_map.items())))
                 for step in config.ensemble_scheduling.step)


# -- The --smoke, --perf, --diff and --tune documents ----------------------------------------------------------------
def load_inputs(smoke: str | None = None, perf: str | None = None, diff: str | None = None,
                tune: str | None = None) -> ReportInputs:
    """Read and check the given ``--json`` files; GenRepoError with every problem of every file at once."""
    given = {"smoke": smoke, "perf": perf, "diff": diff, "tune": tune}
    documents: dict[str, Any] = {}
    problems: list[Problem] = []
    for option, path in given.items():
        if path is None:
            continue
        try:
            document = load_document(path)
        except GenRepoError as error:
            problems.extend(error.problems)
            continue
        found = schema_problems(document, INPUT_SCHEMAS[option], path, source=Path(path))
        problems.extend(found)
        documents[option] = document
    if problems:
        raise GenRepoError(problems, summary="the report's input files are not what gen-repo smoke, perf, diff and "
                                             "tune write with --json")
    files = {option: path for option, path in given.items() if path is not None}
    return ReportInputs(documents.get("smoke"), documents.get("perf"), documents.get("diff"), files,
                        documents.get("tune"))


# -- The page --------------------------------------------------------------------------------------------------------
def _chart_ranges(model: ModelSection) -> list[ShapeRange]:
    """Every input of ``model`` that has axes, as the range chart draws it."""
    return [ShapeRange(t.name, t.min_shape, t.opt_shape, t.max_shape, model.max_batch_size > 0)
            for t in model.inputs if t.min_shape]


def _range_chart(model: ModelSection, index: int) -> str:
    ranges = _chart_ranges(model)[:CHARTED_INPUTS]
    return shape_range_chart(ranges, salt=f"ranges-{index}") if ranges else ""


def _perf_groups(perf: Mapping[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
    """Per model its variants (request shape and batch size), each with its rows and chart, in a stable order."""
    if perf is None:
        return {}
    ceilings = {c["model"]: c.get("throughput") for c in perf.get("ceilings", [])}
    variants: dict[tuple[str, str, int], list[Mapping[str, Any]]] = {}
    for row in perf["results"]:
        variants.setdefault((row["model"], row["shape"], row["batch_size"]), []).append(row)
    out: dict[str, list[dict[str, Any]]] = {}
    for index, ((model, shape, batch), rows) in enumerate(sorted(variants.items())):
        ordered = sorted(rows, key=lambda r: (r["concurrency"], r["engine"]))
        points = [PerfPoint(r["concurrency"], float(r["throughput"]), r["p50_ms"], r["p99_ms"]) for r in ordered]
        title = f"{model}: {shape} shape, batch {batch}"
        chart = (perf_chart(title, points, salt=f"perf-{index}", ceiling=ceilings.get(model))
                 if index < CHARTED_VARIANTS else "")
        out.setdefault(model, []).append({"title": title, "rows": ordered, "chart": chart})
    return out


def _settings(candidate: Mapping[str, Any]) -> str:
    """A tune candidate's served settings in words."""
    preferred = candidate["preferred_batch_size"]
    return (f"{candidate['kind']} x{candidate['instance_count']}, delay {candidate['max_queue_delay_microseconds']} "
            f"us, preferred {list(preferred) if preferred else 'none'}")


def _tune_models(tune: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Per tuned model its chart (every candidate, baseline and best marked) and its candidates' rows."""
    out: dict[str, dict[str, Any]] = {}
    for index, entry in enumerate((tune or {}).get("models", [])):
        baseline, best = _settings(entry["baseline"]), _settings(entry["best"])
        points, rows = [], []
        for candidate in entry["candidates"]:
            settings = _settings(candidate)
            for result in candidate["results"]:
                points.append(TunePoint(int(result["concurrency"]), float(result["throughput"]),
                                        float(result["p99_ms"]), baseline=settings == baseline, best=settings == best))
            rows.append({"settings": settings, "results": candidate["results"], "score": candidate["score"],
                         "within_budget": candidate["within_budget"],
                         "role": "best" if settings == best else "baseline" if settings == baseline else ""})
        title = f"{entry['model']}: {len(entry['candidates'])} candidate(s), p99 against throughput"
        ceiling = (entry.get("ceiling") or {}).get("throughput")
        for row in rows:
            row["of_ceiling"] = round(row["score"] / ceiling, 3) if ceiling else None
        chart = tune_chart(title, points, f"tune-{index}", ceiling=ceiling)
        out[entry["model"]] = {"title": title, "chart": markupsafe.Markup(chart), "ceiling": entry.get("ceiling"),
                               "rows": rows, "entry": entry, "baseline": baseline, "best": best}
    return out


def _smoke_by_model(smoke: Mapping[str, Any] | None) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for result in (smoke or {}).get("results", []):
        out.setdefault(result["model"], []).append(result)
    return out


def _smoke_summary(smoke: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if smoke is None:
        return None
    counts = {status: 0 for status in ("passed", "failed", "skipped", "error")}
    for result in smoke["results"]:
        counts[result["status"]] += 1
    return {"counts": counts, "ok": counts["failed"] == 0 and counts["error"] == 0 and bool(smoke["results"]),
            "server_url": smoke.get("server_url", ""), "total_s": sum(r["duration_s"] for r in smoke["results"])}


def render_report(facts: RepositoryFacts, inputs: ReportInputs | None = None) -> str:
    """The HTML page for ``facts`` and the given smoke/perf/diff documents: deterministic, self-contained text."""
    given = inputs or ReportInputs()
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(resource_dir("templates") / "report"),
        autoescape=True,  # every string from a repository or a JSON file is text, never markup
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    models = [m for m in facts.models if m.kind == "model"]
    ensembles = [m for m in facts.models if m.kind == "ensemble"]
    anchors = {m.name: f"m{i}" for i, m in enumerate(facts.models)}
    charts = {m.name: markupsafe.Markup(_range_chart(m, i)) for i, m in enumerate(facts.models)}
    counts = {m.name: len(_chart_ranges(m)) for m in facts.models}
    uncharted = {name: count for name, count in counts.items() if count > CHARTED_INPUTS}  # name -> inputs with axes
    graphs = {m.name: markupsafe.Markup(ensemble_svg(m.name, [t.name for t in m.inputs[:CHARTED_STEPS]],
                                                     [t.name for t in m.outputs[:CHARTED_STEPS]],
                                                     m.steps[:CHARTED_STEPS], salt=f"g{i}"))
              for i, m in enumerate(facts.models) if m.kind == "ensemble"}
    perf = {model: [{**group, "chart": markupsafe.Markup(group["chart"])} for group in groups]
            for model, groups in _perf_groups(given.perf).items()}
    smoke_by_model = _smoke_by_model(given.smoke)
    tune = _tune_models(given.tune)
    known = {m.name for m in facts.models}
    template = environment.get_template("page.html.j2")
    return template.render(
        facts=facts, models=models, ensembles=ensembles, anchors=anchors, charts=charts, graphs=graphs,
        uncharted=uncharted, charted_inputs=CHARTED_INPUTS, charted_steps=CHARTED_STEPS,
        charted_variants=CHARTED_VARIANTS,
        smoke=given.smoke, smoke_summary=_smoke_summary(given.smoke), smoke_by_model=smoke_by_model,
        smoke_other=sorted(set(smoke_by_model) - known), perf=perf, perf_doc=given.perf,
        perf_other=sorted(set(perf) - known), diff=given.diff, files=given.files, tune=tune, tune_doc=given.tune,
        tune_other=sorted(set(tune) - known),
        targets=sorted({m.target or m.runtime for m in facts.models}),
    )


def build_report(repository: str, inputs: ReportInputs | None = None, manifest: str | None = None) -> str:
    """The page for the repository at ``repository`` (a folder, ``s3://`` or ``gs://``).

    ``manifest``: the one it was built from; the page then shows its plan's decisions (:func:`plan_decisions`).
    """
    with local_repository(repository) as (folder, verified):
        decisions = plan_decisions(manifest, _lock_models(folder)) if manifest is not None else None
        facts = read_repository(folder, repository, decisions, verified)
    return render_report(facts, inputs)


def plan_decisions(manifest: str, locked: Mapping[str, Any]) -> dict[str, list[str]]:
    """Per model and ensemble of ``manifest`` the plan's decisions, as ``gen-repo plan`` printed them for the build.

    ``locked``: the lock file's ``models``. Each model is planned for the target its build had (``--target python``
    included), never ``auto`` resolved again on this machine.
    """
    from dataclasses import replace

    from generator.manifest.loading import load_manifest
    from generator.planning.options import BuildOptions
    from generator.planning.plan import describe_plan, plan_repository
    from generator.planning.targets import make_target_resolver

    loaded = load_manifest(Path(manifest), keep_going=True)
    built = {name: entry.get("target") for name, entry in locked.items() if isinstance(entry, Mapping)}
    loaded = replace(loaded, models=tuple(replace(m, target=built.get(m.name) or m.target) for m in loaded.models))
    plan = plan_repository(loaded, make_target_resolver(BuildOptions(), []), keep_going=True)
    summary = describe_plan(plan)
    return {entry["name"]: list(entry["decisions"]) for entry in [*summary["models"], *summary["ensembles"]]}
