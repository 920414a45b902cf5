"""What serving a generated repository writes, observed on the whole file system (not a sandbox of HOME/TMPDIR).

The real tritonserver serves a copy of the example repository (python target) and passes ``gen-repo smoke``'s checks
inside a chroot whose root is an overlay of the real ``/`` (lower, read-only) and an empty tmpfs (upper); ``/dev/shm``
is a fresh tmpfs too. Every file the server or its Python-backend stubs create, change or delete anywhere lands in the
upper layer, where the test reads it: only ``<model>/<version>/__pycache__/`` bytecode may be there (docs/guarantees.md,
"Nothing is written outside the output folder and the cache folder"). Needs root (mount, chroot), as CI runs.

Third-party writes count too. Without generator/serving/server.py's launch settings, Triton 2.51's DCGM host engine
appends ``/var/log/nv-hostengine.log`` and onnxruntime (run by the python target's model.py) writes
``~/.cache/Microsoft/DeveloperTools/.onnxruntime/onnxruntime.db``: this test saw both before the launcher turned GPU
metrics off on a machine without a GPU and gave the server a private XDG_CACHE_HOME, and fails if either comes back.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.requirements import require

DRIVER = """
import sys
import tempfile
from pathlib import Path

from generator.serving.server import launch
from generator.serving.smoke import run_smoke

repo, log = Path(sys.argv[1]), Path(sys.argv[2])
# The launcher's temporary folders land here: the server's XDG_CACHE_HOME must be gone once stop() returns, not
# only at interpreter exit.
scratch = Path(tempfile.mkdtemp())
tempfile.tempdir = str(scratch)
with launch(repo, ready_timeout=120, log_file=log, disable_auto_complete_config=True) as server:
    report = run_smoke(server.grpc_url, "grpc", repo)
    assert report.exit_code == 0, [(r.model, r.check, r.status, r.message) for r in report.results]
    serving = [p.name for p in scratch.iterdir()]
    assert len(serving) == 1 and serving[0].startswith("tritonserver-cache-"), serving
assert list(scratch.iterdir()) == [], "the server's private cache folder outlived stop()"
scratch.rmdir()
print("served")
"""

OVERLAY = """set -eu
base="$1"; shift
mount -t tmpfs tmpfs "$base/layers"
mkdir "$base/layers/upper" "$base/layers/work"
mount -t overlay overlay -o "lowerdir=/,upperdir=$base/layers/upper,workdir=$base/layers/work" "$base/merged"
for d in proc sys dev; do mount --rbind "/$d" "$base/merged/$d"; done
mount -t tmpfs tmpfs "$base/merged/dev/shm"
status=0
PYTHONDONTWRITEBYTECODE=1 chroot "$base/merged" "$@" || status=$?
(cd "$base/layers/upper" && find . -mindepth 1 -printf '%y %p\\n') > "$base/upper.txt"
(cd "$base/merged/dev/shm" && find . -mindepth 1 -printf '%y %p\\n') > "$base/shm.txt"
exit $status
"""


@pytest.mark.triton
@pytest.mark.slow
def test_serving_writes_only_bytecode_into_the_repository(example_repository: Path, tmp_path: Path) -> None:
    require("root")
    require("tritonserver")
    repo = tmp_path / "served" / "model_repository"
    shutil.copytree(example_repository, repo)
    log = tmp_path / "served" / "tritonserver.log"  # the test's own log file, the one thing it writes itself
    for folder in ("layers", "merged"):
        (tmp_path / folder).mkdir()
    (tmp_path / "driver.py").write_text(DRIVER, encoding="utf-8")
    (tmp_path / "overlay.sh").write_text(OVERLAY, encoding="utf-8")
    run = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "bash", str(tmp_path / "overlay.sh"), str(tmp_path),
         sys.executable, str(tmp_path / "driver.py"), str(repo), str(log)],
        capture_output=True, text=True, check=False, timeout=400, cwd=Path(__file__).resolve().parents[2],
    )
    assert run.returncode == 0 and "served" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]

    written = []
    for line in (tmp_path / "upper.txt").read_text(encoding="utf-8").splitlines():
        kind, relative = line.split(" ", 1)
        path = Path("/") / relative.removeprefix("./")
        # Folders that exist on the real file system were copied up because something below them changed.
        if kind == "d" and path.is_dir():
            continue
        written.append((kind, path))
    bytecode = [p for kind, p in written if kind == "f" and p.parent.name == "__pycache__"
                and p.is_relative_to(repo) and p.suffix == ".pyc"]
    new_folders = [p for kind, p in written if kind == "d" and p.name == "__pycache__" and p.is_relative_to(repo)]
    elsewhere = [(kind, str(p)) for kind, p in written if p not in bytecode and p not in new_folders and p != log]
    assert elsewhere == [], f"serving wrote outside the repository's __pycache__ folders: {elsewhere}"
    # The python backend's bytecode is observed, not fabricated: one per python-target model version.
    assert sorted(p.relative_to(repo).parent.as_posix() for p in bytecode) == ["mlp/1/__pycache__",
                                                                               "text/1/__pycache__"]
    assert (tmp_path / "shm.txt").read_text(encoding="utf-8") == "", "shared memory left behind in /dev/shm"
    # And nothing reached the real file system: the repository copy is unchanged.
    assert not (repo / "mlp" / "1" / "__pycache__").exists()


def test_every_server_gen_repo_starts_goes_through_the_launcher() -> None:
    """``smoke --launch``, ``serve``, ``perf`` and ``tune`` start tritonserver through
    generator.serving.server.launch, the launcher whose settings the test above observes; no other module starts a
    process that mentions tritonserver."""
    generator = Path(__file__).resolve().parents[2] / "generator"
    texts = {p.relative_to(generator.parent).as_posix(): p.read_text(encoding="utf-8") for p in generator.rglob("*.py")}
    starters = sorted(name for name, text in texts.items()
                      if re.search(r"\bsubprocess\b|\bPopen\b|os\.exec|os\.spawn", text) and "tritonserver" in text)
    assert starters == ["generator/serving/server.py"]
    launchers = sorted(name for name, text in texts.items()
                       if re.search(r"from generator\.serving\.server import [^\n]*\blaunch\b", text))
    assert launchers == ["generator/cli/serve.py", "generator/serving/perf.py", "generator/serving/smoke_session.py",
                         "generator/tuning/run.py"]
