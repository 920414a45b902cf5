"""Served throughput of the generated config: dynamic batching (as generated) vs batching off, concurrency 1/8/32.

    python bench/bench_serving.py [--repo DIR] [--window 2] [--windows 5] [--concurrency 1 8 32]

One local tritonserver serves each example model twice: ``<model>`` with the generated config and
``<model>_nobatch``, a copy whose config has ``dynamic_batching`` removed (same max_batch_size, same instances).
Requests carry one item at the opt shape (the dynamic batcher is what forms batches). Windows alternate between the two
configs in one run (A B A B ...) so that machine noise hits both alike; each cell is the median of ``--windows``
windows with its spread (min..max). The load comes from ``generator.serving.loadgen.measure_model`` (the load generator
of ``gen-repo perf`` and ``tune``; perf_analyzer does not run here). Prints a table, then the ratio lines last.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from generator.client import ModelContract  # noqa: E402
from generator.planning.config import parse_config, render_config  # noqa: E402
from generator.serving.loadgen import Measurement, Windows, measure_model  # noqa: E402


def run_load(url: str, model: str, inputs: dict, *, concurrency: int, duration_s: float, datatypes: dict,
             batch_size: int = 1) -> Measurement:
    """One window of ``duration_s`` from the one load generator (no warmup: callers warm every variant first)."""
    return measure_model(url, model, inputs, datatypes, concurrency=concurrency, batch=batch_size,
                         windows=Windows(window_s=duration_s, warmup_s=0.0, agree=1, max_windows=1))


def example_repository(target: Path) -> Path:
    from generator.building.pipeline import BuildOptions, build_repository

    if not (target / "gen-repo.lock.json").is_file():
        options = BuildOptions(allow_code=True, target="python", cache_dir=REPO / "bench" / "out" / "cache")
        build_repository(REPO / "examples" / "gen-repo.yaml", options, target)
    return target


def paired_repository(source: Path, target: Path) -> list[str]:
    """Copy every model as is and as ``<name>_nobatch`` with dynamic_batching removed; return the model names."""
    names = sorted(p.name for p in source.iterdir() if (p / "config.pbtxt").is_file())
    for name in names:
        shutil.copytree(source / name, target / name)
        shutil.copytree(source / name, target / f"{name}_nobatch")
        config = parse_config((source / name / "config.pbtxt").read_text(encoding="utf-8"))
        config.name = f"{name}_nobatch"
        config.ClearField("dynamic_batching")
        (target / f"{name}_nobatch" / "config.pbtxt").write_text(render_config(config), encoding="utf-8")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=None, help="a built gen-repo repository (default: the example)")
    parser.add_argument("--window", type=float, default=2.0, help="seconds per measurement window")
    parser.add_argument("--windows", type=int, default=5, help="windows per cell (median and spread)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    args = parser.parse_args()

    from generator.serving.server import launch

    source = args.repo or example_repository(REPO / "bench" / "out" / "example_repository")
    with tempfile.TemporaryDirectory(prefix="bench-serving-") as tmp:
        names = paired_repository(source, Path(tmp))
        results: dict[tuple[str, str, int], list[float]] = {}
        with launch(tmp, ready_timeout=180) as server:
            url = server.grpc_url
            for name in names:
                contract = ModelContract.from_repository(source, name)
                inputs = contract.example_inputs("opt", batch_size=1 if contract.batching else None)
                datatypes = {t.name: t.datatype for t in contract.inputs}
                for variant in (name, f"{name}_nobatch"):  # warm both before measuring
                    run_load(url, variant, inputs, concurrency=4, duration_s=0.5, datatypes=datatypes)
                for level in args.concurrency:
                    for _ in range(args.windows):
                        for label, model in (("dynamic", name), ("off", f"{name}_nobatch")):
                            result = run_load(url, model, inputs, concurrency=level, duration_s=args.window,
                                              datatypes=datatypes)
                            if result.errors:
                                print(f"warning: {model} c={level}: {result.errors} errors ({result.first_error})")
                            results.setdefault((name, label, level), []).append(result.throughput)
    print(f"{'model':<8} {'conc':>4} {'batching':<8} {'median infer/s':>15} {'min..max':>17} {'spread':>7}")
    ratios = []
    for name in names:
        for level in args.concurrency:
            medians = {}
            for label in ("dynamic", "off"):
                values = results[(name, label, level)]
                median = statistics.median(values)
                medians[label] = median
                spread = (max(values) - min(values)) / median * 100 if median else 0.0
                print(f"{name:<8} {level:>4} {label:<8} {median:>15.1f} {min(values):>8.1f}..{max(values):<8.1f} "
                      f"{spread:>6.0f}%")
            ratios.append((name, level, medians["dynamic"] / medians["off"] if medians["off"] else float("nan")))
    print()
    print(f"windows: {args.windows} x {args.window:.1f} s per cell, alternating dynamic/off; spread = (max-min)/median")
    for name, level, ratio in ratios:
        print(f"ratio {name} concurrency {level}: dynamic batching / off = {ratio:.2f}x")


if __name__ == "__main__":
    main()
