"""``gen-repo tune``'s search against an exhaustive grid over the same space, on zoo models of different kinds.

Per model (default: ``bert`` (text), ``resnet`` (image), ``wav2vec2`` (audio), built from ``tests/zoo`` with
``--target python`` into a temporary folder, or taken from ``--repo``) and per repeat, in one run on this machine:

- **tune**: :func:`generator.tuning.run.tune_repository` (the hill climb from the generated config, ``--budget``);
- **grid**: the same call with ``strategy="grid"``: every setting of :func:`generator.tuning.space.grid` (instances
  1..4 x queue delays 0/100/500/2000/4000 us x preferred sizes none/generated), same windows, same concurrency.

Then the head-to-head (``--side-by-side``, default 2 rounds): tune's choice, the generated setting (the defaults) and
the grid's highest-scoring setting re-measured on one warm server, interleaved (tune, defaults, grid, tune, ...), so
the three figures share the machine's state; a search's own figures were taken minutes apart.

Ratios per repeat, from the head-to-head: tune's choice / the grid's best (goal >= 0.95), the defaults / the grid's
best (goal >= 0.9), each the median over the rounds; tune's search time / the grid's (goal <= 0.25; both without the
server start); and, from the searches' own figures, the same two ratios and the unsettled candidates of each search.
Prints medians and spread (min..max) over the repeats, the engine, and the load average before and after.

    python bench/bench_tune.py [--repeats 3] [--models bert resnet wav2vec2] [--repo DIR]
    python bench/bench_tune.py --quick          # one model, one repeat, short windows: proves it runs (~5 min)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
ZOO = ROOT / "tests" / "zoo"
DEFAULT_MODELS = ("bert", "resnet", "wav2vec2")


def _build(models: list[str], folder: Path) -> Path:
    """The zoo models named, built for the python target into ``folder``/model_repository."""
    from generator.building.pipeline import BuildOptions, build_repository

    zoo = yaml.safe_load((ZOO / "gen-repo.yaml").read_text())
    entries = []
    for entry in zoo["models"]:
        if entry["name"] in models:
            entry = dict(entry)
            entry["spec"] = str(ZOO / entry["spec"])
            if isinstance(entry.get("samples"), str):
                entry["samples"] = str(ZOO / entry["samples"])
            entries.append(entry)
    manifest = folder / "gen-repo.yaml"
    manifest.write_text(yaml.safe_dump({"defaults": {"target": "python"}, "models": entries}))
    options = BuildOptions(allow_code=True, target="python", cache_dir=folder / "cache", allow_outside=True,
                           code_path=(str(ZOO),))
    report = build_repository(manifest, options, folder / "model_repository")
    if not report.ok:
        raise SystemExit(f"build failed: {report.to_dict()}")
    return folder / "model_repository"


def _side_by_side(repo: Path, model: str, settings: dict[str, Any], windows: Any, concurrency: list[int],
                  rounds: int) -> dict[str, list[float]]:
    """Each named setting measured ``rounds`` times, interleaved, on one warm server: name -> throughputs."""
    from generator.serving.server import launch
    from generator.tuning.measure import Measurer
    from generator.tuning.run import _request
    from generator.tuning.space import default_concurrency, facts_from_repository

    ((facts, served),) = facts_from_repository(repo, (model,))
    assert served.config is not None
    inputs, datatypes, batch = _request(served, facts)
    figures: dict[str, list[float]] = {name: [] for name in settings}
    with launch(repo, model_control="explicit") as server, \
            Measurer(server.grpc_url, model, served.config, inputs, datatypes, batch=batch,
                     levels=concurrency or default_concurrency(facts), windows=windows) as measurer:
        for _ in range(rounds):
            for name, setting in settings.items():
                candidate = measurer.measure(setting)
                figures[name].append(candidate.score)
                print(f"  {model} side by side: {name} {setting}: {candidate.score:.1f}/s +-{candidate.noise:.1%}"
                      f"{'' if candidate.settled else ' (unsettled)'}{candidate.error or ''}", flush=True)
    return figures


def _one(repo: Path, model: str, args: argparse.Namespace) -> dict[str, Any]:
    from generator.serving.loadgen import Windows
    from generator.tuning.run import TuneRun, tune_repository

    windows = Windows(window_s=args.window, agree=args.agree, max_windows=args.max_windows, settle_s=args.settle)
    common: dict[str, Any] = {"models": (model,), "windows": windows, "concurrency": tuple(args.concurrency)}
    tune = tune_repository(TuneRun(repo, budget_s=args.budget, **common)).models[0].search
    grid = tune_repository(TuneRun(repo, budget_s=float("inf"), strategy="grid", **common)).models[0].search
    assert tune is not None and grid is not None
    grid_top = max((c for c in grid.candidates if c.error is None), key=lambda c: c.score)
    head = _side_by_side(repo, model, {"tune": tune.best.setting, "defaults": grid.baseline.setting,
                                       "grid": grid_top.setting}, windows, list(args.concurrency), args.side_by_side)
    grid_s = statistics.median(head["grid"])
    return {
        "throughput": statistics.median(head["tune"]) / grid_s,
        "defaults": statistics.median(head["defaults"]) / grid_s,
        "search_throughput": tune.best.score / grid_top.score,
        "search_defaults": grid.baseline.score / grid_top.score,
        "p99": tune.best.p99_ms / grid_top.p99_ms if grid_top.p99_ms else float("nan"),
        "time": tune.seconds / grid.seconds,
        "grid_unsettled": sum(not c.settled for c in grid.candidates if c.error is None),
        "tune_candidates": len(tune.candidates),
        "grid_candidates": len(grid.candidates),
        "tune_s": tune.seconds,
        "grid_s": grid.seconds,
        "tune_best": tune.best.setting,
        "grid_best": grid_top.setting,
        "noise": max(tune.best.noise, grid_top.noise),
        "unsettled": sum(not c.settled for c in tune.candidates if c.error is None),
        "kept": tune.kept,
    }


def _stat(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}..{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=None)
    parser.add_argument("--repo", type=Path, default=None, help="a built repository holding the models")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget", type=float, default=120.0, help="tune's budget per model (s)")
    parser.add_argument("--window", type=float, default=1.0)
    parser.add_argument("--agree", type=int, default=3)
    parser.add_argument("--max-windows", type=int, default=8)
    parser.add_argument("--settle", type=float, default=15.0, help="seconds a measurement may lengthen its windows")
    parser.add_argument("--concurrency", type=int, nargs="*", default=[])
    parser.add_argument("--side-by-side", type=int, default=2, help="interleaved rounds of the head-to-head")
    parser.add_argument("--quick", action="store_true", help="one model, one repeat, 0.5 s windows, 2 agreeing")
    args = parser.parse_args()
    if args.quick:
        args.models = args.models or ["resnet"]
        args.repeats, args.window, args.agree, args.max_windows, args.settle = 1, 0.5, 2, 4, 4.0
        args.side_by_side = 1
        args.budget = min(args.budget, 40.0)
    models = args.models or list(DEFAULT_MODELS)
    load_before = os.getloadavg()
    print(f"load average before: {', '.join(f'{v:.2f}' for v in load_before)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-tune-") as tmp:
        began = time.monotonic()
        repo = args.repo or _build(models, Path(tmp))
        print(f"repository: {repo} ({time.monotonic() - began:.0f} s)", flush=True)
        rows = {}
        for model in models:
            runs = []
            for k in range(args.repeats):
                run = _one(repo, model, args)
                runs.append(run)
                print(f"{model} #{k + 1}: side by side tune/grid {run['throughput']:.3f}, defaults/grid "
                      f"{run['defaults']:.3f}; searches' own figures tune/grid {run['search_throughput']:.3f} (p99 "
                      f"{run['p99']:.2f}x), defaults/grid {run['search_defaults']:.3f}; time {run['time']:.3f} "
                      f"({run['tune_s']:.0f} s / {run['grid_s']:.0f} s, {run['tune_candidates']} / "
                      f"{run['grid_candidates']} candidates), noise {run['noise']:.1%}, unsettled {run['unsettled']} "
                      f"of tune's and {run['grid_unsettled']} of the grid's candidates"
                      f"{' (generated setting kept)' if run['kept'] else ''}; tune best {run['tune_best']}, grid "
                      f"best {run['grid_best']}", flush=True)
            rows[model] = runs
    from generator.tuning.results import describe_hardware

    print(f"\nhardware: {describe_hardware()}; engine: the built-in loop unless perf_analyzer runs here")
    print("| model | tune/grid (side by side) | defaults/grid (side by side) | tune/grid (search) | "
          "defaults/grid (search) | tune/grid p99 | tune/grid time | unsettled tune / grid | repeats |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for model, runs in rows.items():
        print(f"| {model} | {_stat([r['throughput'] for r in runs])} | {_stat([r['defaults'] for r in runs])} | "
              f"{_stat([r['search_throughput'] for r in runs])} | {_stat([r['search_defaults'] for r in runs])} | "
              f"{_stat([r['p99'] for r in runs])} | {_stat([r['time'] for r in runs])} | "
              f"{sum(r['unsettled'] for r in runs)} / {sum(r['grid_unsettled'] for r in runs)} | {len(runs)} |")
    every = [r for runs in rows.values() for r in runs]
    print(f"\nall: tune/grid throughput {_stat([r['throughput'] for r in every])} (goal >= 0.95), time "
          f"{_stat([r['time'] for r in every])} (goal <= 0.25), defaults/grid {_stat([r['defaults'] for r in every])} "
          "(goal >= 0.9)")
    print(f"load average before: {', '.join(f'{v:.2f}' for v in load_before)}; after: "
          f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
