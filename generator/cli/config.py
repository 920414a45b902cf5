"""``gen-repo config MANIFEST -o DIR``: write every model's config.pbtxt and contract (no model files)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import click

from generator.cli._common import report_errors
from generator.repository import write_files


def _write(files: dict[str, str], out_dir: Path, models: list[str]) -> None:
    """Stage everything in a temp folder next to ``out_dir``, then swap each model folder in by rename.

    Files in ``out_dir`` that are not one of ``models`` are left alone. Not :class:`RepositoryWriter`: a folder of
    configs alone has no lock file to commit, and each model folder is replaced whole by one rename.
    """
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.staging-", dir=out_dir.parent))
    os.chmod(staging, 0o755)  # mkdtemp makes it private; the repository is meant to be read by a server
    try:
        write_files(staging, files)
        if not out_dir.exists():
            os.rename(staging, out_dir)
            return
        for model in models:
            old = out_dir / model
            trash = staging / f".old-{model}"
            if old.exists() or old.is_symlink():
                os.rename(old, trash)
            os.rename(staging / model, old)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


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
    from generator.model_files import config_files
    from generator.planning import BuildOptions, plan_build

    # The same planning (and `target: auto` resolution) as `gen-repo build`, so the configs match what it writes,
    # except warmup: without the build's data files it warms up with zeros and random bytes.
    plan, _ = plan_build(Path(manifest), BuildOptions(allow_outside=allow_outside, target=target), warmup_data=False)
    out_dir = Path(output).resolve() if output else plan.output_dir
    files = config_files(plan)
    _write(files, out_dir, [m.name for m in plan.models])
    if json_output:
        click.echo(json.dumps({"ok": True, "output": str(out_dir), "files": sorted(files)}, indent=2, sort_keys=True))
    else:
        for relative in sorted(files):
            click.echo(f"wrote {out_dir / relative}")
