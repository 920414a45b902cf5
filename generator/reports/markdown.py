"""Markdown sections for CI job summaries and pull-request comments (``--summary-md FILE``).

Each command appends one :class:`SummarySection` (appending is what ``$GITHUB_STEP_SUMMARY`` expects), capped in
rows so thousands of findings still fit a job summary.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from generator.errors import GenRepoError, Problem
from generator.terminal_text import visible

__all__ = [
    "MAX_ROWS",
    "SummaryPathError",
    "SummaryRow",
    "SummarySection",
    "append_summary",
    "check_summary_path",
    "markdown_cell",
    "relative_link",
    "render_section",
]

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


class SummaryPathError(GenRepoError):
    """The ``--summary-md`` file cannot be appended to (exit 2); no section is written anywhere else."""


#: Append, create if missing, never through a symlink: the summary is a shared log (``$GITHUB_STEP_SUMMARY``) that
#: cannot be replaced whole like gen-repo's other outputs, so a link at its name is refused (docs/security.md).
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _path_error(path: str | os.PathLike[str], error: OSError) -> SummaryPathError:
    if error.errno == errno.ELOOP:
        reason = "it is a symlink (gen-repo appends only to the file itself, never through a link)"
    else:
        reason = error.strerror or str(error)
    return SummaryPathError([Problem(os.fspath(path), "", f"--summary-md: cannot append to this file: {reason}")])


def _append(path: str | os.PathLike[str], text: str) -> None:
    """Append ``text`` to ``path`` (created if missing, never truncated, never through a symlink); OSError if not."""
    with os.fdopen(os.open(path, _APPEND, 0o666), "a", encoding="utf-8") as handle:
        handle.write(text)


def check_summary_path(path: str | os.PathLike[str]) -> None:
    """Raise :class:`SummaryPathError` unless ``path`` can be appended to (a missing file is created, empty).

    Called before a command does its work, so a bad path is an exit-2 error at once, not after an hour-long build.
    Opening for append is the one test that sees everything (missing folder, a folder, permissions, a read-only
    file system) and, like every append here, never truncates.
    """
    try:
        _append(path, "")
    except OSError as error:
        raise _path_error(path, error) from None


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


def append_summary(path: str | os.PathLike[str], section: SummarySection) -> None:
    """Append ``section`` to the Markdown file at ``path`` (created if missing, never truncated).

    Links are made relative to the file's folder where they lie inside it (:func:`relative_link`). A file that
    cannot be written raises :class:`SummaryPathError` (located, exit 2).
    """
    target = Path(path)
    folder = target.parent
    section = replace(section, links=[(label, relative_link(str(link), folder)) for label, link in section.links])
    try:
        # Repository text in a section (names, messages) is shown, never acted on, where the summary is displayed.
        _append(target, visible(render_section(section)))
    except OSError as error:
        raise _path_error(path, error) from None
