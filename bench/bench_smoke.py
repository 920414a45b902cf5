"""Smoke-test cost: seconds per model for the example repository against a local server (start reported apart).

    python bench/bench_smoke.py [--repo DIR] [--repeats 3]

Builds the example repository (python target, cached under bench/out/cache) unless --repo is given, starts one local
tritonserver (its start-to-ready time is reported separately), then runs ``generator.serving.smoke`` per model several
times. Skips with a message when ``generator.serving.smoke`` does not exist yet. Prints a table, then the ratio lines
last.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def example_repository(target: Path) -> Path:
    from generator.building.pipeline import BuildOptions, build_repository

    if not (target / "gen-repo.lock.json").is_file():
        options = BuildOptions(allow_code=True, target="python", cache_dir=REPO / "bench" / "out" / "cache")
        build_repository(REPO / "examples" / "gen-repo.yaml", options, target)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if importlib.util.find_spec("generator.serving.smoke") is None:
        print("generator.serving.smoke does not exist yet: smoke-test cost not measured (skipped)")
        print()
        print("ratio: n/a (no generator.serving.smoke)")
        return
    smoke = importlib.import_module("generator.serving.smoke")
    runner = getattr(smoke, "run_smoke", None)
    if runner is None:
        print("generator.serving.smoke has no run_smoke: smoke-test cost not measured (skipped)")
        print()
        print("ratio: n/a (unknown generator.serving.smoke API)")
        return
    from generator.serving.server import TritonServer

    repo = args.repo or example_repository(REPO / "bench" / "out" / "example_repository")
    models = sorted(p.name for p in repo.iterdir() if (p / "config.pbtxt").is_file())
    server = TritonServer()
    start = time.perf_counter()
    server.start(repo)
    try:
        server.wait_ready(180)
        ready = time.perf_counter() - start
        times: dict[str, list[float]] = {m: [] for m in models}
        outcome: dict[str, int] = {}
        for _ in range(args.repeats):
            for model in models:
                begin = time.perf_counter()
                report = runner(server.grpc_url, "grpc", repo_dir=repo, models=[model])
                times[model].append(time.perf_counter() - begin)
                outcome[model] = report.exit_code
    finally:
        server.stop()
    print(f"server start to ready: {ready:.2f} s")
    print(f"{'model':<16} {'median s':>9} {'min s':>7} {'max s':>7} {'exit':>5}")
    for model, values in times.items():
        print(f"{model:<16} {statistics.median(values):>9.3f} {min(values):>7.3f} {max(values):>7.3f} "
              f"{outcome[model]:>5}")
    per_model = statistics.median(v for values in times.values() for v in values)
    print()
    print(f"ratio server start / smoke per model = {ready / per_model:.1f}x ({per_model:.3f} s per model)")


if __name__ == "__main__":
    main()
