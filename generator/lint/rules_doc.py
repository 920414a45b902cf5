"""docs/lint-rules.md, written from the one rule table (:mod:`generator.lint.rules`) so the page cannot drift."""

from __future__ import annotations

from generator.lint.rules import AREAS, NOT_PORTED, RULE_TABLE

__all__ = ["rules_markdown"]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def rules_markdown() -> str:
    """docs/lint-rules.md: every Triton check with its lint rule and the test that holds it, area by area."""
    lines = [
        "# Lint: Triton model repositories against Triton's rules",
        "",
        "Generated from `generator/lint/rules.py`: `python -c 'from generator.lint.rules_doc import rules_markdown;",
        "print(rules_markdown(), end=\"\")' > docs/lint-rules.md`;",
        "`tests/lint/test_rules.py` fails when this file and the table differ.",
        "",
        "## Running lint",
        "",
        "`gen-repo lint REPO [REPO...]` checks Triton model repositories, hand-written ones included, against every",
        "refusal Triton can decide from their files. The repositories are linted as one server with repeated",
        "`--model-repository` serves them: ensemble steps resolve across all of them, a model name in two is refused,",
        "and `--external-model NAME` names a model loaded from elsewhere. Platform and backend are inferred as Triton",
        "core infers them (model file names in the first sub-folder, the `<name>.<backend>` folder convention) before",
        "any backend rule runs, so ONNX graphs are compared with their configs however the backend was named (where",
        "`onnx` is installed; otherwise `onnx-skipped` says the check did not run). Findings are",
        "`file:line:col: severity: message [rule]` lines, file names prefixed by their repository when there are",
        "several; `--json` prints them as a document. Errors are Triton's refusals (exit 1); warnings are",
        "configurations Triton loads, probably not as meant (exit 0 when only warnings remain).",
        "",
        "```bash",
        "gen-repo lint tests/lint_corpus/good                      # hand-written models in the style of Triton's docs",
        "gen-repo lint tests/lint_corpus/bad/dims-invalid          # exit 1: one planted defect, located",
        "gen-repo lint tests/lint_corpus/good/tiny_classifier      # exit 1: a model folder, not a repository",
        "gen-repo lint --gpus 0 --backends python tests/lint_corpus/good  # exit 1: backends and GPUs it lacks",
        "```",
        "",
        "A REPO is a repository folder, the one `tritonserver --model-repository` is given; a model folder (one that",
        "holds a `config.pbtxt`) is refused with one error that names the repository folder to lint instead. The",
        "rules that depend on the target machine run with `--gpus N` and `--backends python,onnxruntime`, or",
        "`--url HOST:PORT` of a running server (which tells the backends it refused models for; Triton's API lists",
        "neither its backends nor its GPUs); without them they are skipped and the output says so (`skipped` in",
        "`--json`). The server's options some refusals depend on are given as `tritonserver` takes them, with its",
        "defaults: `--disable-auto-complete-config` (a model folder without `config.pbtxt` is then `config-required`;",
        "with auto-complete on, Triton's default, it is `config-missing`, a warning, where the backend fills a config",
        "in), `--rate-limit execution_count` and `--rate-limit-resource NAME:COUNT[:DEVICE]`",
        "(`rate-limiter-resource`; with `--rate-limit off`, the default, Triton ignores every resource). For the",
        "pre-commit hook, see `docs/release-pipelines.md`.",
        "",
        "## The rules",
        "",
        "Each Triton check names its source in",
        "[triton-inference-server/core](https://github.com/triton-inference-server/core) (or the backend named), the",
        "words of Triton's refusal, and its case in `tests/lint_cases.py`. Every case is",
        "held twice: `tests/lint/test_run.py::test_case_is_flagged_and_its_neighbour_is_not` (lint flags it at",
        "`file:line:col`, its accepted neighbour has no finding) and `tests/lint/test_triton.py::test_real_triton`",
        "(the real Triton 2.51 on CPU, started with the options lint was given, refuses it with these words and loads",
        "the neighbour), unless *server* says why not. Rows with no Triton check are configurations Triton loads",
        "(warnings) or rules beyond Triton.",
        "",
    ]
    for area, title in AREAS.items():
        lines += [f"### {title}", "", "| lint rule | severity | Triton source | Triton's refusal | case | server |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for r in (r for r in RULE_TABLE if r.area == area):
            for check in r.checks:
                lines.append(f"| `{r.id}` | {r.severity} | `{check.source}` {check.function} | "
                             f"{_cell(check.message)} | `{check.case}` | {_cell(check.server) or 'refused'} |")
            for case in r.cases:
                source = f"`{r.loaded_by[0]}` {_cell(r.loaded_by[1])}" if r.loaded_by else "(loads)"
                lines.append(f"| `{r.id}` | {r.severity} | {source} | (Triton loads it) | `{case}` | "
                             f"{_cell(r.server) or 'loaded'} |")
            for test in r.tests:
                lines.append(f"| `{r.id}` | {r.severity} | | {_cell(r.summary)} | `{test}` | |")
        lines.append("")
    lines += ["### Triton checks not ported, and why", "", "| Triton source | check | why not |", "| --- | --- | --- |"]
    lines += [f"| `{source}` | {_cell(check)} | {_cell(why)} |" for source, check, why in NOT_PORTED]
    lines.append("")
    return "\n".join(lines)

