"""Distributed builds on a real local Ray cluster (issue 8).

The cluster (a head and one worker node, both ``ray start`` processes) runs inside a network namespace this test
creates (``unshare --user --map-root-user --net``): its only interface is loopback, so no Ray traffic can reach
another address, whatever Ray decides to bind (outside a namespace Ray 2.60 binds the machine's own address even with
``--node-ip-address=127.0.0.1``). The build driver runs in that namespace too. Every process of the namespace is one
this test started; they are found by their network namespace and killed by pid at the end.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from generator.building.distributed import (
    TaskDemand,
    _feasible,
    _loopback_host,
    cc_resource,
    engine_demand,
    export_demand,
)
from tests.loopback_namespace import LoopbackNamespace
from tests.requirements import require

REPO_ROOT = Path(__file__).resolve().parents[2]
MANIFEST = REPO_ROOT / "examples" / "gen-repo.yaml"
#: Outside 10002-19999 (Ray's default worker port range); the namespace is private, so it is free.
HEAD_PORT = 26379
WORKER_NODE_MANAGER_PORT = 26500
LOOPBACK_PREFIXES = ("127.", "[::ffff:127.", "[::1]")


# --------------------------------------------------------------------------------------------------------------------
# Unit level: what a task asks for, where it can run
# --------------------------------------------------------------------------------------------------------------------
def test_demands() -> None:
    assert export_demand().as_dict() == {"CPU": 1.0}
    assert engine_demand("tensorrt", "9.0").as_options() == {"num_cpus": 1.0, "num_gpus": 1.0,
                                                              "resources": {"cc_9.0": 1.0}}
    assert engine_demand("tensorrt", None).as_dict() == {"CPU": 1.0, "GPU": 1.0}
    assert engine_demand("tensorrt_rtx", None).as_dict() == {"CPU": 1.0}  # TensorRT-RTX builds on a CPU
    assert cc_resource("8.9") == "cc_8.9"


def test_feasible_needs_one_node_with_everything() -> None:
    demand = TaskDemand(1.0, 1.0, (("cc_9.0", 1.0),))
    assert not _feasible(demand, [{"CPU": 4.0, "GPU": 1.0}, {"CPU": 1.0, "cc_9.0": 1.0}])
    assert _feasible(demand, [{"CPU": 4.0}, {"CPU": 1.0, "GPU": 2.0, "cc_9.0": 2.0}])
    assert not _feasible(export_demand(), [])


def test_loopback_host() -> None:
    assert _loopback_host("127.0.0.1:26379") == "127.0.0.1"
    assert _loopback_host("ray://127.0.0.1:10001") == "127.0.0.1"
    assert _loopback_host("auto") is None
    assert _loopback_host("10.0.0.5:6379") is None


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(entry))
    return out


def _ancestors(pid: int) -> list[int]:
    out = []
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        out.append(pid)
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _tree_hashes(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[tuple[LoopbackNamespace, str]]:
    require("ray")
    require("user_namespaces")
    namespace = LoopbackNamespace()
    temp_dir = tempfile.mkdtemp(prefix="gr-ray-")  # short: Ray's socket paths must stay under 107 bytes
    address = f"127.0.0.1:{HEAD_PORT}"
    try:
        head = namespace.run([
            "ray", "start", "--head", "--node-ip-address=127.0.0.1", f"--port={HEAD_PORT}",
            "--include-dashboard=false", "--num-cpus=1", "--num-gpus=0", f"--temp-dir={temp_dir}",
            "--disable-usage-stats",
        ])
        assert head.returncode == 0, head.stdout + head.stderr
        # The worker node stands in for a GPU node of compute capability 9.0 (its "GPU" is declared, not real).
        worker = namespace.run([
            "ray", "start", f"--address={address}", "--node-ip-address=127.0.0.1", "--num-cpus=1",
            "--num-gpus=1", '--resources={"cc_9.0": 1}', f"--node-manager-port={WORKER_NODE_MANAGER_PORT}",
            "--disable-usage-stats",
        ])
        assert worker.returncode == 0, worker.stdout + worker.stderr
        yield namespace, address
    finally:
        namespace.close()
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def local_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The example built locally (no --ray), in a fresh process that reports whether Ray got imported."""
    base = tmp_path_factory.mktemp("local")
    script = (
        "import json, sys\n"
        "from generator.building.pipeline import BuildOptions, build_repository\n"
        "report = build_repository(sys.argv[1], BuildOptions(allow_code=True, target='python', cache_dir=sys.argv[3]),"
        " sys.argv[2])\n"
        "print(json.dumps({'ok': report.ok, 'ray': sorted(m for m in sys.modules if m.split('.')[0] == 'ray')}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(MANIFEST), str(base / "repo"), str(base / "cache")],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ok"]
    return base / "repo", {"ray_modules": ",".join(result["ray"])}


