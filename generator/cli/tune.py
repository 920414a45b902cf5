"""``gen-repo tune``: search each model's served settings on this machine; keep the best in the manifest."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from generator.cli._common import (
    AT_LEAST_1,
    NON_NEGATIVE,
    POSITIVE,
    OutputFile,
    report_errors,
    summary_md_option,
    write_output,
)
from generator.cli._output import console, echo
from generator.errors import EXIT_FAILED, GenRepoError, Problem


def _figure(candidate: Any) -> str:
    """A candidate's throughput with its noise, marked unsettled where its windows never agreed."""
    if candidate.error:
        return "-"
    return f"{candidate.score:.1f} +-{candidate.noise:.0%}" + ("" if candidate.settled else " unsettled")


def _load(report: Any) -> str:
    after = f", after {' '.join(f'{v:.2f}' for v in report.load_after)}" if report.load_after else ""
    return f"load {' '.join(f'{v:.2f}' for v in report.load)} before{after}"


def _table(report: Any) -> None:
    from rich.table import Table

    table = Table(title=f"gen-repo tune ({report.engine}; {report.hardware}; {_load(report)})")
    for column in ("model", "concurrency", "baseline /s", "best /s", "gain", "of ceiling", "best setting", "p99 ms",
                   "tried", "stopped"):
        table.add_column(column)
    for tune in report.models:
        if tune.search is None:
            table.add_row(tune.model, "", "", "", "", "", "", "", "0", f"not tuned: {tune.skipped}")
            continue
        base, best = tune.search.baseline, tune.search.best
        s = best.setting
        gain = "kept" if tune.search.kept else \
            f"{best.score / base.score:.2f}x" if base.score > 0 and best.error is None else "-"
        table.add_row(tune.model, ", ".join(map(str, tune.concurrency)), _figure(base), _figure(best), gain,
                      _of_ceiling(tune),
                      f"{s.instance_count} x {s.kind}, delay {s.max_queue_delay_us} us, preferred "
                      f"{list(s.preferred_batch_size) or 'none'}",
                      "-" if best.error else f"{best.p99_ms:.1f}", str(len(tune.search.candidates)),
                      tune.search.stopped)
    console(stderr=True).print(table)
    for tune in report.models:
        if tune.ceiling is not None:
            echo(f"{tune.model}: {tune.ceiling.describe()}", err=True)


def _of_ceiling(tune: Any) -> str:
    """The best's fraction of the model's ceiling (``0.34 of 5120/s``), or ``-`` where there is none."""
    from generator.serving.ceiling import fraction

    share = fraction(tune.search.best.score, tune.ceiling) if tune.search.best.error is None else None
    return "-" if share is None else f"{share:.2f} of {tune.ceiling.throughput:.0f}/s"


def _section(report: Any, written: str | None) -> Any:
    """The --summary-md section: a row per model (baseline, best, setting), the engine and machine as a note."""
    from generator.reports.markdown import SummaryRow, SummarySection

    rows = []
    for tune in report.models:
        if tune.search is None:
            rows.append(SummaryRow(tune.model, "not tuned", tune.skipped))
            continue
        base, best, s = tune.search.baseline, tune.search.best, tune.search.best.setting
        failed = best.error is not None
        detail = best.error or (
            f"{base.score:.1f}/s -> {_figure(best)} (p99 {best.p99_ms:.1f} ms): "
            f"{s.instance_count} x {s.kind}, delay {s.max_queue_delay_us} us, preferred "
            f"{list(s.preferred_batch_size) or 'none'}; {len(tune.search.candidates)} candidates; "
            + (f"{share} ceiling" if (share := _of_ceiling(tune)) != "-" else "ceiling not measured"))
        if not failed and tune.search.kept:
            from generator.tuning.run import KEPT

            detail = f"{KEPT} ({_figure(base)}; {len(tune.search.candidates)} candidates)"
        rows.append(SummaryRow(tune.model, "failed" if failed else "kept" if tune.search.kept else "tuned", detail,
                               failed))
    tuned = sum(1 for r in rows if r.status == "tuned")
    note = (f"engine {report.engine}; {report.hardware}; {_load(report)}; "
            + (f"written into {written}" if written else "nothing written"))
    return SummarySection("gen-repo tune", {"tuned": tuned, "failed": sum(r.failed for r in rows)}, rows,
                          ok=not any(r.failed for r in rows), note=note, columns=("model", "status", "result"))


def _resolve(target: Path, repo: Path | None) -> tuple[Path | None, Path]:
    """(manifest or None, repository folder) from TARGET (a manifest or a repository) and --repo."""
    if target.is_dir():
        if repo is not None:
            raise GenRepoError([Problem("--repo", "", "give --repo only with a manifest (TARGET is a repository)")])
        return None, target
    if not target.is_file():
        raise GenRepoError([Problem(str(target), "", "no such manifest or repository folder")])
    from generator.manifest.loading import read_manifest

    document = read_manifest(target)
    if document.problems:
        raise GenRepoError(list(document.problems))
    repository = repo if repo is not None else document.output_dir
    if not repository.is_dir():  # the usual first try: tune before any build
        code = any("factory" in (entry.get("source") or {}) for entry in document.entries)
        build = " ".join(["gen-repo build", str(target), *(["-o", str(repo)] if repo is not None else []),
                          *(["--allow-code"] if code else [])])
        other = "give the built one with --repo DIR" if repo is None else "check --repo"
        raise GenRepoError([Problem(str(repository), "", f"no built repository here: build it first ({build}), or "
                                    f"{other}")])
    return target, repository


