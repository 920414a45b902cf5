"""Markdown sections for CI job summaries and pull-request comments (``--summary-md FILE``).

Every command that takes ``--summary-md`` builds one :class:`SummarySection` and appends it with
:func:`append_summary`: a heading, the counts, failures first, then links to the files the command wrote. Appending
(never rewriting) is what CI systems expect: GitHub's ``$GITHUB_STEP_SUMMARY`` collects every step's sections in one
file. A section is capped in rows so a run with thousands of findings still fits a job summary (GitHub allows 1 MiB
per step).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["MAX_ROWS", "SummaryRow", "SummarySection", "append_summary", "markdown_cell", "render_section"]

#: Rows shown per section; the rest are counted in one closing line.
MAX_ROWS = 50
#: Longest text kept in one table cell; CI comments are read, not searched.
_MAX_CELL = 300


@dataclass(frozen=True)
class SummaryRow:
    """One line of a section's table: what it is about, its status and why."""

    subject: str
    status: str
    detail: str = ""
    failed: bool = False


@dataclass(frozen=True)
class SummarySection:
    """What one command reports: ``title`` (e.g. ``gen-repo build``), counts in display order, rows and links."""

    title: str
    counts: Mapping[str, int]
    rows: Sequence[SummaryRow] = ()
    links: Sequence[tuple[str, str]] = ()
    ok: bool = True
    note: str = ""
    columns: tuple[str, str, str] = ("subject", "status", "detail")
    extra: Sequence[str] = field(default_factory=tuple)


def markdown_cell(text: str) -> str:
    """``text`` made safe for one GitHub-flavoured Markdown table cell (pipes, newlines, HTML, length)."""
    text = " ".join(str(text).split())
    if len(text) > _MAX_CELL:
        text = text[: _MAX_CELL - 1] + "…"
    for char, escaped in (("\\", "\\\\"), ("|", "\\|"), ("<", "&lt;"), (">", "&gt;"), ("`", "\\`")):
        text = text.replace(char, escaped)
    return text


def render_section(section: SummarySection) -> str:
    """The Markdown of one section, failed rows first (each group keeps its order), ending with a blank line."""
    mark = "✅" if section.ok else "❌"
    lines = [f"### {mark} {markdown_cell(section.title)}", ""]
    if section.counts:
        lines.append(" · ".join(f"**{count}** {markdown_cell(label)}" for label, count in section.counts.items()))
        lines.append("")
    if section.note:
        lines += [markdown_cell(section.note), ""]
    rows = [r for r in section.rows if r.failed] + [r for r in section.rows if not r.failed]
    if rows:
        lines.append("| " + " | ".join(section.columns) + " |")
        lines.append("| --- | --- | --- |")
        for row in rows[:MAX_ROWS]:
            lines.append(
                f"| {markdown_cell(row.subject)} | {markdown_cell(row.status)} | {markdown_cell(row.detail)} |"
            )
        if len(rows) > MAX_ROWS:
            lines.append("")
            lines.append(f"… and {len(rows) - MAX_ROWS} more rows (see the files below).")
        lines.append("")
    lines += list(section.extra)
    if section.links:
        lines.append("Files: " + ", ".join(f"[{markdown_cell(label)}]({_link(path)})" for label, path in section.links))
        lines.append("")
    return "\n".join(lines) + "\n"


def _link(path: str) -> str:
    # A Markdown link target cannot hold spaces or parentheses unescaped.
    return path.replace(" ", "%20").replace("(", "%28").replace(")", "%29")


def append_summary(path: str | os.PathLike[str], section: SummarySection) -> None:
    """Append ``section`` to the Markdown file at ``path`` (created if missing, never truncated)."""
    target = Path(path)
    with target.open("a", encoding="utf-8") as handle:
        handle.write(render_section(section))
