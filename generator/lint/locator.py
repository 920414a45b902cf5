"""Where a field sits in a ``config.pbtxt``: 1-based line and column of every field, for located findings.

protobuf's text_format parses but keeps no positions; this small tokenizer walks the same text format (both list
syntaxes, ``{}`` and ``<>`` blocks, map entries, adjacent strings) and records where each field path starts.
"""

from __future__ import annotations

import contextlib
import re
from collections import defaultdict

__all__ = ["FieldPath", "PbtxtLocator"]

#: A field path: names and repeated-field indices, ``("input", 0, "dims", "#", 1)`` for the second dim (``"#"``
#: marks a scalar list's index).
FieldPath = tuple[str | int, ...]

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r\f\v]+) |
    (?P<nl>\n) |
    (?P<comment>\#[^\n]*) |
    (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*') |
    (?P<word>[A-Za-z0-9_.+\-]+) |
    (?P<punct>[{}\[\]<>:,;/])
    """,
    re.VERBOSE,
)


class PbtxtLocator:
    """Index of field positions (1-based line and column) in one pbtxt document."""

    def __init__(self, text: str) -> None:
        self._tokens: list[tuple[str, int, int]] = []
        line, line_start = 1, 0
        for match in _TOKEN.finditer(text):
            kind = match.lastgroup
            if kind == "nl":
                line, line_start = line + 1, match.end()
            elif kind in ("string", "word", "punct"):
                self._tokens.append((match.group(), line, match.start() - line_start + 1))
        self.positions: dict[FieldPath, tuple[int, int]] = {}
        self.values: dict[FieldPath, str] = {}
        self._i = 0
        with contextlib.suppress(IndexError):  # truncated text: keep what was indexed so far
            self._fields(())

    # ------------------------------------------------------------------ lookup
    def find(self, path: FieldPath) -> tuple[int, int] | None:
        """Position of ``path`` or of its nearest recorded ancestor; None when nothing on the path is recorded."""
        parts = tuple(path)
        while parts:
            if parts in self.positions:
                return self.positions[parts]
            parts = parts[:-1]
        return None

    # ------------------------------------------------------------------ parser
    def _peek(self) -> str:
        return self._tokens[self._i][0] if self._i < len(self._tokens) else ""

    def _record(self, path: FieldPath, token_index: int) -> None:
        if path not in self.positions:
            _, line, column = self._tokens[token_index]
            self.positions[path] = (line, column)

    def _scalar(self, path: FieldPath) -> None:
        self._record(path, self._i)
        self.values.setdefault(path, self._tokens[self._i][0].strip("\"'"))

    def map_entry(self, prefix: FieldPath, key: str) -> FieldPath:
        """Path of the entry whose ``key`` is ``key`` in map field ``prefix`` (``prefix`` itself when not found)."""
        k = 0
        while (*prefix, k) in self.positions:
            if self.values.get((*prefix, k, "key", "#", 0)) == key:
                return (*prefix, k)
            k += 1
        return prefix

    def _fields(self, prefix: FieldPath) -> None:
        message_counts: dict[str, int] = defaultdict(int)
        scalar_counts: dict[str, int] = defaultdict(int)
        while self._i < len(self._tokens) and self._peek() not in ("}", ">"):
            name_index = self._i
            name = self._peek()
            if name == "[":  # extension or Any type URL: [pkg.Type] -- skip to the closing bracket
                while self._peek() != "]":
                    self._i += 1
                name = self._tokens[name_index + 1][0]
            self._i += 1
            if self._peek() == ":":
                self._i += 1
            self._record((*prefix, name), name_index)
            token = self._peek()
            if token in ("{", "<"):
                self._message(prefix, name, message_counts, self._i)
            elif token == "[":
                self._i += 1
                while self._peek() != "]":
                    if self._peek() in ("{", "<"):
                        self._message(prefix, name, message_counts, self._i)
                    else:
                        self._scalar((*prefix, name, "#", scalar_counts[name]))
                        scalar_counts[name] += 1
                        self._i += 1
                    if self._peek() == ",":
                        self._i += 1
                self._i += 1
            else:
                self._scalar((*prefix, name, "#", scalar_counts[name]))
                scalar_counts[name] += 1
                self._i += 1
                while self._peek()[:1] in ('"', "'") and self._i < len(self._tokens):  # adjacent strings concatenate
                    self._i += 1
            if self._peek() in (",", ";"):
                self._i += 1

    def _message(self, prefix: FieldPath, name: str, counts: dict[str, int], open_index: int) -> None:
        index = counts[name]
        counts[name] += 1
        path = (*prefix, name, index)
        self._record(path, open_index)
        self._i += 1
        self._fields(path)
        self._i += 1  # the closing brace
