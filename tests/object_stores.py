"""Real object stores on loopback for the publish/verify/smoke tests: S3 (``moto_server``) and GCS
(``gcp-storage-emulator``, in memory). conftest.py turns them into the ``store`` fixture (one per backend).

Each server listens on 127.0.0.1 only (checked with ``ss``), is started once per session and stopped at the end.
:class:`ObjectStore` says how gen-repo, tritonserver and a test reach it: the environment (credentials for S3, the
emulator variables for GCS), URLs for a prefix, and the objects to plant, read, list or remove; :class:`FolderStore`
says the same of a folder, so that one test body runs on s3, gcs and a folder (the ``publish_store`` fixture).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from generator.repository.local_store import LocalStore
from generator.repository.storage_urls import StorageURL, parse_destination
from generator.serving.server import free_port
from tests.requirements import require

BIN = Path(sys.executable).parent
#: moto accepts any credentials; the AWS SDKs need some to sign with (and never look further, e.g. EC2 metadata).
AWS_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_EC2_METADATA_DISABLED": "true"}
#: S3 bucket names are 3-63 characters; GCS's emulator takes the same.
BUCKET = "models"
MISSING_BUCKET = "no-such-bucket"


def gcs_env(endpoint: str) -> dict[str, str]:
    """What a user of a GCS emulator sets (docs/release-pipelines.md): gen-repo's (gcsfs's) and tritonserver's
    (google-cloud-cpp's) endpoint, no GCE metadata probe by google-auth nor by google-cloud-cpp (a loopback port
    nothing answers on), and gcsfs's plain client (read when gcsfs is imported)."""
    return {"STORAGE_EMULATOR_HOST": endpoint, "CLOUD_STORAGE_EMULATOR_ENDPOINT": endpoint, "NO_GCE_CHECK": "true",
            "GCE_METADATA_ROOT": "127.0.0.1:1", "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}


@dataclass(frozen=True)
class ObjectStore:
    """One running store: ``kind`` ("s3" or "gcs"), its endpoint (``127.0.0.1:PORT``) and environment.

    A test body reaches it, and :class:`FolderStore`, through one interface: :meth:`url` and :meth:`triton_url` for a
    prefix, :meth:`put`, :meth:`read`, :meth:`exists`, :meth:`remove` and :meth:`names` on the objects below it,
    :meth:`snapshot` of them all, :meth:`fs` and :meth:`target` as publish opens them, and :meth:`folder`.
    """

    kind: str
    endpoint: str
    env: dict[str, str] = field(default_factory=dict)

    @property
    def scheme(self) -> str:
        return "s3" if self.kind == "s3" else "gs"

    def url(self, prefix: str, bucket: str = BUCKET) -> str:
        """The repository URL gen-repo takes for ``prefix`` in ``bucket``."""
        if self.kind == "s3":
            return f"s3://{self.endpoint}/{bucket}/{prefix}"
        return f"gs://{bucket}/{prefix}"

    def triton_url(self, prefix: str) -> str:
        """What ``gen-repo publish`` says to give ``tritonserver --model-repository``: the URL in the form given."""
        return self.url(prefix)

    def dead_url(self, prefix: str) -> str:
        """A URL whose endpoint refuses connections (gen-repo's environment for GCS: :meth:`dead_env`)."""
        if self.kind == "s3":
            return f"s3://127.0.0.1:{free_port()}/{BUCKET}/{prefix}"
        return self.url(prefix)

    def dead_env(self) -> dict[str, str]:
        """The environment in which :meth:`dead_url` cannot be reached."""
        if self.kind == "s3":
            return dict(self.env)
        return {**self.env, **gcs_env(f"http://127.0.0.1:{free_port()}")}

    def fs(self) -> Any:
        """An fsspec filesystem on the store (listing caches off): what publish opens, to give it or wrap it."""
        if self.kind == "s3":
            import s3fs

            return s3fs.S3FileSystem(endpoint_url=f"http://{self.endpoint}", skip_instance_cache=True,
                                     use_listings_cache=False)
        from gcsfs.core import GCSFileSystem

        return GCSFileSystem(endpoint_url=f"http://{self.endpoint}", token="anon", skip_instance_cache=True)

    def target(self, prefix: str) -> StorageURL:
        """The parsed destination publish works on (for its publishers' lock)."""
        return parse_destination(self.url(prefix))

    def key(self, prefix: str, rel: str = "") -> str:
        """The fsspec path of ``rel`` in the repository at ``prefix``."""
        return "/".join(p for p in (BUCKET, prefix, rel) if p)

    def put(self, prefix: str, rel: str, data: bytes) -> None:
        """Write the object ``rel`` (``key/``: a folder marker) as another writer of the bucket would."""
        self.fs().pipe_file(self.key(prefix, rel), data)

    def read(self, prefix: str, rel: str) -> bytes:
        return bytes(self.fs().cat_file(self.key(prefix, rel)))

    def exists(self, prefix: str, rel: str) -> bool:
        return bool(self.fs().exists(self.key(prefix, rel)))

    def remove(self, prefix: str, rel: str) -> None:
        self.fs().rm_file(self.key(prefix, rel))

    def names(self, prefix: str, rel: str) -> list[str]:
        """The names directly below the folder ``rel``, sorted."""
        return sorted(p.rstrip("/").rsplit("/", 1)[1] for p in self.fs().ls(self.key(prefix, rel)))

    def snapshot(self, prefix: str) -> dict[str, bytes]:
        """Every object under ``prefix`` with its bytes."""
        fs = self.fs()
        fs.invalidate_cache()
        return {p: fs.cat_file(p) for p in fs.find(self.key(prefix))}

    def folder(self, prefix: str, scratch: Path) -> Path:
        """A folder holding the repository at ``prefix`` (downloaded into ``scratch``), to read its files."""
        from generator.repository.remote_copy import download_repository

        return download_repository(self.url(prefix), scratch).folder


@dataclass(frozen=True)
class FolderStore:
    """A shared folder as a publish destination (``kind`` "local"), with :class:`ObjectStore`'s interface: URLs are
    folder paths, keys file paths, folder markers (``key/``) folders; ``root`` is a real path (no symlink on it)."""

    root: Path
    kind: str = "local"
    env: dict[str, str] = field(default_factory=dict)

    def url(self, prefix: str) -> str:
        """The destination folder for ``prefix`` (made, as a bucket is made before a publish)."""
        (self.root / prefix).mkdir(parents=True, exist_ok=True)
        return str(self.root / prefix)

    def triton_url(self, prefix: str) -> str:
        return str(self.root / prefix)

    def fs(self) -> LocalStore:
        """What publish opens on a folder."""
        return LocalStore(str(self.root))

    def target(self, prefix: str) -> StorageURL:
        return parse_destination(self.url(prefix))

    def key(self, prefix: str, rel: str = "") -> str:
        """The path of ``rel`` in the destination ``prefix``."""
        return "/".join(p for p in (str(self.root), prefix, rel) if p)

    def put(self, prefix: str, rel: str, data: bytes) -> None:
        path = Path(self.key(prefix, rel))
        if rel.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def read(self, prefix: str, rel: str) -> bytes:
        return Path(self.key(prefix, rel)).read_bytes()

    def exists(self, prefix: str, rel: str) -> bool:
        return os.path.lexists(self.key(prefix, rel))

    def remove(self, prefix: str, rel: str) -> None:
        Path(self.key(prefix, rel)).unlink()

    def names(self, prefix: str, rel: str) -> list[str]:
        return sorted(p.name for p in Path(self.key(prefix, rel)).iterdir())

    def snapshot(self, prefix: str) -> dict[str, bytes]:
        """Every file under ``prefix`` with its bytes, every empty folder as ``path/``: b"", every symlink as
        ``path@``: its target."""
        out: dict[str, bytes] = {}
        for path in sorted((self.root / prefix).rglob("*")):
            if path.is_symlink():
                out[f"{path}@"] = os.readlink(path).encode()
            elif path.is_dir():
                if not any(path.iterdir()):
                    out[f"{path}/"] = b""
            else:
                out[str(path)] = path.read_bytes()
        return out

    def folder(self, prefix: str, scratch: Path) -> Path:
        return self.root / prefix


#: A publish destination of the ``publish_store`` fixture.
Store = ObjectStore | FolderStore


def _wait_listening(process: subprocess.Popen[bytes], port: int, what: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            break
        assert process.poll() is None and time.monotonic() < deadline, f"{what} did not start"
        time.sleep(0.1)
    listening = subprocess.run(["ss", "-Htlnp"], capture_output=True, text=True).stdout
    mine = [line.split()[3] for line in listening.splitlines() if f"pid={process.pid}," in line]
    assert mine == [f"127.0.0.1:{port}"], mine  # loopback only


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def store_command(kind: str, port: int) -> list[str]:
    """The command that serves ``kind`` on 127.0.0.1:``port`` (GCS: in memory, with the test bucket)."""
    if kind == "s3":
        return [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)]
    return [str(BIN / "gcp-storage-emulator"), "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory",
            "--default-bucket", BUCKET, "--quiet"]


def skip_unless_installed(kind: str) -> None:
    """Skip (a failure under GEN_REPO_STRICT_SKIPS=1) when the store or its client library is missing."""
    require("moto_s3" if kind == "s3" else "gcs_emulator")


@contextlib.contextmanager
def running_store(kind: str) -> Iterator[ObjectStore]:
    """Start a store of ``kind`` on a free loopback port with the test bucket; stop it afterwards."""
    skip_unless_installed(kind)
    port = free_port()
    env = dict(AWS_ENV) if kind == "s3" else gcs_env(f"http://127.0.0.1:{port}")
    process = subprocess.Popen(store_command(kind, port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True, env={**os.environ, **env})
    try:
        _wait_listening(process, port, kind)
        store = ObjectStore(kind, f"127.0.0.1:{port}", env)
        if kind == "s3":
            with _environ(env):
                store.fs().mkdir(BUCKET)
        yield store
    finally:
        _stop(process)


@contextlib.contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# --------------------------------------------------------------------------------------------------------------------
# Objects a bucket writer plants (issue 37's "memory on remote reads"): verify and the copies smoke and report make
# --------------------------------------------------------------------------------------------------------------------
class CountingFilesystem:
    """The store's real fsspec filesystem, with the bytes each object gave counted: the only calls verify and the
    remote copy may make are a listing (``find``, ``info``) and ranged reads (``cat_file``); any other read
    (``open``, ``get_file``, ``cat``) fails the test."""

    _ALLOWED = frozenset({"invalidate_cache", "find", "info"})

    def __init__(self, fs: object) -> None:
        self.fs = fs
        self.fetched: dict[str, int] = {}

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: object) -> bytes:
        data = self.fs.cat_file(path, start=start, end=end, **kwargs)  # type: ignore[attr-defined]
        key = str(path).rstrip("/")
        self.fetched[key] = self.fetched.get(key, 0) + len(data)
        return bytes(data)

    def __getattr__(self, name: str) -> object:
        assert name in self._ALLOWED, f"read the bucket through {name!r}, not the listing and ranged reads"
        return getattr(self.fs, name)


#: What a bucket writer may plant: an unlisted object (anywhere, any name), a locked object grown past its locked
#: size, a locked object changed at its size, bytecode beyond ``bytecode_bytes`` or of no locked source.
PLANTS = st.lists(st.tuples(
    st.sampled_from(["unlisted", "grown", "changed", "bytecode"]),
    st.sampled_from(["alpha/1/part0.bin", "alpha/1/part1.bin", "beta/1/part2.bin", "beta/1/part0.bin"]),
    st.sampled_from(["", "x", "1/", "warmup/1/", "__pycache__/"]),
), min_size=1, max_size=4, unique_by=lambda plant: plant[1])
HUGE = 6 << 20  # bytes of each planted oversized object: many times what verify may hold


def plant_objects(store: ObjectStore, prefix: str, local: Path, plants: list[tuple[str, str, str]],
                  ) -> tuple[dict[str, str], set[str]]:
    """A small repository (tests/small_repository.py) written to ``local`` and uploaded under ``prefix``, then
    ``plants`` (:data:`PLANTS`) planted: the planted keys with what verify must say of each (never fetched), and the
    locked keys changed at their size (hashed: modified)."""
    from tests.small_repository import write_repo

    lock = write_repo(local, "v1")
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        store.put(prefix, path.relative_to(local).as_posix(), path.read_bytes())
    unread: dict[str, str] = {}  # planted key -> what verify must say
    for kind, locked, where in plants:
        folder = locked.rpartition("/")[0]
        if kind == "unlisted":
            key = f"{folder}/{where}planted{len(unread)}.bin"
            unread[key] = "unexpected: not listed in the lock file"
        elif kind == "grown":
            key = locked
            unread[key] = f"modified: {HUGE} bytes, the lock file says {lock['artifacts'][key]['size']}"
        elif kind == "bytecode":
            key = f"{folder}/__pycache__/model.{sys.implementation.cache_tag}.pyc"
            if key in unread:
                continue
            unread[key] = "unexpected: bytecode whose source"
        else:
            data = store.read(prefix, locked)
            store.put(prefix, locked, data[:-1] + bytes([data[-1] ^ 0xFF]))
            continue
        store.put(prefix, key, b"\0" * HUGE)
    return unread, {locked for kind, locked, _ in plants if kind == "changed" and locked not in unread}
