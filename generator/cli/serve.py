"""``gen-repo serve``: run a local tritonserver on loopback with a repository, for development, until Ctrl-C.

Exit codes: 0 stopped by Ctrl-C (or SIGTERM), 1 the server exited on its own, 2 bad usage or no tritonserver, 3 the
server did not start.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from types import FrameType

import click

from generator.cli._common import POSITIVE, report_errors
from generator.cli._output import echo
from generator.errors import EXIT_FAILED, EXIT_OK, GenRepoError, Problem


@click.command("serve")
@click.option("--repo", "repo", type=click.Path(path_type=Path), default=Path("model_repository"), show_default=True,
              help="The model repository to serve.")
@click.option("--http-port", type=click.IntRange(1, 65535), help="HTTP port (default: a free one).")
@click.option("--grpc-port", type=click.IntRange(1, 65535), help="gRPC port (default: a free one).")
@click.option("--metrics-port", type=click.IntRange(1, 65535), help="Metrics port (default: a free one).")
@click.option("--tritonserver", type=click.Path(path_type=Path), help="tritonserver binary (default: PATH, then "
              "the one in nvidia-pytriton).")
@click.option("--model-control", type=click.Choice(["none", "explicit", "poll"]), default="none", show_default=True,
              help="Triton's --model-control-mode (explicit: load models with the repository API or gen-repo smoke).")
@click.option("--ready-timeout", type=POSITIVE, default=120.0, show_default=True, help="Seconds to wait for readiness.")
@report_errors
def command(
    repo: Path,
    http_port: int | None,
    grpc_port: int | None,
    metrics_port: int | None,
    tritonserver: Path | None,
    model_control: str,
    ready_timeout: float,
) -> None:
    """Serve a repository on 127.0.0.1 until Ctrl-C (for development; release pipelines use smoke --launch)."""
    from generator.serving.server import launch

    if not repo.is_dir():
        raise GenRepoError([Problem(str(repo), "", "model repository folder does not exist")])

    def terminate(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt  # SIGTERM stops the server the same way Ctrl-C does

    previous = signal.signal(signal.SIGTERM, terminate)
    # Ctrl-C anywhere (even while the URLs are being printed) leaves through launch(), which stops the server.
    try:
        with launch(
            repo,
            tritonserver=tritonserver,
            ready_timeout=ready_timeout,
            http_port=http_port,
            grpc_port=grpc_port,
            metrics_port=metrics_port,
            model_control=model_control,
        ) as server:
            echo(f"serving {repo} with {server.binary.describe()}")
            echo(f"  HTTP     http://{server.http_url}")
            echo(f"  gRPC     {server.grpc_url}")
            echo(f"  metrics  {server.metrics_url}")
            echo("Ctrl-C to stop.")
            while server.running:
                time.sleep(0.5)
            echo(f"tritonserver exited with code {server.returncode}; log tail:\n{server.log_tail()}", err=True)
            sys.exit(EXIT_FAILED)
    except KeyboardInterrupt:
        echo("tritonserver stopped", err=True)
        sys.exit(EXIT_OK)
    finally:
        signal.signal(signal.SIGTERM, previous)
