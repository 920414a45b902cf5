"""``--summary-md`` on build, smoke, lint and verify (generator/reports/summaries.py), through the real commands.

Each test runs the command on the example models (examples/gen-repo.yaml, built once per session by the
``example_repository`` fixture) with ``--summary-md`` on a file that already holds an earlier step's section, and
checks that the earlier text is kept, the heading, the counts against the command's own ``--json``, the failing
rows first, the links, and that the table parses as a GitHub-flavoured Markdown table with every row complete.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from markdown_it import MarkdownIt

from generator.cli import main
from generator.repository.lock import LOCK_FILE_NAME
from generator.serving.server import free_port
from generator.serving.smoke_results import CHECKS
from tests.process_helpers import gen_repo_script

EARLIER = "### an earlier step\n\nits text, | with a pipe |\n\n"


def _run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _summary_file(folder: Path) -> Path:
    path = folder / "summary.md"
    path.write_text(EARLIER, encoding="utf-8")
    return path


def _section(path: Path) -> str:
    """The one section the command appended after :data:`EARLIER` (which must be kept byte for byte)."""
    text = path.read_text(encoding="utf-8")
    assert text.startswith(EARLIER)
    section = text[len(EARLIER):]
    assert section.count("\n### ") == 0 and section.startswith("### "), section
    return section


def _summarised(folder: Path, *args: str | Path) -> tuple[int, str, str]:
    """``gen-repo ARGS --summary-md folder/summary.md`` after an earlier step: exit code, stdout, its section."""
    summary = _summary_file(folder)
    code, out, _err = _run(*args, "--summary-md", summary)
    return code, out, _section(summary)


def _counts(section: str) -> dict[str, int]:
    line = next(line for line in section.splitlines() if line.startswith("**"))
    return {label.strip(): int(count) for count, label in re.findall(r"\*\*(\d+)\*\* ([^·]+)", line)}


def _table(section: str) -> list[list[str]]:
    """The section's table as rows of cell texts (header first), parsed as GitHub does (GFM tables)."""
    tokens = MarkdownIt("commonmark").enable("table").parse(section)
    assert [t.type for t in tokens].count("table_open") == 1, section
    rows: list[list[str]] = []
    for previous, token in itertools.pairwise(tokens):
        if token.type == "tr_open":
            rows.append([])
        elif token.type == "inline" and previous.type in ("th_open", "td_open"):
            rows[-1].append("".join(c.content for c in token.children or () if c.type in ("text", "code_inline")))
    assert rows and all(len(row) == 3 for row in rows), rows
    return rows


def _links(section: str) -> dict[str, str]:
    line = next(line for line in section.splitlines() if line.startswith("Files: "))
    return dict(re.findall(r"\[([^\]]+)\]\(([^)]+)\)", line))


def test_build_summary_lists_the_refused_model_first(example_build_cache: Path, examples_dir: Path,
                                                     tmp_path: Path) -> None:
    # The example manifest (its models come from the session's build cache) and a model whose spec is missing.
    shutil.copytree(examples_dir / "specs", tmp_path / "specs")
    manifest = tmp_path / "gen-repo.yaml"
    manifest.write_text((examples_dir / "gen-repo.yaml").read_text(encoding="utf-8") +
                        "  - {name: missing, spec: specs/nope.graphspec.json, "
                        "source: {factory: 'examples.models:make_mlp'}}\n", encoding="utf-8")
    summary = _summary_file(tmp_path)
    repo = tmp_path / "out" / "model_repository"
    build = ("build", manifest, "--allow-code", "--target", "python", "--cache-dir", example_build_cache, "-o", repo,
             "--json", "--summary-md", summary)

    # Without --keep-going a refused model is bad input (exit 2): one section with the located problem.
    code, _out, err = _run(*build)
    assert code == 2, err
    section = _section(summary)
    assert section.startswith("### ❌ gen-repo build\n")
    assert _counts(section) == {"errors": 1}
    assert _table(section) == [["file", "pointer", "problem"],
                               [str(manifest), "/models/2/spec", "spec file 'specs/nope.graphspec.json' not found: "
                                f"paths in a manifest are relative to its folder {tmp_path}, so it was looked for at "
                                f"{tmp_path / 'specs' / 'nope.graphspec.json'}"]]

    summary.write_text(EARLIER, encoding="utf-8")
    code, out, err = _run(*build, "--keep-going")
    assert code == 1, err
    report = json.loads(out)
    section = _section(summary)
    assert section.startswith("### ❌ gen-repo build\n")
    statuses = Counter(m["status"] for m in report["models"])
    assert statuses == {"cached": 2, "failed": 1}
    assert _counts(section) == {"models": 3, **statuses}
    rows = _table(section)
    assert [row[:2] for row in rows] == [["model", "status"], ["missing", "failed"], ["mlp", "cached"],
                                         ["text", "cached"]]
    assert "spec file 'specs/nope.graphspec.json' not found" in rows[1][2]
    assert _links(section) == {"repository": "out/model_repository",
                               "lock file": f"out/model_repository/{LOCK_FILE_NAME}"}


