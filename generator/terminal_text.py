r"""Text made safe to show: every control character and escape sequence in it made visible.

Names and messages that repositories, buckets and manifests control could move the cursor, retitle the window or
reorder what the eye sees; :func:`visible` replaces each such character by its Python escape (docs/security.md).
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
