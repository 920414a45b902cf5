"""``gen-repo perf-config (MANIFEST | --repo DIR) -o OUTDIR``: load-test configuration bounded by each profile."""

from __future__ import annotations

import json
from pathlib import Path

import click

from generator.cli._common import report_errors
from generator.cli._output import echo
from generator.errors import EXIT_USAGE


@click.command("perf-config")
@click.argument("manifest", required=False, type=click.Path(dir_okay=False, path_type=str))
@click.option("--repo", "repo", type=click.Path(file_okay=False, path_type=str), default=None,
              help="A built repository: read each model's gen_repo/contract.json (instead of a MANIFEST).")
@click.option("-o", "--output", "output", required=True, type=click.Path(file_okay=False, path_type=str),
              help="Folder for the input-data JSON files, perf_analyzer.{json,sh} and model_analyzer.yaml.")
@click.option("--model", "models", multiple=True, help="Only this model (repeatable).")
@click.option("-u", "--url", default="127.0.0.1:8001", show_default=True, help="Server URL in the perf_analyzer args.")
@click.option("-i", "--protocol", type=click.Choice(["grpc", "http"]), default="grpc", show_default=True)
@click.option("--allow-outside", is_flag=True, help="Allow manifest paths that leave the manifest's folder.")
@click.option("--json", "json_output", is_flag=True, help="Print the written files as JSON.")
@report_errors
def command(
    manifest: str | None,
    repo: str | None,
    output: str,
    models: tuple[str, ...],
    url: str,
    protocol: str,
    allow_outside: bool,
    json_output: bool,
) -> None:
    """Write perf_analyzer arguments, --input-data files (min/opt/max) and a Model Analyzer config per model.

    Every shape and batch size stays inside the model's optimization profile (from gen_repo/contract.json with
    --repo, or from the plan of MANIFEST).
    """
    from generator.serving.perf_config import perf_config_files, relative_path, write_perf_config_files
    from generator.serving.perf_models import models_from_plan, models_from_repository

    if (manifest is None) == (repo is None):
        echo("error: give either MANIFEST or --repo DIR", err=True)
        raise SystemExit(EXIT_USAGE)
    out_dir = Path(output)
    if repo is not None:
        perf_models = models_from_repository(repo, models)
        repository = Path(repo)
    else:
        from generator.manifest.loading import load_manifest
        from generator.planning.plan import plan_repository

        assert manifest is not None
        plan = plan_repository(load_manifest(manifest, allow_outside=allow_outside))
        perf_models = models_from_plan(plan, models)
        repository = plan.output_dir
    files = perf_config_files(perf_models, relative_path(repository, out_dir), url=url, protocol=protocol)
    written = write_perf_config_files(out_dir, files)
    if json_output:
        echo(json.dumps({"ok": True, "output": str(out_dir), "files": sorted(files)}, indent=2, sort_keys=True))
    else:
        for path in written:
            echo(f"wrote {path}")
