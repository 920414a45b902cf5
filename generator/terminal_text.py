r"""Text made safe to show: every control character and escape sequence in it made visible.

gen-repo prints text that repositories, buckets and manifests control (model and file names, messages that quote a
config, a contract or an object's key). A terminal acts on control characters: ESC starts CSI (colours, cursor
moves, clearing the screen), OSC (the window title, hyperlinks, the clipboard on some terminals), DCS and the other
string sequences; a C1 character (``\x9b`` is CSI on its own), a carriage return or a backspace hides what was
printed before it; bidirectional overrides reorder what the eye sees (a path that reads as another). CI logs render
many of them too.

:func:`visible` is the one rule: each such character is replaced by its Python escape (``\x1b``, ``\x9b``,
``\u202e``), so the sequence it would start is shown as text and does nothing. Newline and tab stay: the printer
sees whole lines of gen-repo's own output, and names that hold a newline are refused where they are read
(:mod:`generator.naming`, :mod:`generator.confinement`). Every command prints through :mod:`generator.cli._output`,
which applies it; the ``--summary-md`` Markdown and the report page apply it to what they write.
"""

from __future__ import annotations

import re

__all__ = ["CONTROL_CHARACTERS", "visible"]

#: What :func:`visible` escapes: C0 controls but tab and newline, DEL, C1 controls, lone surrogates (a file name's
#: undecodable bytes, which would be written back raw), the bidirectional formatting characters (LRM, RLM, ALM, the
#: embeddings, overrides and isolates) and the line and paragraph separators some viewers break lines at.
CONTROL_CHARACTERS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
                                "\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    return ascii(match.group())[1:-1]


def visible(text: str) -> str:
    r"""``text`` with every character of :data:`CONTROL_CHARACTERS` replaced by its escape (``\x1b`` as 4 characters).

    Text without any comes back as it is (one regex search, in C).
    """
    if CONTROL_CHARACTERS.search(text) is None:
        return text
    return CONTROL_CHARACTERS.sub(_escape, text)
