"""Fenced blocks of the documentation, and the output a document shows for its commands (tests/test_docs.py and
tests/test_wheel.py compare it with what the commands print).

A fenced block whose info string is ``output`` right after a ``bash`` block shows what that block's commands print,
stdout and stderr together as a terminal or a CI log shows them. Its lines are compared exactly (trailing spaces
aside) with the real lines, in order, from the first to the last; the only elisions are explicit: a line ``...`` stands
for any number of lines (none included), and ``...`` inside a line for any text within that line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
ELISION = "..."


@dataclass(frozen=True)
class Block:
    """One fenced block: its info string, the line number of its first body line, its body lines."""

    info: str
    line: int
    body: tuple[str, ...]


def fenced_blocks(document: str) -> list[Block]:
    """Every fenced block of ``document`` (a path relative to the repository root), indented ones included."""
    blocks: list[Block] = []
    lines = (REPO_ROOT / document).read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        fence = re.match(r"^(\s*)```(\S.*)?$", lines[index])
        if fence is None:
            index += 1
            continue
        info, start, body = (fence.group(2) or "").strip(), index + 1, []
        index += 1
        while index < len(lines) and lines[index].strip() != "```":
            body.append(lines[index][len(fence.group(1)):])
            index += 1
        index += 1
        blocks.append(Block(info, start + 1, tuple(body)))
    return blocks


def shown_outputs(document: str) -> list[tuple[Block, Block]]:
    """(bash block, the ``output`` block after it) for every command block of ``document`` that shows its output."""
    blocks = fenced_blocks(document)
    return [(command, shown) for command, shown in pairwise(blocks)
            if command.info.split(" ", 1)[0] == "bash" and shown.info == "output"]


def _line_pattern(shown: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in shown.rstrip().split(ELISION)))


def output_mismatch(shown: tuple[str, ...] | list[str], printed: str) -> str | None:
    """Why ``printed`` is not what ``shown`` says (None when it is): the first shown line that cannot be matched."""
    actual = [line.rstrip() for line in printed.rstrip("\n").splitlines()]
    want = list(shown)
    patterns = [None if line.strip() == ELISION else _line_pattern(line) for line in want]
    reached = [0]

    @cache
    def match(i: int, j: int) -> bool:  # shown lines from i match actual lines from j to the end
        reached[0] = max(reached[0], i)
        if i == len(want):
            return j == len(actual)
        pattern = patterns[i]
        if pattern is None:
            return any(match(i + 1, k) for k in range(j, len(actual) + 1))
        return j < len(actual) and pattern.fullmatch(actual[j]) is not None and match(i + 1, j + 1)

    if match(0, 0):
        return None
    where = (f"shown line {reached[0] + 1} {want[reached[0]]!r}" if reached[0] < len(want)
             else "the lines after the last shown one")
    return f"{where} does not match the output:\n" + "\n".join(actual)


def quickstart_steps() -> tuple[list[Block], list[tuple[Block, Block]]]:
    """README's quickstart: its shell blocks a reader runs (``norun`` ones aside), and those that show their output."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    begin = text.index("## Quickstart")
    end = next(i for i, line in enumerate(text) if line.startswith("Next: write a manifest"))

    def inside(block: Block) -> bool:
        return begin < block.line - 1 < end

    steps = [b for b in fenced_blocks("README.md") if inside(b) and b.info == "bash"]
    return steps, [(command, shown) for command, shown in shown_outputs("README.md") if inside(command)]
