"""A private network namespace whose only way out is loopback, for tests of servers that must stay on 127.0.0.1.

``LoopbackNamespace()`` creates a user+network namespace (``unshare --user --map-root-user --net``) held by a
``sleep`` process; commands enter it with ``nsenter``. Every process in it was started by the test and is killed by
pid at the end.

With ``tripwire=True`` the namespace also has one other interface, a veth pair end with an address and the default
route (IPv6 off, so the kernel itself sends nothing on it). Whatever tries to reach any address off loopback (a DNS
query, a metadata-server probe, a TCP connection) sends packets through it, and :meth:`packets_off_loopback`
counts them: zero proves that nothing even tried. Without it, such an attempt would fail silently (no route).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
#: The tripwire interface and its (never reachable) network.
TRIPWIRE = "gr-trip0"
_TRIPWIRE_PEER = "gr-trip1"
_TRIPWIRE_ADDRESS = "10.77.0.1/24"


def _net_ns(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


class LoopbackNamespace:
    """A user+network namespace held by a ``sleep`` process; commands enter it with ``nsenter``."""

    def __init__(self, *, tripwire: bool = False) -> None:
        self.holder = subprocess.Popen(
            ["unshare", "--user", "--map-root-user", "--net", "sleep", "100000"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        )
        deadline = time.monotonic() + 10
        while _net_ns(self.holder.pid) in (None, _net_ns("self")) and time.monotonic() < deadline:
            if self.holder.poll() is not None:
                break
            time.sleep(0.05)
        if self.holder.poll() is not None or _net_ns(self.holder.pid) == _net_ns("self"):
            error = self.holder.stderr.read().decode() if self.holder.stderr else ""
            self.close()
            pytest.skip(f"cannot create a loopback-only network namespace (unshare --user --net): {error.strip()}")
        self.inode = _net_ns(self.holder.pid)
        self.run(["ip", "link", "set", "lo", "up"], check=True)
        if tripwire:
            self._lay_tripwire()

    def _lay_tripwire(self) -> None:
        steps = [
            ["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"],
            ["ip", "link", "add", TRIPWIRE, "type", "veth", "peer", "name", _TRIPWIRE_PEER],
            ["ip", "addr", "add", _TRIPWIRE_ADDRESS, "dev", TRIPWIRE],
            ["ip", "link", "set", TRIPWIRE, "up"],
            ["ip", "link", "set", _TRIPWIRE_PEER, "up"],
            ["ip", "route", "add", "default", "dev", TRIPWIRE],
        ]
        for step in steps:
            done = self.run(step)
            if done.returncode != 0:
                self.close()
                pytest.skip(f"cannot lay the tripwire interface ({' '.join(step)}): {done.stderr.strip()}")

    def packets_off_loopback(self) -> int:
        """Packets sent through the tripwire interface so far (anything that tried to leave loopback)."""
        for line in Path(f"/proc/{self.holder.pid}/net/dev").read_text().splitlines():
            name, _, counters = line.partition(":")
            if name.strip() == TRIPWIRE:
                return int(counters.split()[9])  # transmit packets
        raise AssertionError(f"no {TRIPWIRE} interface in the namespace")

    def prefix(self) -> list[str]:
        return ["nsenter", "-t", str(self.holder.pid), "-U", "-n", "--"]

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
        env["RAY_USAGE_STATS_ENABLED"] = "0"  # never report usage to anyone
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def run(self, command: list[str], timeout: float = 120, **kwargs: object) -> subprocess.CompletedProcess[str]:
        env = kwargs.pop("env", None) or self.env()
        return subprocess.run(self.prefix() + command, env=env, cwd=REPO_ROOT, text=True,  # type: ignore[call-overload]
                              capture_output=True, timeout=timeout, **kwargs)

    def popen(self, command: list[str], **kwargs: object) -> subprocess.Popen[str]:
        env = kwargs.pop("env", None) or self.env()
        stdout = kwargs.pop("stdout", subprocess.PIPE)
        stderr = kwargs.pop("stderr", subprocess.PIPE)
        return subprocess.Popen(self.prefix() + command, env=env, cwd=REPO_ROOT, text=True,  # type: ignore[call-overload]
                                stdout=stdout, stderr=stderr, **kwargs)

    def pids(self) -> list[int]:
        """Every process in this namespace (all of them started by this test)."""
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != self.holder.pid and _net_ns(entry) == self.inode:
                found.append(int(entry))
        return found

    def close(self) -> None:
        if getattr(self, "inode", None):
            for _ in range(50):
                pids = self.pids()
                if not pids:
                    break
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            self.holder.kill()
        self.holder.wait(timeout=10)
