"""The Markdown sections ``--summary-md`` appends (generator/reports/markdown.py)."""

from __future__ import annotations

import html
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from generator.atomic_write import SinkError, sink_problem
from generator.reports.markdown import (
    MAX_ROWS,
    SummaryRow,
    SummarySection,
    append_summary,
    markdown_cell,
    relative_link,
    render_section,
)

#: A real CommonMark renderer with GFM tables (markdown-it-py, rich's own): what a job summary shows.
_RENDER = MarkdownIt("commonmark").enable("table").render
#: Repository text an attacker controls: Markdown and HTML syntax, a URL, and ordinary name characters.
_HOSTILE = st.lists(st.sampled_from([*"[]()!<>`*_|&;#~\\/:.=\"' -+1)", "http://evil.example/x.png", "img", "a", "é"]),
                    max_size=40).map("".join)


def test_a_cell_keeps_the_table_intact_whatever_the_text() -> None:
    cell = markdown_cell("a | b\nc <script> `x`")
    assert "\n" not in cell
    assert "|" not in cell.replace("\\|", "")
    assert "<" not in cell.replace("\\<", "") and "`" not in cell.replace("\\`", "")


@given(subject=_HOSTILE, detail=_HOSTILE)
@example(subject="#", detail="1. x")  # a heading's closing '#'; an ordered list item
@example(subject="a #", detail="- a")
@example(subject="x", detail="===")  # a setext underline
def test_repository_text_renders_as_itself_in_every_part_of_a_section(subject: str, detail: str) -> None:
    """Rendered by a real CommonMark renderer, a name or message shows as its own characters (no link, image,
    HTML, code or emphasis) in the title, the note and a row's cells, and the table keeps its three cells."""
    section = SummarySection(f"gen-repo diff {subject}", {"breaking": 1}, [SummaryRow(subject, "failed", detail)],
                             ok=False, note=detail)
    page = _RENDER(render_section(section))
    assert not any(tag in page for tag in ("<a ", "<img", "<code", "<em>", "<strong>x", "<script")), page
    cells = page.split("<tbody>")[1].split("<td>")[1:]
    assert len(cells) == 3
    shown = [html.unescape(cell.split("</td>")[0]) for cell in cells]
    assert shown[0] == " ".join(subject.split()) and shown[2] == " ".join(detail.split())
    assert html.unescape(page.split("<h3>")[1].split("</h3>")[0]) == " ".join(f"❌ gen-repo diff {subject}".split())
    if detail.strip():  # the note: a paragraph of its own, shown as itself
        assert html.unescape(page.split("<p>")[2].split("</p>")[0]) == " ".join(detail.split()), page


def test_failed_rows_come_first_and_keep_their_order() -> None:
    rows = [SummaryRow("a", "passed"), SummaryRow("b", "failed", failed=True), SummaryRow("c", "failed", failed=True)]
    text = render_section(SummarySection("gen-repo smoke", {"passed": 1, "failed": 2}, rows, ok=False))
    assert text.index("| b |") < text.index("| c |") < text.index("| a |")
    assert text.startswith("### ❌ gen-repo smoke")


def test_long_sections_are_capped_with_the_rest_counted() -> None:
    rows = [SummaryRow(f"m{i}", "passed") for i in range(MAX_ROWS + 7)]
    text = render_section(SummarySection("gen-repo lint", {"models": len(rows)}, rows))
    assert text.count("| passed |") == MAX_ROWS
    assert "and 7 more rows" in text


def test_sections_are_appended_never_truncated(tmp_path: Path) -> None:
    out = tmp_path / "summary.md"
    out.write_text("earlier step\n", encoding="utf-8")
    append_summary(out, SummarySection("gen-repo verify", {"files": 3}, links=[("lock", "out dir/lock (1).json")]))
    text = out.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n### ✅ gen-repo verify")
    assert "[lock](out%20dir/lock%20%281%29.json)" in text


def test_a_symlink_at_the_summary_path_is_refused_and_its_target_unchanged(tmp_path: Path) -> None:
    """The summary is appended to (a shared log), so it cannot be replaced whole: a link at its name is refused
    (exit 2, located) by the check every command makes first, and nothing reaches the link's target."""
    target = tmp_path / "precious.md"
    target.write_text("precious\n")
    link = tmp_path / "summary.md"
    link.symlink_to(target)
    assert "it is a symlink" in (sink_problem(link, append=True) or "")
    with pytest.raises(SinkError) as caught:
        append_summary(link, SummarySection("gen-repo verify", {"files": 3}))
    [problem] = caught.value.problems
    assert problem.file == str(link) and "it is a symlink" in problem.message
    dangling = tmp_path / "dangling.md"
    dangling.symlink_to(tmp_path / "nowhere.md")
    assert "it is a symlink" in (sink_problem(dangling, append=True) or "")
    assert target.read_text() == "precious\n" and not (tmp_path / "nowhere.md").exists()


def test_links_are_relative_to_the_summary_folder_only_from_inside_it(tmp_path: Path) -> None:
    out = tmp_path / "ci" / "summary.md"
    out.parent.mkdir()
    outside = tmp_path / "elsewhere" / "smoke.xml"
    links = [("inside", str(out.parent / "reports" / "smoke.json")), ("outside", str(outside)),
             ("bucket", "s3://bucket/prefix")]
    append_summary(out, SummarySection("gen-repo smoke", {"passed": 1}, links=links))
    assert f"[inside](reports/smoke.json), [outside]({outside}), [bucket](s3://bucket/prefix)" in out.read_text()
    assert relative_link(str(out.parent), out.parent) == "."
