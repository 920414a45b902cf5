"""Served throughput against the ceiling (the model's runtime alone), and where the gap goes, per zoo model.

Per model (default: ``bert`` (small text encoder), ``wav2vec2`` (audio encoder), ``llama`` (decoder), built from
``tests/zoo`` for the python target, or taken from ``--repo``) and per repeat, on this machine:

- **ceiling**: :func:`generator.serving.ceiling.measure_ceiling` (onnxruntime in-process, one session per instance,
  the instance's threads, the profile's batch sizes; the best of them), with its CPU seconds per item;
- **served**: one launched tritonserver with the generated config, the load generator (``gen-repo perf``'s, its client
  processes on this same machine) sending one-item requests at each ``--concurrency``; the best is kept;
- **server CPU per item**: user+system CPU seconds of tritonserver (gRPC, scheduler, the python backend's shared
  memory) and, apart, of its backend stubs (model.py and onnxruntime) from ``/proc``, client processes excluded,
  divided by the items served; against the runtime's own CPU per item at the batch size the dynamic batcher
  actually formed (Triton's metrics: inferences / executions). The load clients' CPU per item is shown apart.

Prints medians and spread (min..max) over the repeats and the load average before and after.

    python bench/bench_ceiling.py [--repeats 3] [--models bert wav2vec2 llama] [--repo DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
DEFAULT_MODELS = ("bert", "wav2vec2", "llama")
_TICK = os.sysconf("SC_CLK_TCK")


def _tree_cpu(root: int) -> tuple[float, float]:
    """CPU seconds (user + system) of process ``root`` alone and of its descendants (tritonserver, its stubs)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = (int(fields[11]) + int(fields[12])) / _TICK
    family, changed = {root}, True
    while changed:
        grown = family | {pid for pid, parent in parents.items() if parent in family}
        changed, family = grown != family, grown
    return times.get(root, 0.0), sum(times.get(pid, 0.0) for pid in family - {root})


def _metric(metrics_port: int, name: str, model: str) -> float:
    """One of Triton's per-model counters (``nv_inference_count``, ``nv_inference_exec_count``)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    match = re.search(rf'^{name}\{{[^}}]*model="{re.escape(model)}"[^}}]*\}} (\S+)$', text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def _served(server: Any, repo: Path, model: str, levels: list[int], seconds: float) -> dict[str, Any]:
    """The best served throughput over ``levels``, its server CPU per item and the batch the batcher formed."""
    from generator.client import ModelContract
    from generator.serving.loadgen import LoadGenerator, Windows, measure

    contract = ModelContract.from_repository(repo, model)
    inputs = contract.example_inputs("opt", batch_size=1) if contract.batching else contract.example_inputs("opt")
    batch = 1 if contract.batching else int(next(iter(inputs.values())).shape[0])
    datatypes = {t.name: t.datatype for t in contract.inputs}
    count = max(1, round(seconds))
    best: dict[str, Any] = {"throughput": 0.0}
    for level in levels:
        with LoadGenerator(server.grpc_url, model, inputs, datatypes, concurrency=level) as load:
            cpu, items = _tree_cpu(server.pid), _metric(server.metrics_port, "nv_inference_count", model)
            everything = sum(_tree_cpu(os.getpid()))  # this process, its load clients and the server
            execs = _metric(server.metrics_port, "nv_inference_exec_count", model)
            done = measure(load, Windows(window_s=seconds / count, agree=count, max_windows=count), batch=batch)
            after = _tree_cpu(server.pid)
            everything = sum(_tree_cpu(os.getpid())) - everything
            items = _metric(server.metrics_port, "nv_inference_count", model) - items
            execs = _metric(server.metrics_port, "nv_inference_exec_count", model) - execs
        if done.throughput > best["throughput"]:
            core, stubs = ((a - b) / max(items, 1) for a, b in zip(after, cpu, strict=True))
            best = {"throughput": done.throughput, "noise": done.noise, "concurrency": level, "core_cpu": core,
                    "stub_cpu": stubs, "cpu_per_item": core + stubs, "formed_batch": items / max(execs, 1),
                    "client_cpu": everything / max(items, 1) - core - stubs}
    return best


#: Appended to a copy of model.py by ``--profile``: cProfile around execute() in each stub, written at unload.
_PROFILER = """
import cProfile as _cprofile

_execute, _finalize = TritonPythonModel.execute, TritonPythonModel.finalize


def _profiled_execute(self, requests):
    self.__dict__.setdefault("_profile", _cprofile.Profile()).enable()
    try:
        return _execute(self, requests)
    finally:
        self._profile.disable()


def _profiled_finalize(self):
    if "_profile" in self.__dict__:
        self._profile.dump_stats(os.path.join(os.path.dirname(os.path.abspath(__file__)), f"profile.{os.getpid()}"))
    _finalize(self)


