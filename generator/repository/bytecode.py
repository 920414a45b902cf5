"""Python bytecode in a repository: a ``__pycache__`` file passes only when it is what its locked source compiles to.

Triton's Python backend runs ``__pycache__/model.<tag>.pyc``, so a planted one must not pass ``verify``; nothing from
the ``.pyc`` is unmarshalled or run (docs/security.md).
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import re
import sys

__all__ = ["PYCACHE", "bytecode_problem", "bytecode_source"]

PYCACHE = "__pycache__"
#: ``<module>.<cache tag>[.opt-N].pyc`` as importlib names it (importlib.util.cache_from_source).
_PYC_NAME = re.compile(r"^(?P<stem>[A-Za-z_][A-Za-z0-9_]*)\.(?P<tag>[A-Za-z0-9_-]+)(?:\.opt-(?P<opt>[12]))?\.pyc\Z")
_HEADER = 16
_FLAG_REF = 0x80
#: marshal string types: short ASCII (1-byte length), long ASCII/unicode/interned (4-byte length).
_SHORT_STRINGS = frozenset(b"zZ")
_LONG_STRINGS = frozenset(b"aAut")


def bytecode_source(rel: str) -> str | None:
    """The source a ``__pycache__`` entry compiles (``m/1/__pycache__/model.cpython-311.pyc`` -> ``m/1/model.py``).

    None when ``rel`` is not a ``.pyc`` named as importlib names them directly in a ``__pycache__`` folder.
    """
    folder, _, name = rel.rpartition("/")
    parent, _, cache = folder.rpartition("/")
    match = _PYC_NAME.match(name)
    if cache != PYCACHE or match is None:
        return None
    return f"{parent}/{match['stem']}.py" if parent else f"{match['stem']}.py"


def _expected_header(flags: int, source: bytes, source_mtime: float) -> bytes | None:
    """Header fields 8..16 importlib writes for ``source`` with these ``flags``; None for unknown flags."""
    if flags == 0:  # timestamp-based: mtime and size of the source
        return (int(source_mtime) & 0xFFFFFFFF).to_bytes(4, "little") + (len(source) & 0xFFFFFFFF).to_bytes(4, "little")
    if flags in (1, 3):  # hash-based, unchecked (1) or checked (3): siphash of the source
        return importlib.util.source_hash(source)
    return None


def bytecode_problem(rel: str, pyc: bytes, source: bytes, source_mtime: float) -> str | None:
    """Why the ``.pyc`` at ``rel`` is not exactly what ``source`` compiles to under this Python; None when it is.

    ``source_mtime``: the source file's modification time (a timestamp-based ``.pyc`` records it).
    """
    name = rel.rpartition("/")[2]
    match = _PYC_NAME.match(name)
    if match is None:
        return "not a bytecode file name importlib writes (<module>.<tag>[.opt-N].pyc)"
    tag = sys.implementation.cache_tag
    if match["tag"] != tag:
        return (f"bytecode for {match['tag']}, which this Python ({tag}) cannot reproduce to check it; remove "
                f"{PYCACHE}/ or serve the repository from a read-only mount")
    if len(pyc) < _HEADER or pyc[:4] != importlib.util.MAGIC_NUMBER:
        return f"not {tag} bytecode (wrong magic number)"
    flags = int.from_bytes(pyc[4:8], "little")
    expected = _expected_header(flags, source, source_mtime)
    if expected is None:
        return f"unknown bytecode flags {flags}"
    if pyc[8:_HEADER] != expected:
        what = "modification time and size do" if flags == 0 else "source hash does"
        return f"its header's {what} not match the locked source (stale or planted bytecode)"
    optimize = int(match["opt"] or 0)
    placeholder = f"/gen-repo-verify-{os.urandom(8).hex()}/{match['stem']}.py"
    try:
        code = compile(source, placeholder, "exec", dont_inherit=True, optimize=optimize)
    except (SyntaxError, ValueError) as error:
        return f"its source does not compile here ({type(error).__name__}), so no bytecode can match it"
    # Bound to a name, as importlib holds it while it marshals: marshal flags an object referenced more than once
    # for back-references, so an unbound temporary would be written with other reference numbers.
    ours = marshal.dumps(code)
    if not _same_code(pyc[_HEADER:], ours, placeholder.encode("ascii"), f"/{match['stem']}.py"):
        return "its code is not what the locked source compiles to (planted or altered bytecode)"
    return None


def _same_code(theirs: bytes, ours: bytes, placeholder: bytes, suffix: str) -> bool:
    """Whether ``theirs`` equals ``ours`` except for the one file-name string written where ``placeholder`` is."""
    at = ours.find(placeholder)
    if at < 2 or ours.find(placeholder, at + 1) != -1:
        return theirs == ours  # no single placeholder string (never expected): exact bytes only
    start, end = at - 2, at + len(placeholder)
    if ours[start] & ~_FLAG_REF not in _SHORT_STRINGS or ours[at - 1] != len(placeholder):
        return theirs == ours
    if theirs[:start] != ours[:start] or len(theirs) <= start + 1:
        return False
    kind = theirs[start]
    if kind & _FLAG_REF != ours[start] & _FLAG_REF:  # a reference flag changes every later reference index
        return False
    if kind & ~_FLAG_REF in _SHORT_STRINGS:
        length, text = theirs[start + 1], start + 2
    elif kind & ~_FLAG_REF in _LONG_STRINGS:
        length, text = int.from_bytes(theirs[start + 1:start + 5], "little"), start + 5
    else:
        return False
    filename = theirs[text:text + length]
    try:
        decoded = filename.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return (len(filename) == length and decoded.endswith(suffix)
            and theirs[text + length:] == ours[end:])
