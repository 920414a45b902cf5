"""The held-out run: architectures gen-repo was never tuned on (tests/heldout), built, served and checked.

One manifest (``tests/heldout/gen-repo.yaml``, or the subset asked for) goes through ``plan`` and ``build``
(python target, ``--keep-going`` so one failure does not hide the others); every model that built is smoke-tested
in a real Triton launched for the run, and every stored reference output is checked against its contract's range
(:func:`tests.repository_checks.outputs_outside_contract`). Each model ends in one row: ``served`` (built, every
smoke check passed, every output inside its range), ``refused at plan`` (with the reason), or ``failed`` (the stage
and why). ``bench/heldout_zoo.py`` runs the whole set and prints the table; ``tests/test_heldout.py`` runs a subset.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.repository_checks import outputs_outside_contract

HELDOUT = Path(__file__).resolve().parent / "heldout"


@dataclass
class Row:
    """One held-out model's outcome."""

    name: str
    outcome: str  # "served", "refused at plan", "failed"
    detail: str = ""
    build_s: float = 0.0
    smoke: dict[str, str] = field(default_factory=dict)  # check -> status
    outputs_checked: int = 0
    notes: tuple[str, ...] = ()


def _entries(models: Sequence[str] | None) -> list[dict[str, Any]]:
    entries = yaml.safe_load((HELDOUT / "gen-repo.yaml").read_text())["models"]
    if models is None:
        return entries
    unknown = set(models) - {e["name"] for e in entries}
    if unknown:
        raise ValueError(f"not held-out models: {sorted(unknown)}")
    return [e for e in entries if e["name"] in models]


def write_manifest(folder: Path, models: Sequence[str] | None = None) -> Path:
    """The held-out manifest (or the subset ``models``) in ``folder``, spec paths absolute."""
    entries = [{**e, "spec": str(HELDOUT / e["spec"])} for e in _entries(models)]
    path = folder / "gen-repo.yaml"
    path.write_text(yaml.safe_dump({"defaults": {"target": "python", "warmup": True}, "models": entries},
                                   sort_keys=False))
    return path


def run_heldout(work: Path, models: Sequence[str] | None = None, *, jobs: int = 2) -> list[Row]:
    """Plan, build, smoke and range-check the held-out models in ``work`` (a fresh folder); one row per model."""
    from generator.building.pipeline import BuildOptions, build_repository
    from generator.serving.smoke_results import SmokeOptions
    from generator.serving.smoke_session import smoke_session

    manifest = write_manifest(work, models)
    options = BuildOptions(allow_code=True, keep_going=True, target="python", cache_dir=work / "cache", jobs=jobs,
                           code_path=(str(HELDOUT),), allow_outside=True)
    repository = work / "model_repository"
    started = time.perf_counter()
    report = build_repository(manifest, options, output_dir=repository)
    rows: dict[str, Row] = {}
    for result in report.models:
        if result.status in ("built", "cached"):
            rows[result.name] = Row(result.name, "served", build_s=result.seconds, notes=result.notes)
            continue
        why = "; ".join(p.message for p in result.problems)
        outcome = "refused at plan" if result.stage == "plan" else "failed"
        rows[result.name] = Row(result.name, outcome, f"stage {result.stage}: {why}", result.seconds,
                                notes=result.notes)
    built = [name for name, row in rows.items() if row.outcome == "served"]
    if built:
        smoke = smoke_session(str(repository), url=None, protocol="grpc", models=built,
                              options=SmokeOptions(burst=16, concurrency=4))
        for result in smoke.results:
            row = rows[result.model]
            row.smoke[result.check] = result.status
            if result.status in ("failed", "error"):
                row.outcome = "failed"
                row.detail += f"smoke {result.check} {result.status}: {result.message}; "
        for name in built:
            checked, problems = outputs_outside_contract(repository, [name])
            rows[name].outputs_checked = checked
            if problems:
                rows[name].outcome = "failed"
                rows[name].detail += "; ".join(problems)
    _ = time.perf_counter() - started
    return list(rows.values())


def table(rows: Sequence[Row]) -> str:
    """The rows as a Markdown table: model, outcome, build seconds, smoke checks passed, outputs in range, detail."""
    lines = ["| model | outcome | build s | smoke checks passed | stored outputs inside the contract | detail |",
             "| --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        passed = sum(s == "passed" for s in row.smoke.values())
        skipped = [c for c, s in row.smoke.items() if s == "skipped"]
        smoke = f"{passed}/{len(row.smoke)}" + (f" ({', '.join(skipped)} skipped)" if skipped else "")
        inside = f"{row.outputs_checked}/{row.outputs_checked}" if row.outcome == "served" else "-"
        lines.append(f"| {row.name} | {row.outcome} | {row.build_s:.1f} | {smoke if row.smoke else '-'} | {inside} "
                     f"| {row.detail.strip('; ') or '-'} |")
    return "\n".join(lines)
