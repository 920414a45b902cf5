"""``gen-repo plan MANIFEST``: what would be generated (models, targets, shapes, batching decision), nothing written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from generator.cli._common import report_errors


def _shape(values: list[int]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def _print_text(summary: dict[str, Any]) -> None:
    click.echo(f"manifest: {summary['manifest']}")
    click.echo(f"output:   {summary['output']}")
    for model in summary["models"]:
        click.echo("")
        click.echo(f"model {model['name']!r} version {model['version']}: target {model['target']}, "
                   f"max_batch_size {model['max_batch_size']} ({'batching' if model['batching'] else 'no batching'})")
        click.echo(f"  spec: {model['spec']}")
        source = model["source"]
        if source is not None:
            click.echo(f"  source: {source['kind']} {source['factory'] or source['path']}")
        for kind in ("inputs", "outputs"):
            for t in model[kind]:
                extra = f" reshape {_shape(t['reshape'])}" if "reshape" in t else ""
                click.echo(
                    f"  {kind[:-1]:6} {t['name']} {t['data_type']} dims {_shape(t['dims'])}{extra}  "
                    f"min {_shape(t['min_shape'])} opt {_shape(t['opt_shape'])} max {_shape(t['max_shape'])}"
                )
        for decision in model["decisions"]:
            click.echo(f"  - {decision}")


@click.command("plan")
@click.argument("manifest", type=click.Path(dir_okay=False, path_type=str))
@click.option("--json", "json_output", is_flag=True, help="Print the plan as JSON (sorted keys).")
@click.option("--allow-outside", is_flag=True, help="Allow manifest paths that leave the manifest's folder.")
@click.option("--target", type=click.Choice(["auto", "tensorrt", "onnx", "python"]),
              help="Override every model's target, as `gen-repo build --target` does.")
@report_errors
def command(manifest: str, json_output: bool, allow_outside: bool, target: str | None) -> None:
    """Show what `gen-repo config`/`build` would generate for MANIFEST, without writing anything.

    Exit 0 with the plan; exit 2 with every problem of the manifest (file: /pointer: message).
    """
    from generator.build import BuildOptions, plan_build
    from generator.plan import describe_plan

    # The same planning (and `target: auto` resolution) as `gen-repo build`.
    plan, notes = plan_build(Path(manifest), BuildOptions(allow_outside=allow_outside, target=target))
    summary = {**describe_plan(plan), "notes": notes}
    if json_output:
        click.echo(json.dumps({"ok": True, **summary}, indent=2, sort_keys=True))
    else:
        _print_text(summary)
        for note in notes:
            click.echo(f"note: {note}")
