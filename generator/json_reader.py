"""The one JSON reader: every JSON document gen-repo reads is parsed here, with the same refusals.

Too deep nesting, duplicate keys and numbers past :mod:`generator.number_limits` are located problems (exit 2), never a
``RecursionError`` (docs/security.md). The located walks run only on a refused document.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

from generator.bounded import limit, read_bytes
from generator.errors import GenRepoError, Problem, json_pointer
from generator.number_limits import float_problem, integer_problem

__all__ = ["may_nest_deeper", "parse_json", "read_json"]


class _DuplicateKeyError(ValueError):
    """An object with a key twice: located afterwards by :func:`_structure_problems`."""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise _DuplicateKeyError
    return result


class _Refused:
    """A number past the limits, kept in the parsed value where it stood, so that its pointer can be found."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


def _number_hooks() -> tuple[list[_Refused], dict[str, Any]]:
    """The ``json.loads`` hooks of one parse, and the list of what they refused (empty: every number is within)."""
    refused: list[_Refused] = []

    def number(problem: str | None, value: Any) -> Any:
        if problem is None:
            return value
        refused.append(_Refused(problem))
        return refused[-1]

    def parse_int(text: str) -> Any:
        if len(text) < 20:  # at most 19 characters: within the limits, whatever they say
            return int(text)
        problem = integer_problem(text)
        return number(problem, int(text) if problem is None else None)

    def parse_float(text: str) -> Any:
        value = float(text)
        return number(float_problem(text, value), value)

    def parse_constant(text: str) -> Any:  # NaN, Infinity, -Infinity: not JSON at all
        return number(f"{text} is not valid JSON; {float_problem(text, float(text))}", None)

    return refused, {"parse_int": parse_int, "parse_float": parse_float, "parse_constant": parse_constant}


def _refused_numbers(value: Any, file: str) -> list[Problem]:
    """Every refused number of ``value``, at its pointer, in document order (an iterative walk)."""
    problems: list[Problem] = []
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        item, where = stack.pop()
        if isinstance(item, _Refused):
            problems.append(Problem(file, json_pointer(where), item.message))
        elif isinstance(item, dict):
            stack.extend((v, (*where, k)) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((v, (*where, i)) for i, v in reversed(list(enumerate(item))))
    return problems


#: Every byte but a quote or a bracket (deleted by ``bytes.translate``), and each byte's step in bracket depth.
_NOT_QUOTE_OR_BRACKET = bytes(b for b in range(256) if b not in b'"[]{}')
_BRACKET_STEP = tuple(1 if b in b"[{" else -1 if b in b"]}" else 0 for b in range(256))


def may_nest_deeper(raw: bytes, levels: int) -> bool:
    r"""Tell whether a JSON text may nest containers deeper than ``levels`` (False: it certainly does not).

    Fewer opening brackets than the limit cannot nest deeper (most documents: two C calls decide). Otherwise
    brackets are counted outside strings: in JSON every backslash starts a two-character escape, so removing ``\\``
    pairs, then ``\"``, leaves only the quotes that delimit strings, and every other piece between quotes is outside
    a string. Bytes methods and ``accumulate`` run in C. A text that is not JSON may be misjudged either way; the
    located walk then decides, or the parser refuses it.
    """
    if raw.count(b"[") + raw.count(b"{") <= levels:
        return False
    cleaned = raw.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_QUOTE_OR_BRACKET)
    outside = b"".join(cleaned.split(b'"')[::2])
    return max(itertools.accumulate(map(_BRACKET_STEP.__getitem__, outside)), default=0) > levels


#: The tokens that decide a JSON document's structure: strings (keys among them) and punctuation. Scalars between
#: them do not matter to nesting or keys and are skipped by ``finditer``.
_STRUCTURE = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},]', re.DOTALL)


