"""The Markdown sections ``--summary-md`` appends (generator/reports/markdown.py)."""

from __future__ import annotations

from pathlib import Path

from generator.reports.markdown import (
    MAX_ROWS,
    SummaryRow,
    SummarySection,
    append_summary,
    markdown_cell,
    relative_link,
    render_section,
)


def test_a_cell_keeps_the_table_intact_whatever_the_text() -> None:
    cell = markdown_cell("a | b\nc <script> `x`")
    assert "\n" not in cell
    assert "|" not in cell.replace("\\|", "")
    assert "<" not in cell and "`" not in cell.replace("\\`", "")


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


def test_links_are_relative_to_the_summary_folder_only_from_inside_it(tmp_path: Path) -> None:
    out = tmp_path / "ci" / "summary.md"
    out.parent.mkdir()
    outside = tmp_path / "elsewhere" / "smoke.xml"
    links = [("inside", str(out.parent / "reports" / "smoke.json")), ("outside", str(outside)),
             ("bucket", "s3://bucket/prefix")]
    append_summary(out, SummarySection("gen-repo smoke", {"passed": 1}, links=links))
    assert f"[inside](reports/smoke.json), [outside]({outside}), [bucket](s3://bucket/prefix)" in out.read_text()
    assert relative_link(str(out.parent), out.parent) == "."
