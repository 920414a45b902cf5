"""The CLI as a release pipeline calls it, process start included: ``gen-repo validate`` on thousands of specs and
``gen-repo config`` on a large manifest, each against its reference.

    python bench/bench_cli.py [--specs 3000] [--models 1000] [--repeats 5] [--only validate|config]

validate: ``--specs`` AITune GraphSpec files (synthesised from tests/data/aitune as bench_validate.py does, names
varied, all valid), written to a temporary folder; timed in fresh processes, alternating:
- ``gen-repo validate FILES`` (one line per file) and ``gen-repo validate --json FILES``;
- jsonschema alone on the same files: a process that reads and parses each file and lists every error of the
  GraphSpec schema with ``jsonschema``'s Draft 2020-12 validator (what gen-repo's schema check reports with).
Goal (issue 43, loosened from issue 15's 5x): at least 3x faster than jsonschema alone.

config: a ``--models`` manifest (YAML, one spec file per model: synthetic graphs from bench_config_gen.py, targets
onnx and python alternating, a dynamic_batching option on each) timed as ``gen-repo config MANIFEST -o DIR`` in a
fresh process, against the floor: the same config.pbtxt messages (parsed from gen-repo's output off the clock)
printed with protobuf's ``text_format`` and written with ``os.mkdir`` + ``write``, in this process.
Goal (issue 43, replacing issue 15's 3x the floor): gen-repo config at most 4x the same files written bare.

Every timing is repeated; the table shows the median and the min..max spread; the ratio lines come last.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_config_gen import synthetic_graph  # noqa: E402
from bench_validate import synthesise  # noqa: E402

#: What the ``gen-repo`` console script runs (``python -m`` would add runpy's start-up), on this checkout.
GEN_REPO = [sys.executable, "-c", "import sys; from generator.cli import main; sys.exit(main(prog_name='gen-repo'))"]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}

#: jsonschema alone, in its own process: read, parse, every error of the GraphSpec schema.
JSONSCHEMA_ALONE = """
import json, sys
from generator.specs.json_schema import schema_validator  # jsonschema's Draft202012Validator with schemas/ registered
validator = schema_validator("graphspec.schema.json")
errors = 0
for path in sys.argv[1:]:
    with open(path, "rb") as handle:
        errors += sum(1 for _ in validator.iter_errors(json.loads(handle.read())))
print(errors)
"""


def machine_state() -> str:
    """How busy the machine is (load average, CPU and I/O pressure over the last minute): "quiet" is checkable."""
    parts = []
    try:
        parts.append("load " + Path("/proc/loadavg").read_text(encoding="utf-8").split()[0])
        for kind in ("cpu", "io"):
            some = Path(f"/proc/pressure/{kind}").read_text(encoding="utf-8").splitlines()[0]
            parts.append(f"{kind} pressure {dict(f.split('=') for f in some.split()[1:])['avg60']}%")
    except (OSError, KeyError, IndexError):  # not Linux, or no pressure stall information
        pass
    return ", ".join(parts) or "unknown"


def run(command: list[str], cwd: Path) -> float:
    """Wall time of one process, start to exit; it must exit 0."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])} ... exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return seconds


