"""The repository manifest (``gen-repo.yaml`` or JSON): which GraphSpecs become which Triton models.

Schema first, then paths resolved (confined to the manifest's folder) and GraphSpecs loaded into plain data
(:mod:`generator.manifest.entries`), every problem located. docs/manifest.md describes the format.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from generator.confinement import output_overlap_problems
from generator.errors import GenRepoError, Problem, json_pointer
from generator.manifest.entries import (
    DICT_MERGED_OPTIONS,
    OPTION_KEYS,
    Manifest,
    ManifestEnsemble,
    ManifestModel,
    ModelSource,
    ProfilesFile,
    RefusedModel,
    SampleSource,
)
from generator.manifest.options import name_problems, option_problems, tuned_problems
from generator.manifest.overrides import OVERRIDE_KEYS, apply_overrides
from generator.manifest.proto_ranges import MAX_BATCH_SIZE_FIELD, VERSION_FIELD, number_problems
from generator.naming import model_name_from_graph, model_name_problems
from generator.specs.documents import load_document
from generator.specs.graphspec import GraphSpec
from generator.specs.json_schema import schema_problems
from generator.specs.schema import load_graphspecs, validate_document
from generator.triton.ensemble import Step

__all__ = [
    "EntryStatus",
    "LoadedEntry",
    "ManifestDocument",
    "SpecCache",
    "load_manifest",
    "read_manifest",
    "read_paths",
]

DEFAULT_OUTPUT = "model_repository"
#: Sample file kinds by suffix (both hold plain arrays; neither can carry code).
_SAMPLE_SUFFIXES = {".npz": "npz", ".safetensors": "safetensors"}
MANIFEST_SCHEMA = "manifest.schema.json"
#: AITune's saved optimization profiles (``profiles: {aitune: ...}``).
AITUNE_PROFILES_SCHEMA = "aitune_profiles.schema.json"


@dataclass(frozen=True, slots=True)
class _Graph:
    """What a spec loader returns per graph (same fields as ``generator.specs.schema.LoadedGraph``)."""

    file: Path
    pointer: str
    module_name: str | None
    graph: GraphSpec
    assumptions: tuple[str, ...] = ()
    document: Any = field(default=None, repr=False, compare=False)


# -- Loading ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ManifestDocument:
    """A manifest read and schema-checked, before its models load: everything loading one entry needs.

    Entries as written, paths resolved. ``problems`` are those of the document itself (``output``, ``code_path``).
    """

    file: Path
    base_dir: Path
    output_dir: Path
    defaults: Mapping[str, Any]
    code_path: tuple[Path, ...]
    entries: tuple[Mapping[str, Any], ...]
    ensembles: tuple[ManifestEnsemble, ...]
    allow_outside: bool
    problems: tuple[Problem, ...]


@dataclass(frozen=True, slots=True)
class EntryStatus:
    """What the manifest's own checks need of one loaded ``models:`` entry.

    ``name`` labels it: the entry's name, else the name derived from its graph, else ``models[<i>]``; ``loaded``
    says whether a model came of it (its name then takes part in the name checks); ``problems`` are all of its own.
    """

    index: int
    name: str
    loaded: bool
    problems: tuple[Problem, ...]


@dataclass(frozen=True, slots=True)
class LoadedEntry:
    """One ``models:`` entry after loading: its model (None when it cannot be loaded) and its status."""

    model: ManifestModel | None
    status: EntryStatus


def read_manifest(path: Path | str, *, allow_outside: bool = False) -> ManifestDocument:
    """Read and schema-check a manifest and resolve its own paths; raise GenRepoError on schema problems.

    ``allow_outside`` as in :func:`load_manifest`. The models are loaded by :func:`load_entry`.
    """
    path = Path(path)
    file = str(path)
    document = load_document(path)
    problems = schema_problems(document, MANIFEST_SCHEMA, file, strict_integers=True, source=path)
    if problems:
        raise GenRepoError(problems)
    base_dir = path.resolve().parent

    output_raw = document.get("output", DEFAULT_OUTPUT)
    output_dir, message = _resolve(base_dir, output_raw, allow_outside)
    if message:
        problems.append(Problem(file, "/output", message))

    code_path = []
    for index, raw in enumerate(document.get("code_path") or []):
        folder, message = _resolve(base_dir, raw, allow_outside)
        if message:
            problems.append(Problem(file, f"/code_path/{index}", message))
        elif not folder.is_dir():
            problems.append(Problem(file, f"/code_path/{index}",
                                    _not_found("code_path folder", raw, base_dir, allow_outside)))
        code_path.append(folder)
    for index, ensemble in enumerate(document.get("ensembles") or []):
        for key, field_descriptor in (("version", VERSION_FIELD), ("max_batch_size", MAX_BATCH_SIZE_FIELD)):
            if key in ensemble:
                problems += number_problems(ensemble[key], field_descriptor, file, ("ensembles", index, key))
    read = ManifestDocument(path, base_dir, output_dir, dict(document.get("defaults") or {}), tuple(code_path),
                            tuple(document["models"]), _load_ensembles(document.get("ensembles") or []),
                            allow_outside, ())
    if not any(p.pointer == "/output" for p in problems):
        problems += output_overlap_problems(output_dir, read_paths(read), file, "/output", resolved=True)
    return replace(read, problems=tuple(problems))


def read_paths(document: ManifestDocument) -> list[tuple[str, Path | str]]:
    """What loading and building ``document`` reads (an output folder must contain none of it).

    The manifest's folder, its code_path folders and each entry's spec, source, sample and profiles files, resolved
    as loading resolves them. Paths that cannot be resolved are left out: loading the entry reports them.
    """
    out: list[tuple[str, Path | str]] = [("the manifest's folder", document.base_dir)]
    out += [(f"code_path folder /code_path/{i}", folder) for i, folder in enumerate(document.code_path)]
    folders: dict[str, str] = {}  # resolved once per folder: entries' files share a few (bench_cli's 1,000 models)
    resolved: dict[str, str | None] = {}  # and many entries share a spec file
    for index, entry in enumerate(document.entries):
        spec, source, samples = entry.get("spec"), entry.get("source"), entry.get("samples")
        raws = [("spec", spec if isinstance(spec, str) else spec.get("file") if isinstance(spec, Mapping) else None),
                ("samples", samples if isinstance(samples, str) else
                 samples.get("file") if isinstance(samples, Mapping) else None)]
        if isinstance(source, Mapping):
            raws += [(f"source/{kind}", raw) for kind, raw in source.items() if kind != "factory"]
        if isinstance(profiles := entry.get("profiles"), Mapping):
            raws.append(("profiles/aitune", profiles.get("aitune")))
        for what, raw in raws:
            if not isinstance(raw, str):
                continue
            if raw not in resolved:
                resolved[raw] = _real_file(document.base_dir, raw, folders)
            if (found := resolved[raw]) is not None:
                out.append((f"the file at /models/{index}/{what}", found))
    return out


def _real_file(base_dir: Path, raw: str, folders: dict[str, str]) -> str | None:
    """``os.path.realpath(base_dir / raw)`` with the folder part resolved once per folder; None when it cannot be."""
    folder, name = os.path.split(raw)
    try:
        if folder not in folders:
            folders[folder] = os.path.realpath(os.path.join(base_dir, folder))
        if name in ("", ".", ".."):
            return os.path.realpath(os.path.join(folders[folder], name))
        candidate = os.path.join(folders[folder], name)
        return os.path.realpath(candidate) if os.path.islink(candidate) else candidate
    except (OSError, ValueError):  # NUL, a name too long: loading the entry reports it
        return None


#: Spec files already loaded, by resolved path: their graphs, or their problems.
SpecCache = dict[Path, tuple[list[_Graph], list[Problem]]]


def load_entry(document: ManifestDocument, index: int, cache: SpecCache | None = None) -> LoadedEntry:
    """Load ``models[index]`` of a read manifest: its GraphSpec, source, samples and merged options, all checked.

    ``cache`` shares spec files loaded by earlier entries (several models may come from one tune report).
    """
    entry = document.entries[index]
    model, problems = _load_model(document.file, document.base_dir, index, entry, document.defaults,
                                  document.allow_outside, {} if cache is None else cache)
    name = entry.get("name") or (model.name if model is not None else f"models[{index}]")
    return LoadedEntry(model, EntryStatus(index, name, model is not None, tuple(problems)))


def check_entries(
    document: ManifestDocument, entries: Sequence[EntryStatus], *, keep_going: bool = False
) -> tuple[RefusedModel, ...]:
    """The manifest's own checks once every entry is loaded (names, ensemble names); return the refused entries.

    ``entries``: every entry's status, in manifest order. Raise GenRepoError carrying every problem: the
    document's, the names', and those of the entries unless ``keep_going``, which refuses those entries instead
    (see :func:`load_manifest`).
    """
    file = str(document.file)
    problems = list(document.problems)
    refused: list[RefusedModel] = []
    failed: list[str] = []
    named: list[tuple[int, str]] = []
    for entry in entries:
        if entry.problems:
            failed.append(repr(entry.name))
            if keep_going:
                refused.append(RefusedModel(entry.index, entry.name, tuple(_dedupe(list(entry.problems)))))
                continue
        problems.extend(entry.problems)
        if entry.loaded:
            named.append((entry.index, entry.name))
    problems.extend(name_problems(file, named))
    problems.extend(_ensemble_name_problems(file, document.ensembles,
                                            [name for _, name in named] + [r.name for r in refused]))
    if problems:
        summary = f"refused: {', '.join(failed)} (--keep-going builds the other models)" if failed else ""
        raise GenRepoError(_dedupe(problems), summary)
    return tuple(refused)


def load_manifest(
    path: Path | str | ManifestDocument, *, allow_outside: bool = False, keep_going: bool = False
) -> Manifest:
    """Load and check a manifest; raise GenRepoError carrying every problem found.

    ``allow_outside`` permits paths leaving the manifest's folder (``..``, absolute, a symlink). With ``keep_going`` a
    model whose own entry has problems is returned in :attr:`Manifest.refused`; problems of the document itself still
    raise. A :class:`ManifestDocument` (:func:`read_manifest`) is loaded as it was read.
    """
    document = path if isinstance(path, ManifestDocument) else read_manifest(path, allow_outside=allow_outside)
    cache: SpecCache = {}
    entries = [load_entry(document, index, cache) for index in range(len(document.entries))]
    refused = check_entries(document, [e.status for e in entries], keep_going=keep_going)
    refused_indices = {r.index for r in refused}
    models = tuple(e.model for e in entries if e.model is not None and e.status.index not in refused_indices)
    return Manifest(document.file, document.base_dir, document.output_dir, models, document.defaults,
                    document.code_path, refused, document.ensembles)


def _load_ensembles(entries: list[dict[str, Any]]) -> tuple[ManifestEnsemble, ...]:
    """The ``ensembles:`` entries as data (the schema has checked their form; the plan checks the wiring)."""
    out = []
    for index, entry in enumerate(entries):
        factory = (entry.get("source") or {}).get("factory")
        out.append(ManifestEnsemble(
            index=index,
            name=entry["name"],
            version=int(entry.get("version", 1)),
            steps=tuple(Step(s["model"], dict(s["inputs"]), dict(s["outputs"])) for s in entry["steps"]),
            max_batch_size=entry.get("max_batch_size"),
            inputs=tuple(entry["inputs"]) if "inputs" in entry else None,
            outputs=tuple(entry["outputs"]) if "outputs" in entry else None,
            source=ModelSource("factory", factory=factory) if factory else None,
            compare=entry.get("compare"),
        ))
    return tuple(out)


def _ensemble_name_problems(file: str, ensembles: tuple[ManifestEnsemble, ...], models: list[str]) -> list[Problem]:
    """Ensemble names Triton cannot use, or that another ensemble or a model already uses (one folder each)."""
    problems = []
    taken = {name.lower(): f"model {name!r}" for name in models}
    for ensemble in ensembles:
        where = ensemble.pointer + "/name"
        problems += [Problem(file, where, message) for message in model_name_problems(ensemble.name)]
        if ensemble.name.lower() in taken:
            problems.append(Problem(file, where, f"ensemble name {ensemble.name!r} clashes with "
                                    f"{taken[ensemble.name.lower()]} (each needs its own folder)"))
        taken.setdefault(ensemble.name.lower(), f"ensemble {ensemble.name!r}")
    return problems


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen: set[Problem] = set()
    out = []
    for problem in problems:
        if problem not in seen:
            seen.add(problem)
            out.append(problem)
    return out


def _resolve(base_dir: Path, raw: str, allow_outside: bool) -> tuple[Path, str | None]:
    """``raw`` relative to ``base_dir``, and why it is refused (None when it is fine)."""
    candidate = os.path.join(base_dir, raw)
    try:
        # os.path, not Path.resolve: it raises RuntimeError on a symlink loop, and builds three Paths per call.
        resolved = os.path.realpath(candidate)  # ValueError: a NUL byte
        os.stat(resolved)  # OSError other than "not found": a name too long, a symlink loop, no permission
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as error:
        return Path(candidate), f"path {raw[:200]!r} cannot be used: {getattr(error, 'strerror', None) or error}"
    base = str(base_dir)
    if not allow_outside and resolved != base and not resolved.startswith(base.rstrip(os.sep) + os.sep):
        return Path(resolved), (
            f"path {raw!r} leads outside the manifest's folder {base_dir.name!r} (via '..', an absolute path or a "
            "symlink); move the file next to the manifest or allow paths outside it (--allow-outside)"
        )
    return Path(resolved), None


def _not_found(what: str, raw: str, base_dir: Path, allow_outside: bool) -> str:
    """Why ``raw`` (a manifest path) was not found: the folder it was resolved from and the path tried.

    When the user meant a file that exists relative to the folder the command runs in (a path typed from there, not
    from the manifest), the message says so and gives the path to write, or says that it needs ``--allow-outside``.
    """
    looked = os.path.normpath(os.path.join(base_dir, raw))
    message = (f"{what} {raw!r} not found: paths in a manifest are relative to its folder {base_dir}, so it was "
               f"looked for at {looked}")
    cwd = os.getcwd()
    here = os.path.normpath(os.path.join(cwd, raw))
    if here == looked or not os.path.isfile(here):
        return message
    relative = Path(os.path.relpath(os.path.realpath(here), base_dir)).as_posix()
    found = f"; {raw!r} exists relative to the current folder {cwd}: "
    if relative.split("/", 1)[0] != ".." or allow_outside:
        return f"{message}{found}write {relative!r} (relative to the manifest)"
    return (f"{message}{found}from the manifest it is {relative!r}, outside the manifest's folder: write that and "
            f"pass --allow-outside, or move the file under {base_dir}")


def _merge_options(defaults: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(dict(defaults))
    for key, value in own.items():
        if key in DICT_MERGED_OPTIONS and isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **copy.deepcopy(value)}
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _load_model(
    manifest_path: Path,
    base_dir: Path,
    index: int,
    entry: Mapping[str, Any],
    defaults: Mapping[str, Any],
    allow_outside: bool,
    cache: dict[Path, tuple[list[_Graph], list[Problem]]],
) -> tuple[ManifestModel | None, list[Problem]]:
    file = str(manifest_path)
    base = ("models", index)
    problems: list[Problem] = []

    # Source: paths must exist; a factory is only recorded (the build imports it, with --allow-code).
    source: ModelSource | None = None
    raw_source = entry.get("source")
    if raw_source is not None:
        kind = next(iter(raw_source))
        if kind == "factory":
            source = ModelSource("factory", None, raw_source["factory"])
        else:
            source_path, message = _resolve(base_dir, raw_source[kind], allow_outside)
            if message:
                problems.append(Problem(file, json_pointer((*base, "source", kind)), message))
            elif not source_path.is_file():
                problems.append(
                    Problem(file, json_pointer((*base, "source", kind)),
                            _not_found(f"{kind} file", raw_source[kind], base_dir, allow_outside))
                )
            source = ModelSource(kind, source_path, None)

    samples: SampleSource | None = None
    raw_samples = entry.get("samples")
    if raw_samples is not None:
        if isinstance(raw_samples, Mapping) and "factory" in raw_samples:
            samples = SampleSource("factory", None, raw_samples["factory"])
        else:
            raw_path = raw_samples if isinstance(raw_samples, str) else raw_samples["file"]
            where = json_pointer((*base, "samples")) + ("" if isinstance(raw_samples, str) else "/file")
            samples_path, message = _resolve(base_dir, raw_path, allow_outside)
            kind = _SAMPLE_SUFFIXES.get(samples_path.suffix.lower())
            if message:
                problems.append(Problem(file, where, message))
            elif kind is None:
                problems.append(Problem(file, where, f"samples file {raw_path!r} must be .npz or .safetensors"))
            elif not samples_path.is_file():
                problems.append(Problem(file, where, _not_found("samples file", raw_path, base_dir, allow_outside)))
            samples = SampleSource(kind or "npz", samples_path, None)

    loaded, spec_problems = _load_spec(manifest_path, base_dir, index, entry["spec"], allow_outside, cache)
    problems.extend(spec_problems)
    graph_fixes: tuple[str, ...] = ()
    shape_origins: tuple[int | None, ...] = ()
    if loaded is not None and any(key in entry for key in OVERRIDE_KEYS):
        fixed = apply_overrides(
            loaded.document, {key: entry[key] for key in OVERRIDE_KEYS if key in entry},
            manifest_file=file, model_pointer=json_pointer(base), spec_file=str(loaded.file),
            spec_pointer=loaded.pointer,
        )
        problems.extend(fixed.problems)
        if fixed.graph is None:
            loaded = None
        else:
            loaded = replace(loaded, graph=fixed.graph, assumptions=fixed.assumptions)
            graph_fixes, shape_origins = fixed.applied, fixed.origins

    own = {k: v for k, v in entry.items() if k in OPTION_KEYS}
    options = _merge_options(defaults, own)
    version = int(entry.get("version", 1))
    problems.extend(option_problems(file, index, options, frozenset(own), version))
    tuned = copy.deepcopy(entry.get("tuned"))
    if tuned is not None:
        problems.extend(tuned_problems(file, index, tuned))
    profiles_file, profile_problems = _profiles_file(file, base_dir, index, options, frozenset(own), allow_outside)
    problems.extend(profile_problems)
    if loaded is None:
        return None, problems

    name = entry.get("name") or _default_name(loaded, manifest_path)
    model = ManifestModel(
        index=index,
        name=name,
        version=version,
        graph=loaded.graph,
        spec_file=loaded.file,
        spec_pointer=loaded.pointer,
        source=source,
        target=str(options.get("target", "auto")),
        options=options,
        own_options=frozenset(own),
        assumptions=tuple(loaded.assumptions),
        module_name=loaded.module_name,
        samples=samples,
        input_values=dict(entry.get("inputs") or {}),
        graph_fixes=graph_fixes,
        shape_origins=shape_origins,
        profiles_file=profiles_file,
        tuned=tuned,
    )
    return model, problems


def _profiles_file(
    file: str, base_dir: Path, index: int, options: Mapping[str, Any], own: frozenset[str], allow_outside: bool
) -> tuple[ProfilesFile | None, list[Problem]]:
    """Read the AITune profiles file ``profiles: {aitune: ...}`` names; None when the option names none.

    Confined like every manifest path, bounded and schema-checked; the plan checks it against the model.
    """
    raw = options.get("profiles")
    if not isinstance(raw, Mapping):
        return None, []
    where = json_pointer(("models", index, "profiles", "aitune") if "profiles" in own else
                         ("defaults", "profiles", "aitune"))
    path, message = _resolve(base_dir, raw["aitune"], allow_outside)
    if message:
        return None, [Problem(file, where, message)]
    if not path.is_file():
        return None, [Problem(file, where, _not_found("AITune profiles file", raw["aitune"], base_dir, allow_outside))]
    try:
        document = load_document(path)
    except GenRepoError as error:
        return None, list(error.problems)
    problems = schema_problems(document, AITUNE_PROFILES_SCHEMA, str(path), strict_integers=True, source=path)
    if problems:
        return None, [Problem(file, where, f"AITune profiles file {raw['aitune']!r} is invalid (see below)"),
                      *problems]
    return ProfilesFile(path, tuple(document)), []


def _default_name(loaded: _Graph, manifest_path: Path) -> str:
    """Derive a model name from the graph name and the module name (tune reports) or the spec file's stem.

    The stem is used for AITune's numbered graphs ("0", "1", ...) outside a tune report, so that fixture files do
    not all become "0".
    """
    prefix = loaded.module_name
    if prefix is None and loaded.graph.name.isdigit() and loaded.file != manifest_path:
        prefix = loaded.file.name.split(".")[0]
    return model_name_from_graph(loaded.graph.name, prefix)


# -- GraphSpecs ------------------------------------------------------------------------------------------------------
def _load_spec(
    manifest_path: Path,
    base_dir: Path,
    index: int,
    spec: Any,
    allow_outside: bool,
    cache: dict[Path, tuple[list[_Graph], list[Problem]]],
) -> tuple[_Graph | None, list[Problem]]:
    file = str(manifest_path)
    pointer = json_pointer(("models", index, "spec"))
    if isinstance(spec, Mapping) and "file" not in spec:
        return _inline_spec(manifest_path, index, spec)
    raw = spec if isinstance(spec, str) else spec["file"]
    where = pointer if isinstance(spec, str) else pointer + "/file"
    spec_path, message = _resolve(base_dir, raw, allow_outside)
    if message:
        return None, [Problem(file, where, message)]
    if not spec_path.is_file():
        return None, [Problem(file, where, _not_found("spec file", raw, base_dir, allow_outside))]
    if spec_path not in cache:
        try:
            cache[spec_path] = (
                [
                    _Graph(spec_path, g.pointer, g.module_name, g.graph, tuple(g.assumptions), g.document)
                    for g in load_graphspecs(spec_path)
                ],
                [],
            )
        except GenRepoError as error:
            cache[spec_path] = ([], list(error.problems))
    graphs, spec_problems = cache[spec_path]
    if spec_problems:
        return None, [Problem(file, where, f"spec file {raw!r} is invalid (see below)"), *spec_problems]
    choices = ", ".join(_graph_labels(graphs))
    if isinstance(spec, str) or "graph" not in spec:
        if len(graphs) != 1:
            return None, [
                Problem(
                    file,
                    pointer,
                    f"{raw!r} holds {len(graphs)} graphs; pick one with {{file: {raw}, graph: <module name, "
                    f"'module/graph' or index>}} (graphs: {choices})",
                )
            ]
        return graphs[0], []
    selected = _select_graph(graphs, spec["graph"])
    if selected is None:
        message = f"no single graph {spec['graph']!r} in {raw!r} (graphs: {choices})"
        return None, [Problem(file, pointer + "/graph", message)]
    return selected, []


def _graph_labels(graphs: list[_Graph]) -> list[str]:
    return [
        f"{i}: {g.module_name}/{g.graph.name}" if g.module_name is not None else f"{i}: {g.graph.name}"
        for i, g in enumerate(graphs)
    ]


def _select_graph(graphs: list[_Graph], key: str | int) -> _Graph | None:
    """Pick the graph at index ``key``, or the only one whose module name, ``module/graph`` or name is ``key``."""
    if isinstance(key, int):
        return graphs[key] if 0 <= key < len(graphs) else None
    for label in (
        lambda g: g.module_name,
        lambda g: f"{g.module_name}/{g.graph.name}" if g.module_name is not None else None,
        lambda g: g.graph.name,
    ):
        matches = [g for g in graphs if label(g) == key]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            return None
    return None


def _inline_spec(manifest_path: Path, index: int, spec: Mapping[str, Any]) -> tuple[_Graph | None, list[Problem]]:
    """Validate and load an inline GraphSpec (bare graph or ``{graph: ...}`` wrapper) like a spec file."""
    file = str(manifest_path)
    base = json_pointer(("models", index, "spec"))
    try:
        graphs = validate_document(dict(spec), file)
    except GenRepoError as error:
        return None, [Problem(p.file, base + p.pointer, p.message, p.severity) for p in error.problems]
    if len(graphs) != 1:
        return None, [Problem(file, base, "an inline spec must hold exactly one graph")]
    g = graphs[0]
    return _Graph(manifest_path, base + g.pointer, g.module_name, g.graph, tuple(g.assumptions), g.document), []