TritonPythonModel.execute, TritonPythonModel.finalize = _profiled_execute, _profiled_finalize
"""


def _profile(repo: Path, model: str, args: argparse.Namespace, folder: Path) -> None:
    """Serve a copy of ``model`` whose model.py profiles execute(); print where the stubs' time goes."""
    import pstats
    import shutil

    from generator.serving.server import launch

    copy = folder / "profiled"
    shutil.copytree(repo / model, copy / model, symlinks=True)
    scripts = list((copy / model).glob("*/model.py"))
    for script in scripts:
        script.write_text(script.read_text() + _PROFILER)
    with launch(copy, model_control="explicit", load_models=[model]) as server:
        _served(server, copy, model, args.concurrency[-1:], args.seconds)
    stats = pstats.Stats(*map(str, (copy / model).glob("*/profile.*")))
    print(f"\n{model}: where execute() spends its time in the stubs (cProfile, concurrency {args.concurrency[-1]})")
    stats.sort_stats("tottime").print_stats(14)


def _runtime_cpu_at(ceiling: Any, batch: float) -> tuple[int, float]:
    """The runtime's CPU seconds per item at the measured batch size nearest ``batch``."""
    nearest = min(ceiling.cpu_per_batch, key=lambda b: abs(b - batch))
    return nearest, ceiling.cpu_per_batch[nearest]


def _one(repo: Path, model: str, args: argparse.Namespace) -> dict[str, Any]:
    from generator.serving.ceiling import measure_ceiling
    from generator.serving.server import launch

    ceiling = measure_ceiling(repo, model, seconds=args.ceiling_seconds)
    if ceiling.throughput is None:
        raise SystemExit(f"{model}: {ceiling.describe()}")
    with launch(repo, model_control="explicit", load_models=[model]) as server:
        served = _served(server, repo, model, args.concurrency, args.seconds)
    at, runtime_cpu = _runtime_cpu_at(ceiling, served["formed_batch"])
    return {"ratio": served["throughput"] / ceiling.throughput, "served": served, "ceiling": ceiling,
            "cpu_ratio": served["cpu_per_item"] / runtime_cpu, "runtime_cpu": runtime_cpu, "runtime_batch": at}


def _stat(values: list[float], digits: int = 2) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}..{max(values):.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    parser.add_argument("--repo", type=Path, default=None, help="a built repository holding the models")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0, help="served measurement per concurrency")
    parser.add_argument("--ceiling-seconds", type=float, default=3.0, help="ceiling measurement per batch size")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--profile", action="store_true", help="also profile model.py's execute() in the stubs")
    args = parser.parse_args()
    load_before = os.getloadavg()
    print(f"load average before: {', '.join(f'{v:.2f}' for v in load_before)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-ceiling-") as tmp:
        if args.repo is None:
            from bench_tune import _build  # the zoo models named, built for the python target

            args.repo = _build(args.models, Path(tmp))
        rows: dict[str, list[dict[str, Any]]] = {}
        for model in args.models:
            for k in range(args.repeats):
                run = _one(args.repo, model, args)
                rows.setdefault(model, []).append(run)
                s, c = run["served"], run["ceiling"]
                print(f"{model} #{k + 1}: served {s['throughput']:.1f}/s +-{s['noise']:.0%} (concurrency "
                      f"{s['concurrency']}, batches formed {s['formed_batch']:.1f}) / {c.describe()} = "
                      f"{run['ratio']:.3f}; server CPU {s['cpu_per_item'] * 1e3:.3f} ms/item (tritonserver "
                      f"{s['core_cpu'] * 1e3:.3f}, stubs {s['stub_cpu'] * 1e3:.3f}; clients "
                      f"{s['client_cpu'] * 1e3:.3f}) vs runtime "
                      f"{run['runtime_cpu'] * 1e3:.3f} ms/item at batch {run['runtime_batch']} = "
                      f"{run['cpu_ratio']:.2f}x; load {os.getloadavg()[0]:.2f}", flush=True)
            if args.profile:
                _profile(args.repo, model, args, Path(tmp))
    from generator.tuning.results import describe_hardware

    print(f"\nhardware: {describe_hardware()}; clients on the same machine")
    print("| model | served / ceiling | served /s | ceiling /s | server CPU ms/item | tritonserver | stubs | "
          "clients | runtime CPU ms/item | server / runtime CPU | repeats |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for model, runs in rows.items():
        print(f"| {model} | {_stat([r['ratio'] for r in runs], 3)} | "
              f"{_stat([r['served']['throughput'] for r in runs], 1)} | "
              f"{_stat([r['ceiling'].throughput for r in runs], 1)} | "
              f"{_stat([r['served']['cpu_per_item'] * 1e3 for r in runs], 3)} | "
              f"{_stat([r['served']['core_cpu'] * 1e3 for r in runs], 3)} | "
              f"{_stat([r['served']['stub_cpu'] * 1e3 for r in runs], 3)} | "
              f"{_stat([r['served']['client_cpu'] * 1e3 for r in runs], 3)} | "
              f"{_stat([r['runtime_cpu'] * 1e3 for r in runs], 3)} | {_stat([r['cpu_ratio'] for r in runs])} | "
              f"{len(runs)} |")
    print(f"load average before: {', '.join(f'{v:.2f}' for v in load_before)}; after: "
          f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