def _where(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    return f"line {line} column {offset - (text.rfind(chr(10), 0, offset) + 1) + 1}"


def _structure_problems(text: str, file: str, levels: int) -> list[Problem]:
    """Every duplicate key of ``text`` and the first container nested deeper than ``levels``, each with its pointer.

    One pass over the structure tokens with an explicit stack (no recursion, linear in the text): each open object
    keeps the keys seen so far and the current one, each open array its index, and together they are the pointer.
    """
    problems: list[Problem] = []
    # One frame per open container: [is_object, current key or index, keys seen (objects), expecting a key].
    stack: list[list[Any]] = []
    for match in _STRUCTURE.finditer(text):
        token = match.group()
        frame = stack[-1] if stack else None
        if token in "[{":
            if len(stack) >= levels:
                pointer = json_pointer(f[1] for f in stack)
                problems.append(Problem(file, pointer, f"document nests deeper than {levels} levels "
                                        f"({_where(text, match.start())}; the limit is GEN_REPO_MAX_NESTING)"))
                break
            stack.append([token == "{", None if token == "{" else 0, set(), token == "{"])
        elif token in "]}":
            if stack:
                stack.pop()
        elif token == ",":
            if frame is not None and frame[0]:
                frame[3] = True
            elif frame is not None:
                frame[1] += 1
        elif frame is not None and frame[0] and frame[3]:  # a string where an object expects a key
            try:
                key = json.loads(token)
            except ValueError:
                key = token[1:-1]
            frame[3] = False
            frame[1] = key
            if key in frame[2]:
                pointer = json_pointer([*(f[1] for f in stack)])
                problems.append(Problem(file, pointer, f"key {key!r} appears more than once in one object "
                                        f"({_where(text, match.start())}); JSON readers disagree on which value wins, "
                                        "so the document is refused"))
            frame[2].add(key)
    return problems


def parse_json(data: bytes | str, file: str) -> Any:
    """The JSON value of ``data`` (the bytes or text of ``file``); GenRepoError with located problems otherwise.

    Refused: text that is not UTF-8 or not JSON (line and column), nesting deeper than the ``nesting`` limit,
    duplicate keys (each one listed), numbers past :mod:`generator.number_limits` (each one at its pointer).
    ``file`` names the document in every problem (a path, or the object's URL for a bucket).
    """
    if isinstance(data, bytes):
        raw = data
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise GenRepoError([Problem(file, "", f"not UTF-8 text (byte {error.start})")]) from None
    else:
        text = data
        raw = data.encode("utf-8", "surrogatepass")
    levels = limit("nesting")
    if may_nest_deeper(raw, levels):
        problems = [p for p in _structure_problems(text, file, levels) if "nests deeper" in p.message]
        if problems:
            raise GenRepoError(problems)
    refused, hooks = _number_hooks()
    try:
        document = json.loads(text, object_pairs_hook=_unique_pairs, **hooks)
    except json.JSONDecodeError as error:
        message = f"invalid JSON at line {error.lineno} column {error.colno}: {error.msg}"
        raise GenRepoError([Problem(file, "", message)]) from None
    except _DuplicateKeyError:
        raise GenRepoError(_structure_problems(text, file, levels)
                           or [Problem(file, "", "a key appears more than once in one object")]) from None
    except RecursionError:  # only when the text is not JSON and fooled the bracket count: say what it is
        raise GenRepoError([Problem(file, "", f"document nests deeper than {levels} levels")]) from None
    if refused:
        raise GenRepoError(_refused_numbers(document, file))
    return document


def read_json(path: Path | str, limit_name: str = "document_bytes") -> Any:
    """The JSON value of the file ``path``, read by :func:`generator.bounded.read_bytes` within ``limit_name``.

    Refusals as :func:`parse_json`; a file that is not a regular file or is over its limit is an
    :class:`~generator.bounded.UnreadableFileError`, a missing one ``FileNotFoundError`` (both ``OSError``).
    """
    return parse_json(read_bytes(path, limit_name), str(path))
