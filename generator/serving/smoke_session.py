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
from generator.errors import GenRepoError, Problem
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
            from generator.repository.remote_copy import download_repository
            from generator.repository.storage_urls import parse_url

            # The checks need the repository's files (configs, contracts, references): copied from the bucket as far
            # as its lock lists them. A bucket that differs from its lock is refused (the checks would judge the
            # served models against expectations nobody locked), unless only in unserved versions' unlisted objects.
            scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gen-repo-smoke-")))
            copy = download_repository(bucket, scratch / "repo")
            target = parse_url(bucket)
            leftovers = _unserved_leftovers(copy.problems, copy.folder, target.object_url(""))
            if leftovers:
                say(f"not checked: {', '.join(leftovers)}: objects no lock lists, in versions Triton does not serve "
                    "(an interrupted publish leaves them; gen-repo verify lists them)")
            problems = [p for p in copy.problems if not any(p.file.startswith(f"{f}/") for f in leftovers)]
            if problems:
                raise GenRepoError(problems, summary="the bucket differs from its lock file (gen-repo verify): "
                                                     "not smoke-tested")
            folder = copy.folder
            serve_from = target.triton_url
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


def _unserved_leftovers(problems: Sequence[Problem], copy: Path, root_url: str) -> list[str]:
    """The version folders (URLs) whose only problems are objects no lock lists, in a version Triton does not serve.

    A publish killed before its switch leaves such a folder by design; smoke neither reads nor serves it.
    """
    from generator.contracts.served import FolderReader, read_served_model
    from generator.naming import version_folder

    root = root_url.rstrip("/") + "/"
    unlisted_only: dict[tuple[str, int], bool] = {}  # (model, version) -> every problem in it is an unlisted object
    for problem in problems:
        parts = problem.file.removeprefix(root).split("/") if problem.file.startswith(root) else []
        version = version_folder(parts[1]) if len(parts) > 2 else None
        if version is not None:
            key = (parts[0], version)
            unlisted_only[key] = unlisted_only.get(key, True) and problem.message.startswith("unexpected: not listed")
    leftovers = []
    for (model, version), unlisted in sorted(unlisted_only.items()):
        try:
            served = read_served_model(FolderReader(copy), model).version
        except GenRepoError:
            continue  # an unreadable model excuses nothing
        if unlisted and served is not None and version != served:
            leftovers.append(f"{root}{model}/{version}")
    return leftovers
