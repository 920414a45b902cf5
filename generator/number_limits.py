"""The numbers gen-repo can represent, decided once: every reader refuses the rest, and dims arithmetic stays within.

Integers fit a protobuf int64 or uint64; floats are finite and at most ``FLOAT_LIMIT``. Past them a number is a located
problem naming the limit, never a ``ValueError``, an ``OverflowError`` or an infinity.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["FLOAT_LIMIT", "INT64_MAX", "INT_MAX", "INT_MIN", "MAX_INT_CHARS", "element_count", "float_problem",
           "integer_problem", "shape_text"]

INT_MIN = -(2**63)
INT_MAX = 2**64 - 1
INT64_MAX = 2**63 - 1
FLOAT_LIMIT = 1e300
#: No integer within the limits takes more characters than this in any notation a reader accepts (64 binary digits,
#: a prefix and a sign), so a longer literal is refused before it is converted.
MAX_INT_CHARS = 70

_INT_RULE = f"integers from {INT_MIN} to {INT_MAX} (what a protobuf int64 or uint64 field holds)"
_FLOAT_RULE = f"finite numbers at most {FLOAT_LIMIT:g} in magnitude"


def _shown(text: str) -> str:
    """A literal for a message: a long one abbreviated, so a message never converts or prints thousands of digits."""
    return text if len(text) <= 40 else f"{text[:16]}...{text[-8:]} ({len(text)} characters)"


def integer_problem(text: str, value: int | None = None) -> str | None:
    """Why the integer literal ``text`` is past the limits (None within).

    ``value``: the literal converted by a reader with its own notations (YAML's); without it ``text`` is decimal and
    converted here, only when short enough to be within the limits at all.
    """
    if value is None and len(text) <= MAX_INT_CHARS:
        value = int(text)
    if value is not None and INT_MIN <= value <= INT_MAX:
        return None
    return f"integer {_shown(text)} is past the integer limit: gen-repo reads {_INT_RULE}"


def float_problem(text: str, value: float) -> str | None:
    """Why the number ``text`` (``value`` as a float) is past the float limit; None within."""
    if math.isfinite(value) and abs(value) <= FLOAT_LIMIT:
        return None
    return f"number {_shown(text)} is past the float limit (NaN and Infinity included): gen-repo reads {_FLOAT_RULE}"


def element_count(shape: Iterable[int], limit: int = INT64_MAX) -> int | None:
    """The product of ``shape``, or None when it exceeds ``limit``: stopped there, so no huge number is computed."""
    dims = list(shape)
    if any(d == 0 for d in dims):
        return 0
    count = 1
    for d in dims:
        count *= abs(d)
        if count > limit:
            return None
    return count


def shape_text(shape: Iterable[int]) -> str:
    """``[2, 3]`` for a message; a shape of very high rank, or with a dim past the limits, abbreviated."""
    dims = [str(d) if INT_MIN <= d <= INT_MAX else "(past the integer limit)" for d in shape]
    if len(dims) <= 12:
        return f"[{', '.join(dims)}]"
    return f"[{', '.join(dims[:6])}, ..., {', '.join(dims[-2:])}] (rank {len(dims)})"