def _ray_build_command(output: Path, cache: Path, address: str) -> list[str]:
    return ["gen-repo", "build", str(MANIFEST), "--target", "python", "--allow-code", "-o", str(output),
            "--cache-dir", str(cache), "--ray", address, "--json"]


# --------------------------------------------------------------------------------------------------------------------
# The cluster tests
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_local_build_never_imports_ray(local_build: tuple[Path, dict[str, str]]) -> None:
    assert local_build[1]["ray_modules"] == ""


@pytest.mark.slow
def test_ray_build_is_byte_identical_to_local(
    ray_cluster: tuple[LoopbackNamespace, str], local_build: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    namespace, address = ray_cluster
    done = namespace.run(_ray_build_command(tmp_path / "repo", tmp_path / "cache", address), timeout=400)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert [m["status"] for m in report["models"]] == ["built", "built"]
    assert all(any("on the Ray cluster" in n or "exported on" in n for n in m["notes"]) for m in report["models"])
    local = _tree_hashes(local_build[0])
    assert "gen-repo.lock.json" in local and len(local) > 5
    assert _tree_hashes(tmp_path / "repo") == local

    # A second run finds everything in the cache and sends nothing to the cluster.
    again = namespace.run(_ray_build_command(tmp_path / "repo", tmp_path / "cache", address), timeout=200)
    assert again.returncode == 0, again.stderr[-3000:]
    assert [m["status"] for m in json.loads(again.stdout)["models"]] == ["cached", "cached"]


@pytest.mark.slow
def test_ray_listens_on_loopback_only(ray_cluster: tuple[LoopbackNamespace, str]) -> None:
    namespace, _ = ray_cluster
    addresses = namespace.run(["ip", "-o", "addr"]).stdout
    assert {line.split()[1] for line in addresses.splitlines()} == {"lo"}
    listening = namespace.run(["ss", "-Htln"]).stdout.splitlines()
    local = [line.split()[3] for line in listening]
    assert f"[::ffff:127.0.0.1]:{HEAD_PORT}" in local or f"127.0.0.1:{HEAD_PORT}" in local, local
    assert local and all(a.startswith(LOOPBACK_PREFIXES) for a in local), local
    # And nothing of ours has a TCP socket in the machine's own network namespace.
    host = subprocess.run(["ss", "-Htanp"], capture_output=True, text=True).stdout
    ours = namespace.pids()
    assert ours
    assert not [line for line in host.splitlines() if any(f"pid={pid}," in line for pid in ours)]


@pytest.mark.slow
def test_killed_worker_mid_build_is_retried_or_reported(
    ray_cluster: tuple[LoopbackNamespace, str], local_build: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    namespace, address = ray_cluster
    raylets = [p for p in namespace.pids() if f"--node_manager_port={WORKER_NODE_MANAGER_PORT}" in _cmdline(p)]
    assert len(raylets) == 1, [_cmdline(p)[:200] for p in namespace.pids()]
    raylet = raylets[0]
    build = namespace.popen(_ray_build_command(tmp_path / "repo", tmp_path / "cache", address))
    try:
        deadline = time.monotonic() + 240
        busy: list[int] = []
        seen: set[str] = set()
        while not busy and time.monotonic() < deadline and build.poll() is None:
            titles = {p: _cmdline(p) for p in namespace.pids()}
            seen.update(t[:80] for t in titles.values())
            busy = [p for p, t in titles.items() if t.startswith("ray::gen-repo export") and raylet in _ancestors(p)]
            time.sleep(0.2)
        assert busy, f"no export task ever ran on the worker node; saw {sorted(seen)}"
        # SIGKILL the worker node: its raylet and everything under it, mid-export.
        victims, frontier = [raylet], [raylet]
        while frontier:
            frontier = [c for p in frontier for c in _children(p)]
            victims += frontier
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        stdout, stderr = build.communicate(timeout=400)
    finally:
        if build.poll() is None:
            build.kill()
            build.wait()
    assert stdout.strip().startswith("{"), stderr[-3000:]
    report = json.loads(stdout)
    statuses = {m["name"]: m["status"] for m in report["models"]}
    if build.returncode == 0:
        assert set(statuses.values()) == {"built"}
        assert _tree_hashes(tmp_path / "repo") == _tree_hashes(local_build[0])
    else:  # reported per model, with the reason
        failed = [m for m in report["models"] if m["status"] == "failed"]
        assert failed, report
        assert all("Ray cluster" in p["message"] for m in failed for p in m["problems"]), failed
        assert not (tmp_path / "repo").exists()
