"""Errors as data: a Problem names a file, a JSON pointer and what is wrong there.

Stages return or raise :class:`GenRepoError` carrying every problem found; only the CLI turns them into exit codes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: The longest account of an error inside a message: a sentence or two; the rest of a long one is noise on a terminal.
MESSAGE_LIMIT = 300

#: Exit codes shared by every command (docs/cli.md).
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong in one document: ``file: /json/pointer: message``."""

    file: str
    pointer: str
    message: str
    severity: str = "error"

    def __str__(self) -> str:
        return f"{self.file}: {self.pointer or '/'}: {self.message}"

    def to_dict(self) -> dict[str, str]:
        """JSON form used by ``--json`` outputs."""
        return {"file": self.file, "pointer": self.pointer or "/", "message": self.message, "severity": self.severity}


class GenRepoError(Exception):
    """Bad input or a failed stage; carries every problem found, not just the first.

    ``summary`` is one optional closing sentence for the CLI (e.g. which models were refused).
    """

    exit_code = EXIT_USAGE

    def __init__(self, problems: Iterable[Problem] | str, summary: str = "") -> None:
        if isinstance(problems, str):
            problems = [Problem("<gen-repo>", "", problems)]
        self.problems: list[Problem] = list(problems)
        self.summary = summary
        super().__init__("\n".join(str(p) for p in self.problems))


class SpecError(GenRepoError):
    """A GraphSpec (or a value meant to become part of one) is invalid."""


def one_line(error: BaseException | str, limit: int | None = MESSAGE_LIMIT) -> str:
    """``error``'s text on one line (its class name when it has none), cut to ``limit`` characters with "..."."""
    text = " ".join(str(error).split())
    if not text and isinstance(error, BaseException):
        text = type(error).__name__
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."


def json_pointer(parts: Iterable[str | int]) -> str:
    """RFC 6901 pointer for a path of keys and indices."""
    out = ""
    for part in parts:
        out += "/" + str(part).replace("~", "~0").replace("/", "~1")
    return out
