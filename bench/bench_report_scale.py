"""``gen-repo report`` on an ensemble of 10,000 steps and on a ``--perf`` document of 1,000 variants.

    python bench/bench_report_scale.py [--steps 10000] [--variants 1000] [--repeats 3]

The repository is the example's (``gen-repo config examples/gen-repo.yaml``) with an ensemble chaining its mlp model
``--steps`` times; the perf document measures mlp in ``--variants`` batch sizes at two concurrencies
(tests/report_scale.py writes both). Timed in fresh processes, process start included, alternating with the plain
example repository (the fixed cost); each row gives the median and the min..max spread.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_cli import alternate, machine_state, row  # noqa: E402
from bench_release_scale import example_repository, gen_repo  # noqa: E402

from tests.report_scale import add_chain_ensemble, write_perf_document  # noqa: E402


def _timed(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([*gen_repo(REPO), "report", *args], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--variants", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        plain = example_repository(folder)
        big = folder / "ensemble"
        subprocess.run(["cp", "-r", str(plain), str(big)], check=True)
        add_chain_ensemble(big, args.steps)
        perf = write_perf_document(folder / "perf.json", args.variants)
        page = str(folder / "page.html")
        print(f"machine before: {machine_state()}")
        times = alternate({
            "example repository (fixed cost)": lambda: _timed([str(plain), "-o", page]),
            f"ensemble of {args.steps:,} steps": lambda: _timed([str(big), "-o", page]),
            f"--perf of {args.variants:,} variants": lambda: _timed([str(plain), "-o", page, "--perf", str(perf)]),
        }, args.repeats)
        print(f"machine after: {machine_state()}")
        print(f"{'run':<44} {'median':>8} {'min..max':>17} (seconds)")
        for name, values in times.items():
            print(row(name, values))


if __name__ == "__main__":
    main()