def alternate(runs: dict[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """Each run once to warm the disk cache, then ``repeats`` rounds, alternating so drifts hit every run alike."""
    for fn in runs.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, fn in runs.items():
            times[name].append(fn())
    return times


def row(name: str, values: list[float]) -> str:
    return f"{name:<44} {statistics.median(values):>8.3f} {min(values):>8.3f}..{max(values):<8.3f} (n={len(values)})"


def bench_validate(count: int, repeats: int, folder: Path) -> None:
    docs, _ = synthesise(count, 0.0)
    names = []
    for i, doc in enumerate(docs):
        name = f"s{i:05d}.graphspec.json"
        (folder / name).write_text(json.dumps(doc), encoding="utf-8")
        names.append(name)
    times = alternate({
        "gen-repo validate (one line per file)": lambda: run([*GEN_REPO, "validate", *names], folder),
        "gen-repo validate --json": lambda: run([*GEN_REPO, "validate", "--json", *names], folder),
        "jsonschema alone (schema errors only)": lambda: run([sys.executable, "-c", JSONSCHEMA_ALONE, *names],
                                                             folder),
    }, repeats)
    print(f"validate: {count} valid AITune specs, fresh process per run (seconds: median, min..max)")
    for name, values in times.items():
        print(row(name, values))
    reference = statistics.median(times["jsonschema alone (schema errors only)"])
    for name in ("gen-repo validate (one line per file)", "gen-repo validate --json"):
        ours = statistics.median(times[name])
        print(f"ratio {name}: jsonschema alone / gen-repo = {reference / ours:.1f}x (goal >= 3x: "
              f"{'met' if reference / ours >= 3 else 'NOT met'}); {ours:.2f} s")


def write_manifest(count: int, folder: Path) -> Path:
    rng = random.Random(0)
    specs = folder / "specs"
    specs.mkdir()
    lines = ["output: model_repository", "models:"]
    for i in range(count):
        (specs / f"g{i:05d}.graphspec.json").write_text(json.dumps({"graph": synthetic_graph(i, rng)}),
                                                        encoding="utf-8")
        lines += [f"  - name: model_{i:05d}", f"    spec: specs/g{i:05d}.graphspec.json",
                  f"    target: {('onnx', 'python')[i % 2]}",
                  "    dynamic_batching: {max_queue_delay_microseconds: 100}"]
    manifest = folder / "gen-repo.yaml"
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return manifest


def floor_run(messages: list[tuple[str, object]], out: Path) -> float:
    """The floor: protobuf's text_format and bare mkdir + write, in process, for the same config messages."""
    from google.protobuf import text_format

    start = time.perf_counter()
    out.mkdir()
    for name, message in messages:
        text = text_format.MessageToString(message)
        os.mkdir(out / name)
        with open(out / name / "config.pbtxt", "w", encoding="utf-8") as handle:
            handle.write(text)
    return time.perf_counter() - start


def same_files_run(files: list[tuple[str, bytes]], out: Path) -> float:
    """Bare mkdir + write of exactly the files gen-repo config writes (texts ready): the I/O any generator pays."""
    start = time.perf_counter()
    out.mkdir()
    made: set[Path] = set()
    for relative, data in files:
        path = out / relative
        for parent in reversed(path.relative_to(out).parents[:-1]):
            if out / parent not in made:
                os.mkdir(out / parent)
                made.add(out / parent)
        with open(path, "wb") as handle:
            handle.write(data)
    return time.perf_counter() - start


def bench_config(count: int, repeats: int, folder: Path) -> None:
    from google.protobuf import text_format

    from generator.triton.proto import model_config_pb2

    manifest = write_manifest(count, folder)
    counter = iter(range(10**6))

    def ours() -> float:
        # A new folder for every run of every row, deleted only after the last: on ext4, creating files right after
        # many deletions is several times slower (bench/README.md, bench_config_gen.py), which would favour no one.
        out = folder / f"out{next(counter)}"
        return run([*GEN_REPO, "config", str(manifest), "-o", str(out)], folder)

    ours()
    first = folder / "out0"
    messages = []
    for model in sorted(p.name for p in first.iterdir() if p.is_dir()):  # not the output marker file
        message = model_config_pb2.ModelConfig()
        text_format.Parse((first / model / "config.pbtxt").read_text(encoding="utf-8"), message)
        messages.append((model, message))
    written = sorted((p.relative_to(first).as_posix(), p.read_bytes()) for p in first.rglob("*") if p.is_file())
    from generator.manifest.loading import read_manifest
    from generator.planning.model_files import config_files
    from generator.planning.options import BuildOptions
    from generator.planning.targets import plan_build
    from generator.repository.files import write_files

    one_model = folder / "one-model.yaml"
    one_model.write_text("\n".join(manifest.read_text(encoding="utf-8").splitlines()[:6]) + "\n", encoding="utf-8")

    def phase(which: str) -> float:
        """One phase of gen-repo config in this process (imports done): where the process's time goes."""
        start = time.perf_counter()
        document = read_manifest(manifest)
        read = time.perf_counter()
        if which == "read":
            return read - start
        files = config_files(plan_build(document, BuildOptions(), warmup_data=False)[0])
        if which == "write":
            out = folder / f"phase{next(counter)}"
            out.mkdir()
            write_files(out, files)
        return time.perf_counter() - read

    times = alternate({
        "gen-repo config (process, YAML manifest)": ours,
        "floor: text_format + mkdir + write": lambda: floor_run(messages, folder / f"floor{next(counter)}"),
        "same files as gen-repo: mkdir + write only": lambda: same_files_run(written, folder / f"same{next(counter)}"),
        "  process start + imports (1-model manifest)": lambda: run(
            [*GEN_REPO, "config", str(one_model), "-o", str(folder / f"one{next(counter)}")], folder),
        "  in process: read the manifest (YAML)": lambda: phase("read"),
        "  in process: plan + render + write": lambda: phase("write"),
        "  in process: plan + render": lambda: phase("render"),
    }, repeats)
    print(f"config: {count}-model manifest (seconds: median, min..max)")
    for name, values in times.items():
        print(row(name, values))
    ours_median = statistics.median(times["gen-repo config (process, YAML manifest)"])
    floor = ours_median / statistics.median(times["floor: text_format + mkdir + write"])
    bare = ours_median / statistics.median(times["same files as gen-repo: mkdir + write only"])
    print(f"gen-repo config writes {len(written)} files in {count * 3} folders; the floor {count} files in {count}")
    print(f"ratio gen-repo config / floor = {floor:.2f}x; / the same files written bare = {bare:.2f}x (goal <= 4x: "
          f"{'met' if bare <= 4 else 'NOT met'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--specs", type=int, default=3000)
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", choices=["validate", "config"])
    args = parser.parse_args()
    print(f"machine before: {machine_state()}")
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        if args.only in (None, "validate"):
            (Path(tmp) / "validate").mkdir()
            bench_validate(args.specs, args.repeats, Path(tmp) / "validate")
        if args.only in (None, "config"):
            (Path(tmp) / "config").mkdir()
            bench_config(args.models, args.repeats, Path(tmp) / "config")
    print(f"machine after: {machine_state()} (pressure: share of the last minute some task waited for CPU or I/O)")


if __name__ == "__main__":
    main()
