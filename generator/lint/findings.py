"""Findings as values: one located problem each (file:line:column), and the helper that locates them in a config."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from generator.lint.locator import PbtxtLocator
from generator.lint.rules import RULES

if TYPE_CHECKING:
    from generator.triton.config_rules import Refusal
    from generator.triton.proto import model_config_pb2 as mc

__all__ = ["ConfigFile", "Finding", "folder_finding"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One finding: ``file`` relative to the repository (posix), 1-based ``line``/``column`` or None for a folder."""

    severity: str
    file: str
    line: int | None
    column: int | None
    rule: str
    message: str

    @property
    def location(self) -> str:
        """``file:line:column`` (position parts left out when unknown)."""
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return where

    def sort_key(self) -> tuple[str, int, int, str, str]:
        """Deterministic order: file, position, rule, message."""
        return (self.file, self.line or 0, self.column or 0, self.rule, self.message)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``gen-repo lint --json``)."""
        return {
            "severity": self.severity,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "rule": self.rule,
            "message": self.message,
        }

    def __str__(self) -> str:
        """``file:line:column: severity: message [rule]`` (position parts left out when unknown)."""
        return f"{self.location}: {self.severity}: {self.message} [{self.rule}]"


def folder_finding(rule: str, where: str, message: str) -> Finding:
    """A finding about a folder or file as a whole (no line): severity from the rule table."""
    return Finding(RULES[rule][0], where, None, None, rule, message)


@dataclass
class ConfigFile:
    """A parsed config and what findings about it need: its shown file name and field positions."""

    rel: str
    config: mc.ModelConfig
    locator: PbtxtLocator
    findings: list[Finding] = field(default_factory=list)

    def add(self, rule: str, message: str, path: Sequence[str | int] = ()) -> None:
        """A finding of ``rule`` at field ``path`` (its nearest recorded ancestor; line 1 when none is)."""
        position = self.locator.find(tuple(path)) if path else None
        line, column = position if position else (1, 1)
        self.findings.append(Finding(RULES[rule][0], self.rel, line, column, rule, message))

    def entry(self, prefix: Sequence[str | int], key: str, *rest: str | int) -> tuple[str | int, ...]:
        """Path of ``rest`` inside the map entry ``key`` of map field ``prefix`` (the map itself when not found)."""
        return (*self.locator.map_entry(tuple(prefix), key), *rest)

    def refuse(self, refusal: Refusal) -> None:
        """A finding of a rule of :mod:`generator.triton.config_rules`, at the field its location names."""
        self.add(refusal.rule, refusal.message, self._field_path(refusal.where))

    def _field_path(self, where: Sequence[str | int]) -> tuple[str | int, ...]:
        """The locator's path of a ``ModelConfig`` location (a map key: its entry's ``key``)."""
        path: tuple[str | int, ...] = ()
        message, parts = self.config.DESCRIPTOR, list(where)
        while parts:
            field = message.fields_by_name[str(parts.pop(0))]
            entry = field.message_type
            if entry is not None and entry.GetOptions().map_entry:
                if not parts:
                    return (*path, field.name)
                path = self.entry((*path, field.name), str(parts.pop(0)))
                if not parts:
                    return (*path, "key")
                path, message = (*path, "value", 0), entry.fields_by_name["value"].message_type
            elif entry is not None:
                repeated = bool(parts) and isinstance(parts[0], int)
                path, message = (*path, field.name, parts.pop(0) if repeated else 0), entry
            else:
                return (*path, field.name, "#", parts[0]) if parts else (*path, field.name)
        return path

