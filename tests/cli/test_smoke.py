"""``gen-repo smoke`` and ``gen-repo serve`` through the real command line (subprocesses, real tritonserver)."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator.cli import main
from generator.serving.server import free_port
from generator.serving.smoke_results import CHECKS

GEN_REPO = str(Path(sys.executable).parent / "gen-repo")


def _listening(url: str) -> bool:
    host, port = url.rsplit(":", 1)
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex((host, int(port))) == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give --url HOST:PORT of a running server, or --launch"),
        (["--url", "127.0.0.1:1", "--launch", "--repo", "."], "not both"),
        (["--launch"], "--launch needs --repo DIR"),
        (["--url", "127.0.0.1:1", "--burst", "0"], "Invalid value for '--burst': 0"),
        (["--url", "127.0.0.1:1", "--repo", "/nonexistent/repo"], "not a directory"),
        (["--url", "127.0.0.1:1", "--protocol", "udp"], "Invalid value for '--protocol'"),
    ],
)
def test_bad_usage_exits_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["smoke", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output


@pytest.mark.timeout(60)
def test_unreachable_server_exits_3_with_reports(tmp_path: Path) -> None:
    url = f"127.0.0.1:{free_port()}"
    out = tmp_path / "out"
    out.mkdir()  # an output's folder must exist (a missing one is refused before the work: tests/cli/test_sinks.py)
    result = subprocess.run(
        [GEN_REPO, "smoke", "--url", url, "--model", "mlp", "--timeout", "5", "--json", str(out / "smoke.json"),
         "--junit-xml", str(out / "smoke.xml")],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 3, result.stdout + result.stderr
    assert "ERROR mlp ready" in result.stdout and "server unreachable" in result.stdout
    document = json.loads((out / "smoke.json").read_text())
    assert document["reachable"] is False and document["exit_code"] == 3
    from junitparser import Error, JUnitXml

    cases = [case for suite in JUnitXml.fromfile(str(out / "smoke.xml")) for case in suite]
    assert [(c.classname, c.name, [type(r) for r in c.result]) for c in cases] == [("mlp", "ready", [Error])]


@pytest.mark.timeout(60)
def test_junit_xml_carries_model_folders_named_with_control_characters(tmp_path: Path) -> None:
    """Folder names XML cannot carry (control characters, bytes that are not UTF-8) used to give invalid XML or a
    UnicodeEncodeError traceback; now each such character is written as its escape and the report parses."""
    from junitparser import JUnitXml

    repo = tmp_path / "repo"
    good = Path(__file__).parents[1] / "lint_corpus" / "good" / "mlp_python"
    names = ["ml\x01p\x1b[31m", "tab\tand\x7fdel"]
    for name in names:
        shutil.copytree(good, repo / name)
    shutil.copytree(good, os.fsdecode(os.fsencode(str(repo)) + b"/not\xffutf8"))
    xml_path = tmp_path / "smoke.xml"
    result = subprocess.run([GEN_REPO, "smoke", "--url", f"127.0.0.1:{free_port()}", "--repo", str(repo), "--timeout",
                             "5", "--junit-xml", str(xml_path)], capture_output=True, text=True, errors="replace",
                            timeout=60)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    from generator.terminal_text import CONTROL_CHARACTERS

    assert CONTROL_CHARACTERS.search(result.stdout + result.stderr) is None  # the printer shows them as escapes
    assert "ml\\x01p\\x1b[31m" in result.stdout
    root = ET.parse(xml_path).getroot()  # well-formed: the parser refuses raw control characters
    suites = sorted(suite.get("name") for suite in root.iter("testsuite"))
    assert suites == ["ml\\x01p\\x1b[31m", "not\\udcffutf8", "tab\tand\x7fdel"]
    assert sorted(suite.name for suite in JUnitXml.fromfile(str(xml_path))) == suites


@pytest.mark.triton
@pytest.mark.timeout(300)
def test_launch_end_to_end(example_repository: Path, tmp_path: Path) -> None:
    """Build output -> ``gen-repo smoke --launch`` -> exit 0, reports written, the server stopped afterwards."""
    result = subprocess.run(
        [GEN_REPO, "smoke", "--launch", "--repo", str(example_repository), "--protocol", "http", "--perf",
         "--json", str(tmp_path / "smoke.json"), "--junit-xml", str(tmp_path / "smoke.xml")],
        capture_output=True, text=True, timeout=280,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "launched tritonserver" in result.stderr
    for model in ("mlp", "text"):
        for check in CHECKS:
            assert f"PASS  {model} {check} (" in result.stdout
    assert f"smoke: {2 * len(CHECKS)} passed, 0 failed, 0 error, 0 skipped (http 127.0.0.1:" in result.stdout
    document = json.loads((tmp_path / "smoke.json").read_text())
    assert document["exit_code"] == 0 and document["protocol"] == "http"
    assert {r["status"] for r in document["results"]} == {"passed"}
    assert all("perf" in r["details"] for r in document["results"] if r["check"] == "burst")
    from junitparser import JUnitXml

    xml = JUnitXml.fromfile(str(tmp_path / "smoke.xml"))
    assert sorted(suite.name for suite in xml) == ["mlp", "text"]
    assert all(case.is_passed for suite in xml for case in suite)
    assert not _listening(document["server_url"]), "the launched server is still running"


@pytest.mark.triton
@pytest.mark.timeout(300)
def test_launch_reports_a_model_that_does_not_load(example_repository: Path, tmp_path: Path) -> None:
    """--launch uses explicit model control, so one broken model is a per-model failure (exit 1), not exit 3."""
    import shutil

    repo = tmp_path / "repo"
    shutil.copytree(example_repository / "mlp", repo / "mlp")
    (repo / "mlp" / "1" / "model.py").write_text("raise ImportError('model.py broken on purpose')\n")
    result = subprocess.run(
        [GEN_REPO, "smoke", "--launch", "--repo", str(repo), "--json", str(tmp_path / "smoke.json")],
        capture_output=True, text=True, timeout=280,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    document = json.loads((tmp_path / "smoke.json").read_text())
    ready = next(r for r in document["results"] if r["check"] == "ready")
    assert ready["status"] == "failed" and "broken on purpose" in ready["message"]


@pytest.mark.triton
@pytest.mark.timeout(180)
def test_serve_until_ctrl_c(example_repository: Path) -> None:
    import tritonclient.grpc as grpcclient

    process = subprocess.Popen(
        [GEN_REPO, "serve", "--repo", str(example_repository)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
    try:
        seen = []
        while not seen or "Ctrl-C to stop" not in seen[-1]:
            seen.append(lines.get(timeout=150))
        grpc_url = next(line.split()[-1] for line in seen if line.strip().startswith("gRPC"))
        client = grpcclient.InferenceServerClient(grpc_url)
        assert client.is_server_ready(client_timeout=10) and client.is_model_ready("mlp", client_timeout=10)
        client.close()
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
        assert not _listening(grpc_url)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.triton
@pytest.mark.timeout(300)
def test_launch_stops_the_server_on_ctrl_c(example_repository: Path) -> None:
    """Ctrl-C during the burst: exit 130 and the launched server is gone (ports closed)."""
    process = subprocess.Popen(
        [GEN_REPO, "smoke", "--launch", "--repo", str(example_repository), "--model", "mlp",
         "--burst", "1000000", "--concurrency", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines: queue.Queue[tuple[str, str]] = queue.Queue()
    for name, stream in (("out", process.stdout), ("err", process.stderr)):
        threading.Thread(target=lambda n=name, s=stream: [lines.put((n, line)) for line in s], daemon=True).start()
    try:
        url = None
        while True:
            name, line = lines.get(timeout=150)
            if "launched tritonserver" in line:
                url = line.split(" at ")[-1].split()[0]
            if line.startswith("PASS  mlp reject_shape"):
                break  # the burst (a million requests) is next
        assert url is not None and _listening(url)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 130
        assert not _listening(url), "the launched server survived Ctrl-C"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
