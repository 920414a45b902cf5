"""``gen-repo config MANIFEST -o DIR``: write every model's config.pbtxt and contract (no model files)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from generator.cli._common import report_errors
from generator.cli._output import echo
from generator.confinement import OUTPUT_OPTION, output_overlap_problems
from generator.errors import GenRepoError, Problem
from generator.manifest.loading import read_manifest, read_paths
from generator.repository.staging import config_staging, output_refusal


@click.command("config")
@click.argument("manifest", type=click.Path(dir_okay=False, path_type=str))
@click.option("-o", "--output", "output", type=click.Path(file_okay=False, path_type=str), default=None,
              help="Repository folder (default: the manifest's `output`, else model_repository next to it).")
@click.option("--allow-outside", is_flag=True, help="Allow manifest paths that leave the manifest's folder.")
@click.option("--target", type=click.Choice(["auto", "tensorrt", "onnx", "python"]),
              help="Override every model's target, as `gen-repo build --target` does.")
@click.option("--json", "json_output", is_flag=True, help="Print the written files as JSON.")
@report_errors
def command(manifest: str, output: str | None, allow_outside: bool, target: str | None, json_output: bool) -> None:
    """Write <model>/config.pbtxt and <model>/<version>/gen_repo/contract.json for every model of MANIFEST.

    Nothing is written when any model has a problem (exit 2, every problem listed).
    """
    from generator.planning.model_files import config_files
    from generator.planning.options import BuildOptions
    from generator.planning.targets import plan_build
    from generator.repository.files import write_files

    # The same planning (and `target: auto` resolution) as `gen-repo build`, so the configs match what it writes,
    # except warmup: without the build's data files it warms up with zeros and random bytes.
    document = read_manifest(Path(manifest), allow_outside=allow_outside)
    options = BuildOptions(allow_outside=allow_outside, target=target)
    if document.problems:
        # The manifest's own folders are refused (its `output` may lead elsewhere): no staging folder is made there.
        # Planning without writing reports these problems with every other one, and raises.
        plan_build(document, options, warmup_data=False)
    out_dir = Path(output).resolve() if output else document.output_dir
    where = (OUTPUT_OPTION, "") if output else (str(document.file), "/output")
    problems = output_overlap_problems(out_dir, read_paths(document), *where, resolved=True) if output else []
    if (why := output_refusal(out_dir)) is not None:
        problems.append(Problem(where[0], where[1], f"{out_dir}: {why}"))
    if problems:  # refused before a staging folder is made beside the output; with every planning problem too
        try:
            plan_build(document, options, warmup_data=False)
        except GenRepoError as error:
            problems += error.problems
        raise GenRepoError(problems)
    plan, _ = plan_build(document, options, warmup_data=False)
    files = config_files(plan)
    with config_staging(out_dir) as staging:
        write_files(staging.folder, files)
        staging.commit([m.name for m in plan.models] + [e.name for e in plan.ensembles])
    if json_output:
        echo(json.dumps({"ok": True, "output": str(out_dir), "files": sorted(files)}, indent=2, sort_keys=True))
    else:
        echo("\n".join(f"wrote {out_dir / relative}" for relative in sorted(files)))  # one write, not 2 per model