@click.command("tune")
@click.argument("target", type=click.Path(path_type=Path))
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The built repository (default: the manifest's `output`); TARGET is then its manifest.")
@click.option("--model", "models", multiple=True, help="Only this model (repeatable; default: all).")
@click.option("--budget", type=NON_NEGATIVE, default=120.0, show_default=True,
              help="Seconds of search per model, its baseline included (no candidate starts after it).")
@click.option("--p99-ms", "p99_ms", type=POSITIVE, default=None,
              help="Latency budget: a candidate whose p99 is above it never becomes the best.")
@click.option("--concurrency", "concurrency", type=AT_LEAST_1, multiple=True,
              help="Concurrent requests (repeatable; default: Triton's rule 2 x max_batch_size x instances, at most "
                   "64).")
@click.option("--window", type=POSITIVE, default=1.0, show_default=True, help="Seconds per measurement window.")
@click.option("--tolerance", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05,
              show_default=True,
              help="Relative spread within which the last 3 windows must agree (and the least gain acted on).")
@click.option("--settle", type=NON_NEGATIVE, default=None,
              help="Seconds one measurement may take lengthening its windows until they agree (default: 15); a "
                   "figure still above the tolerance then is unsettled.")
@click.option("--engine", type=click.Choice(["auto", "perf_analyzer", "loop"]), default="auto", show_default=True,
              help="perf_analyzer where its binary runs (auto), or the built-in load loop in separate processes.")
@click.option("--perf-analyzer", "perf_analyzer_path", default=None, help="Path of a perf_analyzer binary.")
@click.option("--tritonserver", default=None, help="Path of the tritonserver binary (default: PATH, nvidia-pytriton).")
@click.option("--write/--no-write", default=True, show_default=True,
              help="Write each model's best as a `tuned:` block into the manifest (TARGET a manifest).")
@click.option("--report", "report_file", type=OutputFile(), default=None,
              help="Also write the tune report (what `gen-repo report --tune` charts) as JSON to this file.")
@click.option("--json", "json_output", is_flag=True, help="Print the tune report as JSON on stdout.")
@summary_md_option
@report_errors
def command(target: Path, repo: Path | None, models: tuple[str, ...], budget: float, p99_ms: float | None,
            concurrency: tuple[int, ...], window: float, tolerance: float, settle: float | None, engine: str,
            perf_analyzer_path: str | None, tritonserver: str | None, write: bool, report_file: Path | None,
            json_output: bool, summary_md: Path | None = None) -> None:
    """Search each model's instance count, queue delay and preferred batch sizes on this machine.

    TARGET is the manifest (its built repository is its `output`, or --repo) or a repository folder (then nothing is
    written). One tritonserver in explicit model-control mode loads each candidate with a config override; the
    search starts at the generated config, climbs to the best neighbour while it gains beyond both figures' noise
    (windows lengthened until they agree, up to --settle s; a figure still noisier is unsettled), and stops there or
    at --budget. Never changed: max_batch_size, inputs, outputs, anything a client sees, or a batch beyond the
    engine's profile. With a manifest, each best that beat the generated setting beyond the noise is written into it
    as a `tuned:` block (atomically; the next build reproduces it); otherwise nothing is written for that model.
    Exit 1 when no candidate of a model could be measured.
    """
    from generator.serving.loadgen import Windows
    from generator.tuning.manifest_block import tuned_block, write_tuned
    from generator.tuning.run import DEFAULT_SETTLE_S, TuneRun, models_to_write, tune_repository

    settle = DEFAULT_SETTLE_S if settle is None else settle
    manifest, repository = _resolve(target, repo)
    run = TuneRun(repository, tuple(models), budget, p99_ms, tuple(concurrency),
                  Windows(window_s=window, tolerance=tolerance, settle_s=settle), engine, perf_analyzer_path,
                  tritonserver)
    report = tune_repository(run, progress=(lambda line: None) if json_output else
                             (lambda line: echo(line, err=True)))
    written = None
    kept = models_to_write(report)
    if write and manifest is not None and kept:
        write_tuned(manifest, {m.model: tuned_block(m.search.best, hardware=report.hardware, engine=report.engine,
                                                    concurrency=m.concurrency)
                               for m in kept if m.search is not None})
        written = str(manifest)
    document = report.to_dict()
    if report_file is not None:
        write_output(report_file, json.dumps(document, indent=2, sort_keys=True) + "\n", "--report",
                     [written] if written else [])
    if summary_md is not None:
        from generator.reports.markdown import append_summary

        append_summary(summary_md, _section(report, written), [str(f) for f in (written, report_file) if f])
    if json_output:
        echo(json.dumps(document, indent=2, sort_keys=True))
    else:
        _table(report)
        for note in report.notes:
            echo(f"note: {note}", err=True)

        echo(f"tuned settings written into {written}" if written else "nothing written", err=True)
    failed = [m.model for m in report.models if m.search is not None and not m.measured]
    if failed:
        echo(f"no candidate could be measured for: {', '.join(failed)}", err=True)
        sys.exit(EXIT_FAILED)
