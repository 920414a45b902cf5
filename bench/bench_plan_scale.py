"""``gen-repo plan`` of one ensemble with 1,000, 3,000 and 10,000 steps: the time, and how it grows with the steps.

    python bench/bench_plan_scale.py [--sizes 1000 3000 10000] [--repeats 5] [--models 10]
                                     [--shape chain|reversed|wide] [--profile N]

The manifest is synthesised (:func:`write_project`): the example's ``mlp`` GraphSpec made square (its output the
shape of its input, ``[batch, 16]`` FP32), copied into ``--models`` manifest models (``m0`` ...), and one ensemble of
N steps over them in turn, written as block YAML. ``--shape`` picks the wiring: ``chain`` (step i reads ``t<i>`` and
writes ``t<i+1>``: N+1 ensemble tensors, N-1 edges), ``reversed`` (the chain listed backwards: each pass over the
steps in index order can run one) or ``wide`` (independent steps: N ensemble inputs and N outputs).

What ``plan_build`` runs is timed in this process in its two parts, after one warm-up run: loading the manifest
(``load_manifest``: the YAML, the schema, the GraphSpecs) and planning it (``plan_repository``: every model, the
ensemble's wiring, order and ModelConfig), wall time for both and CPU time for the plan (less shaken by other
processes). The console script's start is not included (``bench/bench_cli.py`` times it). The last lines give the
plan's CPU time per 1,000 steps (constant when the cost is linear) and the multiple of the smallest size's (linear:
3.0x from 1,000 to 3,000 steps, 10.0x from 1,000 to 10,000). ``--profile N`` prints cProfile's top functions for N
steps instead.

Every timing is repeated; the table shows the median and the min..max spread, with the machine's load before and
after (other processes share the machine: the load says how much).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_cli import machine_state  # noqa: E402

from generator.manifest.loading import load_manifest  # noqa: E402
from generator.planning.options import BuildOptions  # noqa: E402
from generator.planning.plan import plan_repository  # noqa: E402
from generator.planning.targets import make_target_resolver  # noqa: E402

#: The example GraphSpec each manifest model copies, and its one input and output.
SPEC = REPO / "examples" / "specs" / "mlp.graphspec.json"


def write_project(folder: Path, steps: int, models: int, shape: str = "chain") -> Path:
    """A manifest of ``models`` square models and one ensemble of ``steps`` steps; its path.

    ``chain``: step i reads t<i> and writes t<i+1>; ``reversed``: the same steps listed backwards (each pass over
    the steps in index order can run one); ``wide``: independent steps, each with its own ensemble input and output.
    """
    spec = json.loads(SPEC.read_text(encoding="utf-8"))
    for side in ("shape", "min_shape", "max_shape"):
        spec["graph"]["output_spec"]["tensor_data"][0][side][1] = 16
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "square.graphspec.json").write_text(json.dumps(spec), encoding="utf-8")
    manifest = {
        "defaults": {"target": "python"},
        "models": [{"name": f"m{j}", "spec": "square.graphspec.json"} for j in range(models)],
        "ensembles": [{"name": "chain", "steps": [
            {"model": f"m{i % models}", "inputs": {"input_x": f"x{i}" if shape == "wide" else f"t{i}"},
             "outputs": {"output": f"y{i}" if shape == "wide" else f"t{i + 1}"}} for i in range(steps)]}],
    }
    if shape == "reversed":
        manifest["ensembles"][0]["steps"].reverse()
    path = folder / "gen-repo.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")  # block style, as people write it
    return path


def plan_once(manifest: Path) -> tuple[float, float, float]:
    """One ``plan_build`` of ``manifest`` as its two parts: (load wall s, plan wall s, plan CPU s).

    Loading (:func:`~generator.manifest.loading.load_manifest`: the YAML, the schema, the GraphSpecs) and planning
    (:func:`~generator.planning.plan.plan_repository`: every model, the ensemble's wiring, ModelConfig and order)
    are what ``plan_build`` runs, timed apart; CPU time is less shaken by other processes than wall time.
    """
    start = time.perf_counter()
    manifest_data = load_manifest(manifest)
    cpu, loaded = time.process_time(), time.perf_counter()
    plan = plan_repository(manifest_data, make_target_resolver(BuildOptions(target="python"), []), keep_going=True)
    planned = time.perf_counter()
    assert not plan.refused and len(plan.ensembles) == 1, plan.refused
    return loaded - start, planned - loaded, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 3000, 10000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--shape", choices=["chain", "reversed", "wide"], default="chain")
    parser.add_argument("--profile", type=int, default=0, help="profile one plan of this many steps instead")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-plan-") as tmp:
        if args.profile:
            manifest = write_project(Path(tmp) / "profile", args.profile, args.models, args.shape)
            profiler = cProfile.Profile()
            profiler.runcall(plan_once, manifest)
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
            return
        print(f"machine before: {machine_state()}")
        medians: dict[int, float] = {}
        print("| shape | ensemble steps | models | load (median, min..max) | plan (median, min..max) | plan CPU "
              "(median, min..max) | runs |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for size in args.sizes:
            manifest = write_project(Path(tmp) / str(size), size, args.models, args.shape)
            plan_once(manifest)  # warm-up: imports, schema compilation
            runs = [plan_once(manifest) for _ in range(args.repeats)]
            cells = []
            for part in range(3):
                times = [run[part] for run in runs]
                cells.append(f"{statistics.median(times):.3f} s ({min(times):.3f}..{max(times):.3f})")
            medians[size] = statistics.median(run[2] for run in runs)
            print(f"| {args.shape} | {size:,} | {args.models} | {' | '.join(cells)} | {len(runs)} |")
        print(f"machine after: {machine_state()}")
        smallest = min(medians)
        for size, median in medians.items():
            growth = median / medians[smallest]
            print(f"{size:,} steps: plan CPU {1000 * median / size:.3f} s per 1,000 steps, {growth:.1f}x the "
                  f"{smallest:,}-step plan")

if __name__ == "__main__":
    main()
