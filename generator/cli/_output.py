"""The one printer: every command's text, tables and progress reach the terminal (or a pipe) through here.

Control characters print as their escapes and rich markup is never read from text (docs/security.md); in a pipe the
console is :data:`PIPE_WIDTH` wide, so a table row or a message stays one line.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import click

from generator.terminal_text import visible

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["PIPE_WIDTH", "console", "echo", "visible"]

#: The width of a console that does not write to a terminal: wider than any line gen-repo prints, so nothing wraps.
PIPE_WIDTH = 100_000


def echo(message: str = "", err: bool = False, nl: bool = True) -> None:
    """Print one message (a line, or lines) to stdout, or stderr with ``err``, every control made visible."""
    click.echo(visible(message), err=err, nl=nl)


def console(stderr: bool = False) -> Console:
    """A rich console for stdout (or stderr) that shows every control as text and, off a terminal, never wraps."""
    from rich.console import Console
    from rich.segment import Segment
    from rich.text import Text

    class VisibleConsole(Console):
        """rich's Console with :func:`visible` applied to every string and segment it renders."""

        def render_str(self, text: str, **kwargs: Any) -> Text:
            """A string made visible first, so widths are measured on what is printed."""
            return super().render_str(visible(text), **kwargs)

        def render(self, renderable: Any, options: Any = None) -> Iterable[Segment]:
            """Every segment of text made visible: ``Text`` objects and anything else not built by render_str."""
            for segment in super().render(renderable, options):
                if segment.control:
                    yield segment  # rich's own cursor and erase codes (progress bars), never repository text
                else:
                    yield Segment(visible(segment.text), segment.style)

    out = VisibleConsole(stderr=stderr, markup=False, highlight=False, emoji=False)
    # The stream itself, not rich's is_terminal: CI runners often set FORCE_COLOR, which makes rich treat a log as a
    # terminal (colours, welcome) and fit it to a guessed 80 columns (wrapping, not welcome).
    stream = sys.stderr if stderr else sys.stdout
    if not (out.is_terminal and stream.isatty()):
        out.width = PIPE_WIDTH
        out.soft_wrap = True
    return out
