"""What a tritonserver launched on a bucket needs for its storage: its environment, and its log's storage errors.

google-cloud-cpp (its GCS client) retries silently for minutes: the environment turns its call logging on, and the
findings pick the storage lines out of the server's log, with any emulator setting gen-repo and the server disagree on.
"""

from __future__ import annotations

import os
import re

from generator.repository.storage_urls import GCS_EMULATOR_ENV, TRITON_GCS_EMULATOR_ENV, gcs_emulator

__all__ = ["server_environment", "server_storage_findings"]

#: google-cloud-cpp (tritonserver's GCS client) retries a failing request for minutes without a word in the server's
#: log; with these it logs every storage call and its status there.
_GCS_SERVER_LOGGING = {"GOOGLE_CLOUD_CPP_ENABLE_CLOG": "yes", "CLOUD_STORAGE_ENABLE_TRACING": "raw-client"}
#: A google-cloud-cpp call that failed: ``GetBucketMetadata() >> status={UNAVAILABLE: ... Couldn't connect ...}``.
_GCS_FAILED_CALL = re.compile(r"(\w+)\(\) >> status=\{(?!OK\b)(.*)\}")
#: A tritonserver log line: ``E1204 16:48:54.154846 25613 server.cc:302] "message"``.
_TRITON_LINE = re.compile(r"^[EW]\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] (.*)$")
_STORAGE_WORDS = re.compile(r"s3|gcs|gs://|storage|bucket|credential|curl|filesystem", re.IGNORECASE)


#: Where google-cloud-cpp looks for the GCE metadata server (its credential lookup): with an emulator, a loopback
#: port nothing answers on, so the lookup fails at once and stays on the machine (it then uses no credentials).
_NO_METADATA_SERVER = {"GCE_METADATA_ROOT": "127.0.0.1:1"}


def server_environment(repository: str) -> dict[str, str]:
    """Environment for a tritonserver launched on ``repository`` (settings already in the environment are kept).

    For ``gs://``: google-cloud-cpp's call logging, so that the log says why storage fails; with an emulator
    (``CLOUD_STORAGE_EMULATOR_ENDPOINT``), no metadata-server lookup off the machine. Nothing for folders and
    ``s3://`` (tritonserver logs S3 failures itself).
    """
    if not repository.startswith("gs://"):
        return {}
    wanted = dict(_GCS_SERVER_LOGGING)
    if os.environ.get(TRITON_GCS_EMULATOR_ENV):
        wanted.update(_NO_METADATA_SERVER)
    return {key: value for key, value in wanted.items() if key not in os.environ}


def _normalized(endpoint: str | None) -> str | None:
    if not endpoint:
        return None
    return (endpoint if endpoint.startswith(("http://", "https://")) else f"http://{endpoint}").rstrip("/")


def server_storage_findings(repository: str, log_text: str, limit: int = 6) -> list[str]:
    """Why a tritonserver launched on the remote ``repository`` could not read it.

    Its log's storage errors (the last ``limit`` distinct ones) and any mismatch between gen-repo's and the server's
    emulator settings.
    """
    found: list[str] = []
    for line in log_text.splitlines():
        call = _GCS_FAILED_CALL.search(line)
        if call:
            found.append(f"{call.group(1)}(): {call.group(2)}")
            continue
        triton = _TRITON_LINE.match(line)
        text = triton.group(1).strip().strip('"') if triton else line.strip() if line.startswith("error:") else ""
        if text and _STORAGE_WORDS.search(text):
            found.append(text)
    lines = list(dict.fromkeys(reversed(found)))[:limit][::-1]  # the last distinct ones, in log order
    if repository.startswith("gs://"):
        ours, theirs = gcs_emulator(), _normalized(os.environ.get(TRITON_GCS_EMULATOR_ENV))
        if ours != theirs:
            mine = f"{GCS_EMULATOR_ENV}={ours}" if ours else f"{GCS_EMULATOR_ENV} unset (Google Cloud Storage)"
            server = f"{TRITON_GCS_EMULATOR_ENV}={theirs}" if theirs else (
                f"{TRITON_GCS_EMULATOR_ENV} unset (Google Cloud Storage)")
            lines.append(f"gen-repo reads {repository} through {mine}, tritonserver through {server}: point both at "
                         "the same endpoint")
    return lines
