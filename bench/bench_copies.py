"""Speed-only copies against the well-kept path: ``gen-repo validate`` and ``config`` of checkouts side by side.

    python bench/bench_copies.py --checkout LABEL=DIR [--checkout LABEL=DIR ...] [--sizes 100 1000] [--repeats 7]

Each checkout is a source tree (``git archive COMMIT | tar -x -C DIR``); this one is added as ``this``. Per size N:
N valid AITune specs (bench_validate.py's synthesis) for ``gen-repo validate FILES``, and an N-model manifest
(bench_cli.py's) for ``gen-repo config MANIFEST -o NEW_DIR``, each timed in a fresh process (what a user waits
for), the checkouts alternating after one warm-up round. Prints medians with min..max, then each checkout's
difference and ratio to the first one named. bench/README.md holds the run that decided which copies stay.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_cli import machine_state, write_manifest  # noqa: E402
from bench_validate import synthesise  # noqa: E402

GEN_REPO = [sys.executable, "-c", "import sys; from generator.cli import main; sys.exit(main(prog_name='gen-repo'))"]


def timed(command: list[str], cwd: Path, checkout: Path) -> float:
    """Wall time of one process on ``checkout``'s sources; exit 0 expected."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env={**os.environ, "PYTHONPATH": str(checkout)},
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: {command[3]} exited {done.returncode}: {done.stderr.decode()[-800:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", action="append", default=[], help="LABEL=DIR, a source tree to time")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    checkouts = {label: Path(folder).resolve() for label, folder in (c.split("=", 1) for c in args.checkout)}
    checkouts.setdefault("this", REPO)
    print(f"machine before: {machine_state()}")
    with tempfile.TemporaryDirectory(prefix="bench-copies-") as tmp:
        runs = {}
        counter = iter(range(10**6))
        for size in args.sizes:
            folder = Path(tmp) / f"n{size}"
            (folder / "config").mkdir(parents=True)
            docs, _ = synthesise(size, 0.0)
            names = []
            for i, doc in enumerate(docs):
                names.append(f"s{i:05d}.graphspec.json")
                (folder / names[-1]).write_text(json.dumps(doc), encoding="utf-8")
            manifest = write_manifest(size, folder / "config")
            for label, checkout in checkouts.items():
                runs[("validate", size, label)] = (lambda f=folder, c=checkout, n=names:
                                                   timed([*GEN_REPO, "validate", *n], f, c))
                runs[("config", size, label)] = (lambda f=folder, c=checkout, m=manifest: timed(
                    [*GEN_REPO, "config", str(m), "-o", str(f / f"out{next(counter)}")], f, c))
        for run in runs.values():
            run()
        times: dict[tuple[str, int, str], list[float]] = {key: [] for key in runs}
        for _ in range(args.repeats):
            for key, run in runs.items():
                times[key].append(run())
    print(f"machine after: {machine_state()}")
    print(f"{'command':<10} {'N':>6} {'checkout':<16} {'median':>8}   min..max   (seconds, n={args.repeats})")
    first = next(iter(checkouts))
    for (command, size, label), values in times.items():
        median = statistics.median(values)
        base = statistics.median(times[(command, size, first)])
        versus = "" if label == first else f"   {median - base:+.3f} s, {median / base:.2f}x of {first}"
        print(f"{command:<10} {size:>6} {label:<16} {median:>8.3f}   {min(values):.3f}..{max(values):.3f}{versus}")


if __name__ == "__main__":
    main()
