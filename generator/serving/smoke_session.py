"""One ``gen-repo smoke`` run end to end: its repository and its server, then :func:`generator.serving.smoke.run_smoke`.

A launched server uses explicit model control and is always stopped; one that does not start is an "unreachable"
report (exit 3).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from generator.confinement import refuse_symlinks
from generator.serving.smoke import repository_models, run_smoke, unreachable_report
from generator.serving.smoke_results import CheckResult, SmokeOptions, SmokeReport

__all__ = ["smoke_session"]

#: Told one line about what was started (the launched server and what it serves).
Announce = Callable[[str], None]


def smoke_session(
    repo: str | None,
    *,
    url: str | None,
    protocol: str,
    models: Sequence[str],
    options: SmokeOptions,
    tritonserver: Path | None = None,
    ready_timeout: float = 120.0,
    progress: Callable[[CheckResult], None] | None = None,
    announce: Announce | None = None,
) -> SmokeReport:
    """Smoke-test ``repo`` on the server at ``url``, or on one launched for the run when ``url`` is None.

    ``repo`` is a folder, ``s3://`` or ``gs://`` (optional with ``url``).
    """
    say = announce or (lambda line: None)
    bucket = repo if repo is not None and repo.startswith(("s3://", "gs://")) else None
    with contextlib.ExitStack() as stack:
        folder: Path | None = Path(repo) if repo is not None and bucket is None else None
        if folder is not None and folder.is_dir():
            refuse_symlinks(folder)  # its checks read the folder; a launched Triton would follow a link
        serve_from: Path | str | None = folder
        scratch: Path | None = None
        if bucket is not None:
            from generator.errors import GenRepoError
            from generator.repository.remote_copy import download_repository
            from generator.repository.storage_urls import parse_url

            # The checks need the repository's files (configs, contracts, references): copied from the bucket as far
            # as its lock lists them. A bucket that differs from its lock is refused: the checks would judge the
            # served models against expectations nobody locked.
            scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gen-repo-smoke-")))
            copy = download_repository(bucket, scratch / "repo")
            if copy.problems:
                raise GenRepoError(copy.problems, summary="the bucket differs from its lock file (gen-repo verify): "
                                                          "not smoke-tested")
            folder = copy.folder
            serve_from = parse_url(bucket).triton_url
        if url is not None:
            return run_smoke(url, protocol, folder, list(models) or None, options, progress)
        assert folder is not None and serve_from is not None, "a launched server needs a repository"
        log_file = scratch / "tritonserver.log" if scratch is not None else None
        return _launched(folder, serve_from, protocol, list(models), options, tritonserver, ready_timeout, progress,
                         say, log_file)


def _launched(
    repo: Path,
    serve_from: Path | str,
    protocol: str,
    models: list[str],
    options: SmokeOptions,
    tritonserver: Path | None,
    ready_timeout: float,
    progress: Callable[[CheckResult], None] | None,
    say: Announce,
    log_file: Path | None = None,
) -> SmokeReport:
    """Smoke-test on a server launched for the run.

    ``log_file`` (for a remote repository) keeps the server's log, to show its storage errors if it is not ready.
    """
    from generator.serving.server import TritonNotReadyError, TritonStartError, launch, read_log
    from generator.serving.server_storage import server_environment, server_storage_findings

    names = models or repository_models(repo)
    remote = log_file is not None
    try:
        with launch(serve_from, tritonserver=tritonserver, ready_timeout=ready_timeout, model_control="explicit",
                    env=server_environment(str(serve_from)) if remote else None, log_file=log_file) as server:
            url = server.grpc_url if protocol == "grpc" else server.http_url
            say(f"launched tritonserver {server.binary.describe()} at {url} ({protocol}) serving {serve_from}")
            return run_smoke(url, protocol, repo, names or None, options, progress)
    except (TritonStartError, TritonNotReadyError) as error:
        message = "; ".join(p.message for p in error.problems)
        for problem in error.problems:
            say(f"error: {problem}")
        if log_file is not None:
            findings = server_storage_findings(str(serve_from), read_log(log_file))
            for finding in findings:
                say(f"error: {serve_from}: tritonserver storage: {finding}")
            if findings:
                message = f"{message.splitlines()[0]} storage: {' | '.join(findings)}"
        report = unreachable_report("127.0.0.1", protocol, names, f"the launched server did not start: {message}")
        if progress is not None:
            for result in report.results:
                progress(result)
        return report
