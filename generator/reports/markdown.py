"""Markdown sections for CI job summaries and pull-request comments (``--summary-md FILE``).

Each command appends one :class:`SummarySection` (appending is what ``$GITHUB_STEP_SUMMARY`` expects), capped in
rows so thousands of findings still fit a job summary.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import quote

from generator.atomic_write import append_text, sink_failed
from generator.terminal_text import visible

__all__ = [
    "MAX_ROWS",
    "SummaryRow",
    "SummarySection",
    "append_summary",
    "markdown_cell",
    "markdown_line",
    "relative_link",
    "render_section",
]

#: Rows shown per section; the rest are counted in one closing line.
MAX_ROWS = 50
#: Longest text kept in one table cell; CI comments are read, not searched.
_MAX_CELL = 300
#: What makes repository text act as Markdown: ``[x](url)`` and ``![](url)`` need ``[``; ``<img>`` and ``<http://>``
#: need ``<``; ``&`` starts an entity. Escaped, each renders as itself (a bare URL may still be shown as a link).
_MARKUP = frozenset("\\`*_[]<>|&~#")
#: What opens a block where it starts a line: a list item (``-``, ``+``, ``1.``, ``1)``) or a setext underline.
_LINE_START = re.compile(r"^(?:[-+]|\d{1,9}[.)])(?=\s|$)|^=+\s*$")


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


def markdown_cell(text: str) -> str:
    """``text`` shown as text in one GitHub-flavoured Markdown table cell or line (the one path for repository text).

    One line, cut to length, and every character that starts a link, an image, HTML, code, emphasis or a cell
    backslash-escaped (CommonMark).
    """
    text = " ".join(str(text).split())
    if len(text) > _MAX_CELL:
        text = text[: _MAX_CELL - 1] + "…"
    return "".join("\\" + char if char in _MARKUP else char for char in text)


def markdown_line(text: str) -> str:
    """:func:`markdown_cell` for text that starts a line: a list or underline mark there is escaped too."""
    cell = markdown_cell(text)
    return _LINE_START.sub(lambda m: f"{m[0][:-1]}\\{m[0][-1]}" if m[0][0].isdigit() else f"\\{m[0]}", cell, count=1)


def render_section(section: SummarySection) -> str:
    """The Markdown of one section, failed rows first (each group keeps its order), ending with a blank line."""
    mark = "✅" if section.ok else "❌"
    lines = [f"### {mark} {markdown_cell(section.title)}", ""]
    if section.counts:
        lines.append(" · ".join(f"**{count}** {markdown_cell(label)}" for label, count in section.counts.items()))
        lines.append("")
    if section.note:
        lines += [markdown_line(section.note), ""]
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
    if section.links:
        lines.append("Files: " + ", ".join(f"[{markdown_cell(label)}]({_link(path)})" for label, path in section.links))
        lines.append("")
    return "\n".join(lines) + "\n"


def _link(path: str) -> str:
    # A link target cannot hold spaces, parentheses or angle brackets unescaped; a URL's scheme and slashes stay.
    return quote(path, safe="/:@._-~%")


def relative_link(target: str, folder: Path) -> str:
    """``target`` relative to ``folder`` when it lies inside it, else as given (URLs and outside paths included).

    A link from a summary to a file beside it keeps working when the folder is uploaded or committed together;
    a path climbing out of it (``../../``) would only be harder to read than the path the user gave.
    """
    if "://" in target:
        return target
    try:
        return Path(os.path.abspath(target)).relative_to(os.path.abspath(folder)).as_posix()
    except ValueError:
        return target


def append_summary(path: str | os.PathLike[str], section: SummarySection, written: Sequence[str] = ()) -> None:
    """Append ``section`` to the Markdown file at ``path`` (created if missing, never truncated, never a link's).

    Links are made relative to the file's folder where they lie inside it (:func:`relative_link`). A file that
    cannot be written raises :class:`generator.atomic_write.SinkError` naming what the command had ``written``.
    """
    target = Path(path)
    folder = target.parent
    section = replace(section, links=[(label, relative_link(str(link), folder)) for label, link in section.links])
    try:
        # Repository text in a section (names, messages) is shown, never acted on, where the summary is displayed.
        append_text(target, visible(render_section(section)))
    except OSError as error:
        raise sink_failed(target, "--summary-md", error, written) from None
