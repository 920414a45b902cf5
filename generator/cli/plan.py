"""``gen-repo plan MANIFEST``: what would be generated (models, targets, shapes, batching decision), nothing written."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from generator.cli._common import report_errors
from generator.cli._output import echo
from generator.errors import EXIT_USAGE, GenRepoError


def _shape(values: list[int]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def _print_text(summary: dict[str, Any]) -> None:
    echo(f"manifest: {summary['manifest']}")
    echo(f"output:   {summary['output']}")
    for model in summary["models"]:
        echo("")
        echo(f"model {model['name']!r} version {model['version']}: target {model['target']}, "
             f"max_batch_size {model['max_batch_size']} ({'batching' if model['batching'] else 'no batching'})")
        echo(f"  spec: {model['spec']}")
        source = model["source"]
        if source is not None:
            echo(f"  source: {source['kind']} {source['factory'] or source['path']}")
        samples = model["samples"]
        if samples is not None:
            echo(f"  samples: {samples['kind']} {samples['factory'] or samples['path']}")
        for kind in ("inputs", "outputs"):
            for t in model[kind]:
                extra = f" reshape {_shape(t['reshape'])}" if "reshape" in t else ""
                if "value_range" in t:
                    extra += f" values {t['value_range'][0]}..{t['value_range'][1]}"
                elif "values" in t:
                    extra += f" values {t['values']}"
                echo(
                    f"  {kind[:-1]:6} {t['name']} {t['data_type']} dims {_shape(t['dims'])}{extra}  "
                    f"min {_shape(t['min_shape'])} opt {_shape(t['opt_shape'])} max {_shape(t['max_shape'])}"
                )
        for decision in model["decisions"]:
            echo(f"  - {decision}")
    for ensemble in summary["ensembles"]:
        echo("")
        echo(f"ensemble {ensemble['name']!r} version {ensemble['version']}: max_batch_size "
             f"{ensemble['max_batch_size']}")
        for kind in ("inputs", "outputs"):
            for t in ensemble[kind]:
                echo(f"  {kind[:-1]:6} {t['name']} {t['data_type']} dims {_shape(t['dims'])}  "
                     f"min {_shape(t['min_shape'])} opt {_shape(t['opt_shape'])} max {_shape(t['max_shape'])}")
        for step in ensemble["steps"]:
            ins = ", ".join(f"{k} <- {v}" for k, v in sorted(step["inputs"].items()))
            outs = ", ".join(f"{k} -> {v}" for k, v in sorted(step["outputs"].items()))
            echo(f"  step {step['model']}: {ins}; {outs}")
        for decision in ensemble["decisions"]:
            echo(f"  - {decision}")
    for refused in summary["refused"]:
        echo("")
        # The reasons are printed once, as the command's errors on stderr (with every other command's errors).
        echo(f"model {refused['name']!r} ({refused['pointer']}): refused, nothing would be built "
             f"({len(refused['problems'])} error(s) below)")


@click.command("plan")
@click.argument("manifest", type=click.Path(dir_okay=False, path_type=str))
@click.option("--json", "json_output", is_flag=True, help="Print the plan as JSON (sorted keys).")
@click.option("--allow-outside", is_flag=True, help="Allow manifest paths that leave the manifest's folder.")
@click.option("--target", type=click.Choice(["auto", "tensorrt", "onnx", "python"]),
              help="Override every model's target, as `gen-repo build --target` does.")
@click.option("-o", "--output", "output_dir", type=click.Path(file_okay=False, path_type=Path),
              help="The repository folder the build would write, as `gen-repo build -o` (default: the manifest's "
                   "`output`).")
@report_errors
def command(manifest: str, json_output: bool, allow_outside: bool, target: str | None,
            output_dir: Path | None) -> None:
    """Show what `gen-repo config`/`build` would generate for MANIFEST, without writing anything.

    Every model that can be planned is shown, with each decision; a model that cannot is listed as refused with
    every reason. Exit 0 with the plan; exit 2 when a model is refused or the manifest itself is invalid (every
    problem as file: /pointer: message).
    """
    from generator.planning.options import BuildOptions
    from generator.planning.plan import describe_plan
    from generator.planning.targets import plan_build

    # The same planning (and `target: auto` resolution) as `gen-repo build --keep-going`: every model is shown.
    plan, notes = plan_build(Path(manifest), BuildOptions(allow_outside=allow_outside, target=target,
                                                          keep_going=True), output_dir)
    summary = {**describe_plan(plan), "notes": notes}
    problems = [p for refused in plan.refused for p in refused.problems]
    if json_output:
        payload = {"ok": not problems, **summary}
        if problems:
            payload["errors"] = [p.to_dict() for p in problems]  # as every command reports bad input
        echo(json.dumps(payload, indent=2, sort_keys=True))
        if problems:
            sys.exit(EXIT_USAGE)
        return
    _print_text(summary)
    for note in notes:
        echo(f"note: {note}")
    if problems:
        raise GenRepoError(problems, "refused: " + ", ".join(repr(r.name) for r in plan.refused))
