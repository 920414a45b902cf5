"""Each command's result as a ``--summary-md`` Markdown section (rendered by :mod:`generator.reports.markdown`).

Counts come from the result types themselves, so a section says what the command's ``--json`` says. Result types
are imported for type checking only: a summary must not pull tritonclient into ``build`` or torch into ``lint``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from generator.errors import EXIT_UNREACHABLE, EXIT_USAGE, GenRepoError, Problem
from generator.reports.markdown import SummaryRow, SummarySection, markdown_cell, markdown_line
from generator.repository.lock import LOCK_FILE_NAME

if TYPE_CHECKING:
    from generator.building.results import BuildReport
    from generator.contracts.diff import ContractDiff
    from generator.lint.run import LintReport
    from generator.repository.verify import Verification
    from generator.serving.smoke_results import SmokeReport

__all__ = ["build_summary", "diff_markdown", "diff_summary", "error_summary", "lint_summary", "smoke_summary",
           "verify_summary"]

#: Columns of a table of located problems (bad input, verify's differences).
_PROBLEM_COLUMNS = ("file", "pointer", "problem")
#: Build statuses in the order their counts are shown; ``failed`` is always shown (a zero there is the news).
_BUILD_STATUSES = ("built", "cached", "reconfigured", "kept-previous", "failed")
#: Smoke statuses a model's row calls a failure.
_SMOKE_FAILED = ("failed", "error")


def problem_rows(problems: Iterable[Problem]) -> list[SummaryRow]:
    """One row per located problem: file, JSON pointer, message (errors are failures, warnings not)."""
    return [SummaryRow(p.file, p.pointer or "/", p.message, failed=p.severity == "error") for p in problems]


def error_summary(command: str, error: GenRepoError) -> SummarySection:
    """The section of ``gen-repo COMMAND`` stopped by ``error``: why (bad input, unreachable) and every problem."""
    why = {EXIT_USAGE: "bad input", EXIT_UNREACHABLE: "unreachable"}.get(error.exit_code, "failed")
    note = f"exit {error.exit_code} ({why})" + (f": {error.summary}" if error.summary else "")
    return SummarySection(f"gen-repo {command}", {"errors": len(error.problems)}, problem_rows(error.problems),
                          ok=False, note=note, columns=_PROBLEM_COLUMNS)


def build_summary(report: BuildReport) -> SummarySection:
    """``gen-repo build``: models per status, one row per model (failed first), the repository when written."""
    statuses = [m.status for m in report.models]
    counts = {"models": len(statuses)}
    counts.update({s: statuses.count(s) for s in _BUILD_STATUSES if s in statuses or s == "failed"})
    rows = []
    for model in report.models:
        what = "; ".join(p.message for p in model.problems) or "; ".join(model.notes)
        # A model refused at plan time has no target yet; its problems name the model and the stage.
        detail = ": ".join(part for part in (model.target, what) if part)
        rows.append(SummaryRow(model.name, model.status, detail, failed=model.status in ("kept-previous", "failed")))
    if report.committed:
        note = f"repository written to {report.output_dir}"
        links: list[tuple[str, str]] = [("repository", str(report.output_dir)),
                                        ("lock file", str(Path(report.output_dir) / LOCK_FILE_NAME))]
    else:
        note, links = "nothing was written: the previous repository is untouched", []
    return SummarySection("gen-repo build", counts, rows, links, ok=report.ok, note=note,
                          columns=("model", "status", "detail"))


def smoke_summary(report: SmokeReport, files: Sequence[tuple[str, str | Path]] = ()) -> SummarySection:
    """``gen-repo smoke``: checks per status, one row per model (failed first) naming what failed and why.

    ``files`` are the reports the run wrote (label, path), e.g. ``("JUnit XML", "smoke.xml")``.
    """
    rows = []
    for model in report.models:
        results = list(report.for_model(model).values())
        bad = [r for r in results if r.status in _SMOKE_FAILED]
        skipped = [r for r in results if r.status == "skipped"]
        if bad:
            status = "error" if all(r.status == "error" for r in bad) else "failed"
            detail = "; ".join(f"{r.check}: {r.message}" for r in bad)
        else:
            status = "passed"
            detail = f"{len(results) - len(skipped)} check(s) passed" + "".join(
                f"; {r.check} skipped: {r.message}" for r in skipped)
        rows.append(SummaryRow(model, status, detail, failed=bool(bad)))
    note = f"{report.protocol} {report.server_url}"
    if not report.reachable:
        note += ": server unreachable"
    elif report.server_lost:
        note += f": server lost: {report.server_lost}"
    return SummarySection("gen-repo smoke", report.counts(), rows, [(label, str(p)) for label, p in files],
                          ok=report.exit_code == 0, note=note, columns=("model", "status", "detail"))


def lint_summary(report: LintReport, repositories: Sequence[str | Path]) -> SummarySection:
    """``gen-repo lint``: errors and warnings, one row per finding (errors first), the rules skipped and why."""
    rows = [SummaryRow(f.location, f.severity, f"{f.message} [{f.rule}]", failed=f.severity == "error")
            for f in report.findings]
    note = "; ".join(f"skipped {rule}: needs {needs}" for rule, needs in sorted(report.skipped.items()))
    links = [("repository", str(r)) for r in repositories]
    return SummarySection("gen-repo lint", {"errors": report.errors, "warnings": report.warnings}, rows, links,
                          ok=report.errors == 0, note=note, columns=("where", "severity", "finding"))


def verify_summary(result: Verification) -> SummarySection:
    """``gen-repo verify``: artifacts checked and differences from the lock file, one row per difference."""
    counts = {"differences": len(result.problems)}
    if result.artifacts is not None:  # None: the lock file itself is unreadable (a difference row says why)
        counts = {"artifacts": result.artifacts, **counts}
    note = (f"{len(result.problems)} difference(s) from {LOCK_FILE_NAME}" if result.problems
            else f"every artifact matches {LOCK_FILE_NAME}")
    return SummarySection("gen-repo verify", counts, problem_rows(result.problems),
                          [("repository", result.location)], ok=not result.problems, note=note,
                          columns=_PROBLEM_COLUMNS)


def diff_summary(diff: ContractDiff, files: Sequence[tuple[str, str | Path]] = ()) -> SummarySection:
    """``gen-repo diff``: changes by class and models by fate, one row per change (breaking first).

    ``files`` are the documents the run wrote (label, path), e.g. ``("diff (Markdown)", "diff.md")``.
    """
    rows = [SummaryRow(f"{c.model} {c.subject}", c.classification, f"{c.kind}: {c.message}", failed=c.breaking)
            for c in diff.changes]
    counts = {"breaking": diff.breaking, "compatible": diff.compatible, "models added": len(diff.added),
              "models removed": len(diff.removed), "models changed": len(diff.changed),
              "models unchanged": len(diff.unchanged)}
    note = f"{len(diff.unknown)} fact(s) not compared (contracts derived from config.pbtxt)" if diff.unknown else ""
    return SummarySection(f"gen-repo diff {diff.old} → {diff.new}", counts, rows,
                          [(label, str(path)) for label, path in files], ok=diff.breaking == 0, note=note,
                          columns=("change", "class", "detail"))


def _value_text(value: Any) -> str:
    return "—" if value is None else json.dumps(value, sort_keys=True)


def diff_markdown(diff: ContractDiff) -> str:
    """The diff as a Markdown document (``--markdown FILE``): counts, the changes table, the unknown facts."""
    verdict = "breaking changes" if diff.breaking else "nothing breaking"
    lines = [f"# gen-repo diff: {verdict}", "", f"{markdown_line(diff.old)} → {markdown_cell(diff.new)}", "",
             f"**{diff.breaking}** breaking · **{diff.compatible}** compatible · models: {len(diff.added)} added, "
             f"{len(diff.removed)} removed, {len(diff.changed)} changed, {len(diff.unchanged)} unchanged", ""]
    if diff.changes:
        lines += ["| model | class | kind | subject | axis | old | new | change |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for c in diff.changes:
            cells = [c.model, c.classification, c.kind, c.subject, "" if c.axis is None else str(c.axis),
                     _value_text(c.old), _value_text(c.new), c.message]
            lines.append("| " + " | ".join(markdown_cell(cell) for cell in cells) + " |")
        lines.append("")
    if diff.unknown:
        lines += ["## Not compared", ""]
        lines += [f"- {markdown_cell(u.model)}: {markdown_cell(u.fact)}: {markdown_cell(u.why)}" for u in diff.unknown]
        lines.append("")
    return "\n".join(lines)
