"""The generated defaults (2 KIND_CPU instances, no preferred sizes) against the previous ones, on one zoo model.

    python bench/bench_defaults.py [--model bert_partial_ranges] [--window 2] [--windows 5] [--concurrency 8 32]
                                   [--batch 1]

Builds the zoo model for the python target (once, under ``bench/out/defaults``), then serves four copies of it from
one local tritonserver, differing only in their served settings:

- ``new``: the generated config (the current defaults: ``count: 2``, no ``preferred_batch_size``, 100 us delay);
- ``old``: the previous defaults (``count: 1``, ``preferred_batch_size`` = opt batch and max batch);
- ``c1_none``: one instance, no preferred sizes; ``c2_pref``: two instances, opt and max batch preferred.

Requests carry ``--batch`` items at the opt shape (1: the dynamic batcher forms the batches, so preferred sizes matter;
Triton serves "none" as ``[max_batch_size]``). Windows alternate between the four in one run (A B C D A B ...) so that
machine noise hits all alike; each cell is the median of ``--windows`` windows with its spread (min..max). The load
comes from ``generator.serving.loadgen`` (the load generator of ``gen-repo perf`` and ``tune``). Prints a table and
the machine's load, then the ratio lines last.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from generator.client import ModelContract  # noqa: E402
from generator.planning.config import parse_config, render_config  # noqa: E402
from generator.serving.loadgen import Measurement, Windows, measure_model  # noqa: E402

#: Variant -> (instance count, preferred sizes: "opt_max" or "none"); "new" keeps the generated config as is.
VARIANTS = {"new": None, "old": (1, "opt_max"), "c1_none": (1, "none"), "c2_pref": (2, "opt_max")}


def run_load(url: str, model: str, inputs: dict, *, concurrency: int, duration_s: float, datatypes: dict,
             batch_size: int = 1) -> Measurement:
    """One window of ``duration_s`` from the one load generator (no warmup: callers warm every variant first)."""
    return measure_model(url, model, inputs, datatypes, concurrency=concurrency, batch=batch_size,
                         windows=Windows(window_s=duration_s, warmup_s=0.0, agree=1, max_windows=1))


def zoo_repository(model: str, target: Path) -> Path:
    """Build ``model`` of tests/zoo for the python target into ``target`` (kept between runs)."""
    from generator.building.pipeline import BuildOptions, build_repository

    if (target / "gen-repo.lock.json").is_file():
        return target
    zoo = REPO / "tests" / "zoo"
    entry = next(m for m in yaml.safe_load((zoo / "gen-repo.yaml").read_text())["models"] if m["name"] == model)
    project = target.parent / "project"
    (project / "specs").mkdir(parents=True, exist_ok=True)
    shutil.copy(zoo / entry["spec"], project / entry["spec"])
    shutil.copy(zoo / "zoo_models.py", project / "zoo_models.py")
    entry = {k: v for k, v in entry.items() if k != "samples"}  # synthetic data: the samples are not needed here
    manifest = project / "gen-repo.yaml"
    manifest.write_text(yaml.safe_dump({"defaults": {"target": "python"}, "models": [entry]}), encoding="utf-8")
    sys.path.insert(0, str(project))
    report = build_repository(manifest, BuildOptions(allow_code=True, target="python",
                                                     cache_dir=REPO / "bench" / "out" / "cache"), target)
    if not report.ok:
        raise SystemExit(f"build failed: {report.to_dict()}")
    return target


def variant_repository(source: Path, model: str, target: Path) -> list[str]:
    """Copy ``model`` once per variant with its served settings edited; return the variant folder names."""
    names = []
    for label, settings in VARIANTS.items():
        name = f"{model}_{label}"
        shutil.copytree(source / model, target / name)
        config = parse_config((source / model / "config.pbtxt").read_text(encoding="utf-8"))
        config.name = name
        if settings is not None:
            count, preferred = settings
            for group in config.instance_group:
                group.count = count
            config.dynamic_batching.ClearField("preferred_batch_size")
            if preferred == "opt_max":
                contract = ModelContract.from_repository(source, model)
                opt = contract.inputs[0].opt_shape[0] if contract.inputs[0].opt_shape else config.max_batch_size
                config.dynamic_batching.preferred_batch_size.extend(sorted({opt, config.max_batch_size}))
        (target / name / "config.pbtxt").write_text(render_config(config), encoding="utf-8")
        names.append(name)
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bert_partial_ranges", help="a tests/zoo model that batches")
    parser.add_argument("--window", type=float, default=2.0, help="seconds per measurement window")
    parser.add_argument("--windows", type=int, default=5, help="windows per cell (median and spread)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--batch", type=int, default=1, help="items per request")
    args = parser.parse_args()

    from generator.serving.server import launch

    source = zoo_repository(args.model, REPO / "bench" / "out" / "defaults" / args.model)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-defaults-") as tmp:
        names = variant_repository(source, args.model, Path(tmp))
        results: dict[tuple[str, int], list[float]] = {}
        p99: dict[tuple[str, int], list[float]] = {}
        with launch(tmp, ready_timeout=300) as server:
            url = server.grpc_url
            contract = ModelContract.from_repository(source, args.model)
            inputs = contract.example_inputs("opt", batch_size=args.batch)
            datatypes = {t.name: t.datatype for t in contract.inputs}
            for name in names:  # warm every variant before measuring
                run_load(url, name, inputs, concurrency=4, duration_s=0.5, datatypes=datatypes, batch_size=args.batch)
            for level in args.concurrency:
                for _ in range(args.windows):
                    for name in names:
                        result = run_load(url, name, inputs, concurrency=level, duration_s=args.window,
                                          datatypes=datatypes, batch_size=args.batch)
                        if result.errors:
                            print(f"warning: {name} c={level}: {result.errors} errors ({result.first_error})")
                        results.setdefault((name, level), []).append(result.throughput)
                        if result.p99_ms is not None:
                            p99.setdefault((name, level), []).append(result.p99_ms)
    load_after = os.getloadavg()
    print(f"{'variant':<28} {'conc':>4} {'median infer/s':>15} {'min..max':>19} {'spread':>7} {'p99 ms':>7}")
    medians: dict[tuple[str, int], float] = {}
    for name in names:
        for level in args.concurrency:
            values = results[(name, level)]
            median = medians[(name, level)] = statistics.median(values)
            spread = (max(values) - min(values)) / median * 100 if median else 0.0
            latency = statistics.median(p99.get((name, level), [float("nan")]))
            print(f"{name:<28} {level:>4} {median:>15.1f} {min(values):>9.1f}..{max(values):<9.1f} {spread:>6.0f}% "
                  f"{latency:>7.1f}")
    print()
    print(f"windows: {args.windows} x {args.window:.1f} s per cell, variants alternating; requests of {args.batch} "
          f"item(s) at the opt shape; spread = (max-min)/median; load average before "
          f"{' '.join(f'{v:.1f}' for v in load_before)}, after {' '.join(f'{v:.1f}' for v in load_after)}")
    for level in args.concurrency:
        best = max(medians[(name, level)] for name in names)
        for label in ("new", "old"):
            name = f"{args.model}_{label}"
            print(f"ratio {args.model} concurrency {level}: {label} defaults / best variant = "
                  f"{medians[(name, level)] / best:.2f}x")


if __name__ == "__main__":
    main()