def test_verify_summary_names_the_tampered_file(example_repository: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(example_repository, repo)
    onnx = repo / "mlp" / "1" / "model.onnx"
    onnx.write_bytes(onnx.read_bytes()[:-1] + b"\0")
    code, out, section = _summarised(tmp_path, "verify", repo, "--json")
    assert code == 1
    payload = json.loads(out)
    assert section.startswith("### ❌ gen-repo verify\n")
    assert len(payload["problems"]) == 1
    assert _counts(section) == {"artifacts": payload["artifacts"], "differences": len(payload["problems"])}
    rows = _table(section)
    assert rows[1][:2] == [str(onnx), "/artifacts/mlp~11~1model.onnx"] and rows[1][2].startswith("modified")
    assert _links(section) == {"repository": "repo"}

    shutil.copy(example_repository / "mlp" / "1" / "model.onnx", onnx)
    code, out, _err = _run("verify", repo, "--json", "--summary-md", tmp_path / "summary.md")
    assert code == 0
    text = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert text.count("### ") == 3  # appended after the failed run's section, nothing rewritten
    last = text[text.rindex("### ✅ gen-repo verify"):]
    assert _counts(last) == {"artifacts": json.loads(out)["artifacts"], "differences": 0}
    assert "|" not in last  # no differences, no table


def test_lint_summary_puts_errors_before_warnings(example_repository: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(example_repository, repo)
    (repo / "mlp" / "notes").mkdir()  # a warning in the first model: Triton ignores the folder
    (repo / "text" / "1" / "model.py").unlink()  # an error in the second: the python backend needs it
    code, out, section = _summarised(tmp_path, "lint", repo, "--json")
    assert code == 1
    payload = json.loads(out)
    assert section.startswith("### ❌ gen-repo lint\n")
    assert _counts(section) == payload["summary"] == {"errors": 1, "warnings": 1}
    rows = _table(section)
    assert [row[1] for row in rows] == ["severity", "error", "warning"]
    assert rows[1][0].startswith("text/1") and rows[1][2].endswith("[model-file-missing]")
    assert rows[2][0].startswith("mlp/notes") and rows[2][2].endswith("[version-non-numeric]")


@pytest.mark.triton
@pytest.mark.timeout(300)
def test_smoke_summary_lists_the_model_that_does_not_load_first(example_repository: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(example_repository, repo)
    (repo / "text" / "1" / "model.py").write_text("raise ImportError('model.py broken on purpose')\n")
    summary = _summary_file(tmp_path)
    reports = tmp_path / "reports"
    reports.mkdir()  # an output's folder must exist (checked before the work)
    # mlp must pass every check, the burst's batching included: with 2 requests in flight, batching depends on both
    # arriving within the 100 us queue delay, which a loaded machine missed in all 3 bursts about 1 run in 20; with 8
    # in flight, requests queue behind the one executing and are batched (20 of 20 runs on the first burst).
    result = subprocess.run(
        [gen_repo_script(), "smoke", "--launch", "--repo", str(repo), "--burst", "16", "--concurrency", "8",
         "--json", str(reports / "smoke.json"), "--junit-xml", str(reports / "smoke.xml"), "--summary-md",
         str(summary)],
        capture_output=True, text=True, timeout=280,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    document = json.loads((reports / "smoke.json").read_text())
    section = _section(summary)
    assert section.startswith("### ❌ gen-repo smoke\n")
    assert _counts(section) == document["counts"]
    assert document["counts"]["passed"] == len(CHECKS)  # every check of mlp
    rows = _table(section)
    assert [row[:2] for row in rows] == [["model", "status"], ["text", "failed"], ["mlp", "passed"]]
    assert "ready: " in rows[1][2] and "broken on purpose" in rows[1][2]
    assert _links(section) == {"JSON report": "reports/smoke.json", "JUnit XML": "reports/smoke.xml"}


def test_a_bad_summary_path_is_the_only_error_and_nothing_runs(example_repository: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(example_repository, repo)
    (repo / "mlp" / "1" / "model.onnx").write_bytes(b"tampered")  # verify would exit 1 had it run
    missing = tmp_path / "no-such-folder"
    for bad, reason in ((missing / "summary.md", f"no folder {missing} to write it in"),
                        (tmp_path, "it is a folder; gen-repo writes only to a regular file or a new name")):
        code, out, _err = _run("verify", repo, "--json", "--summary-md", bad)
        assert code == 2
        assert json.loads(out)["errors"] == [
            {"file": str(bad), "pointer": "/", "severity": "error",
             "message": f"--summary-md: cannot write this file: {reason}"}]
    # Checked before any work: smoke neither tries the server nor writes its report (it would, then fail to append).
    code, _out, err = _run("smoke", "--url", f"127.0.0.1:{free_port()}", "--json", tmp_path / "smoke.json",
                           "--summary-md", tmp_path)
    assert code == 2 and "--summary-md: cannot write this file: it is a folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo"]


@pytest.mark.timeout(60)
def test_an_unreachable_server_gets_a_section_too(example_repository: Path, tmp_path: Path) -> None:
    summary = _summary_file(tmp_path)
    url = f"127.0.0.1:{free_port()}"
    # smoke: its report says what it could not check (exit 3).
    code, _out, err = _run("smoke", "--url", url, "--model", "mlp", "--timeout", "5", "--json",
                           tmp_path / "smoke.json", "--summary-md", summary)
    assert code == 3, err
    section = _section(summary)
    assert section.startswith("### ❌ gen-repo smoke\n") and f"grpc {url}: server unreachable" in section
    assert _counts(section) == json.loads((tmp_path / "smoke.json").read_text())["counts"]
    assert [row[:2] for row in _table(section)] == [["model", "status"], ["mlp", "error"]]
    # lint --url: the command stops with a located error (exit 3), and the section carries it.
    summary.write_text(EARLIER, encoding="utf-8")
    code, out, _err = _run("lint", example_repository, "--url", url, "--json", "--summary-md", summary)
    assert code == 3
    errors = json.loads(out)["errors"]
    section = _section(summary)
    assert section.startswith("### ❌ gen-repo lint\n") and "exit 3 (unreachable)" in section
    assert _counts(section) == {"errors": len(errors)}
    assert _table(section)[1:] == [[e["file"], e["pointer"], e["message"]] for e in errors]
