"""Per zoo model: a cold ``gen-repo build`` against the bare ONNX export it used, and a warm rebuild (issue 22).

For each model of ``tests/zoo/gen-repo.yaml`` (a one-model manifest, python target, in this process):

- **bare**: what a user writes to get the same ONNX file without gen-repo: the factory's module, the same flat
  wrapper and example inputs, and one ``torch.onnx.export`` call with the same exporter (dynamo, or the TorchScript
  exporter where the build fell back to it), the same dynamic axes and their ranges, weights inline;
- **cold**: ``generator.building.pipeline.build_repository`` with an empty cache and a new output folder (plan, factory,
export,
  reference cases in torch, onnxruntime against torch, contract, reference data, warmup data, staging, lock file),
  with the time of each stage from its progress events;
- **warm**: the same build again, nothing changed (every model from the cache), in this process and through the
  ``gen-repo build`` console script (interpreter start-up and imports count).

Same process state for both: per model, one throw-away cold build and one throw-away bare export run before its
timed runs (first use of a model costs more in whichever run comes first: its factory's lazy transformers/diffusers
imports, torch's first calls of its operators), bare and cold runs alternate their order per repetition, and
torch.export's caches are reset before each. The cold build's own ``torch.onnx.export`` call is timed too
("in export"): cold minus that is what gen-repo adds (the forward check before exporting, the reference cases, the
onnxruntime check, files). Prints medians and spread (min..max) per model, the cold/bare ratio against the goal
(<= 1.5x) and warm against 1 s, and the load average before and after.

    python bench/bench_build_zoo.py [--repeat 3] [--models bert llama ...]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "tests" / "zoo"
#: The build's stages in the order their progress events arrive; "plan" is everything before the first event.
STAGES = ("plan", "source", "export", "reference", "check", "stage")


def _manifest(folder: Path, entry: dict[str, Any]) -> Path:
    """A one-model manifest in ``folder`` (paths absolute: the zoo's spec and sample files stay where they are)."""
    entry = dict(entry)
    entry["spec"] = str(ZOO / entry["spec"])
    if isinstance(entry.get("samples"), str):
        entry["samples"] = str(ZOO / entry["samples"])
    path = folder / "gen-repo.yaml"
    path.write_text(yaml.safe_dump({"defaults": {"target": "python", "warmup": True}, "models": [entry]}))
    return path


def _options(cache: Path) -> Any:
    from generator.building.pipeline import BuildOptions

    return BuildOptions(allow_code=True, target="python", cache_dir=cache, allow_outside=True,
                        code_path=(str(ZOO),))


def _reset_torch() -> None:
    import torch

    torch._dynamo.reset()


#: Seconds of every ``torch.onnx.export`` call since the last reset (see :func:`_time_torch_onnx_export`).
_EXPORT_CALLS: list[float] = []


def _time_torch_onnx_export() -> None:
    """Time each ``torch.onnx.export`` call, the build's included (a wrapper; arguments and result untouched)."""
    import torch.onnx

    real = torch.onnx.export

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            _EXPORT_CALLS.append(time.perf_counter() - started)

    torch.onnx.export = timed


def _cold(manifest: Path, output: Path, cache: Path) -> tuple[float, dict[str, float], str]:
    """One cold build: seconds, seconds per stage (and "in export": its torch.onnx.export calls), the exporter."""
    from generator.building.pipeline import build_repository

    events: list[tuple[float, str]] = []
    _reset_torch()
    _EXPORT_CALLS.clear()
    started = time.perf_counter()
    report = build_repository(manifest, _options(cache), output,
                              progress=lambda e: events.append((time.perf_counter(), e.stage)))
    ended = time.perf_counter()
    assert report.ok, report.to_dict()
    stages = dict.fromkeys(STAGES, 0.0)
    marks = [(started, "plan"), *((t, stage) for t, stage in events), (ended, "end")]
    seen_work = False
    for (t0, stage), (t1, _) in itertools.pairwise(marks):
        seen_work = seen_work or stage in ("source", "export", "reference", "check")
        bucket = stage if stage in ("source", "export", "reference", "check") else ("stage" if seen_work else "plan")
        stages[bucket] += t1 - t0
    stages["in export"] = sum(_EXPORT_CALLS)
    from generator.building.export.onnx import EXPORTER_NAMES

    # The build's note "exported with <exporter> in N s" says which exporter the file came from.
    used = [e for e, words in EXPORTER_NAMES.items()
            if any(n.startswith(f"exported with {words} in ") for n in report.models[0].notes)]
    return ended - started, stages, used[0]


def _bare(manifest: Path, folder: Path, exporter: str) -> float:
    """The same ONNX without gen-repo: module, wrapper, example inputs and one torch.onnx.export call."""
    import torch
    from torch.export import Dim

    from generator.building.export.exchange import constants_from_graph, dynamic_axes_of
    from generator.building.export.flat_module import flat_module_for
    from generator.building.export.onnx import example_inputs
    from generator.building.factories import import_factory
    from generator.errors import Problem
    from generator.planning.targets import plan_build

    options = _options(folder / "unused-cache")
    (model,) = plan_build(manifest, options)[0].models
    _reset_torch()
    started = time.perf_counter()
    module = import_factory(str(model.source.factory), options, Problem("", "", ""))
    wrapper = flat_module_for(module, model.inputs, model.outputs, forward_signature=model.graph.forward_signature,
                              constants=constants_from_graph(model.graph))
    tensors = tuple(example_inputs(model.inputs))
    names = ([t.name for t in model.inputs], [t.name for t in model.outputs])
    path = folder / "bare.onnx"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            shapes = tuple({a: Dim.DYNAMIC(min=int(t.min_shape[a]), max=int(t.max_shape[a]))
                            for a in dynamic_axes_of(t)} or None for t in model.inputs)
            torch.onnx.export(wrapper, tensors, str(path), input_names=names[0], output_names=names[1],
                              dynamic_shapes={"inputs": shapes}, dynamo=True, external_data=False)
        else:
            axes = {t.name: {a: f"{t.name}_{a}" for a in dynamic_axes_of(t)} for t in model.inputs}
            torch.onnx.export(wrapper, tensors, str(path), input_names=names[0], output_names=names[1],
                              dynamic_axes=axes, dynamo=False, opset_version=17)
    return time.perf_counter() - started


def _warm_in_process(manifest: Path, output: Path, cache: Path) -> float:
    from generator.building.pipeline import build_repository

    started = time.perf_counter()
    report = build_repository(manifest, _options(cache), output)
    elapsed = time.perf_counter() - started
    assert report.ok and all(m.status == "cached" for m in report.models), report.to_dict()
    return elapsed


def _warm_cli(manifest: Path, output: Path, cache: Path) -> float:
    beside = Path(sys.executable).parent / "gen-repo"
    command = [str(beside) if beside.is_file() else "gen-repo", "build", str(manifest), "-o", str(output),
               "--target", "python", "--allow-code", "--allow-outside", "--cache-dir", str(cache), "--plain"]
    started = time.perf_counter()
    subprocess.run(command, check=True, cwd=ZOO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def _stat(values: list[float]) -> str:
    return f"{statistics.median(values):6.2f} ({min(values):.2f}..{max(values):.2f})"


def main() -> None:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", nargs="*", help="zoo model names (default: all)")
    args = parser.parse_args()
    entries = yaml.safe_load((ZOO / "gen-repo.yaml").read_text())["models"]
    entries = [e for e in entries if not args.models or e["name"] in args.models]
    sys.path.insert(0, str(ZOO))
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-build-zoo-") as tmp:
        base = Path(tmp)
        _time_torch_onnx_export()
        load_before = os.getloadavg()
        for entry in entries:
            folder = base / entry["name"]
            folder.mkdir()
            manifest = _manifest(folder, entry)
            # Throw-away runs of this model: no timed run pays for its first use (imports, first operator calls).
            _, _, first_exporter = _cold(manifest, folder / "first-out", folder / "first-cache")
            _bare(manifest, folder, first_exporter)
            bare: list[float] = []
            cold: list[float] = []
            warm: list[float] = []
            warm_cli: list[float] = []
            stages: dict[str, list[float]] = {s: [] for s in (*STAGES, "in export")}
            exporter = "dynamo"
            for i in range(args.repeat):
                run = folder / str(i)
                run.mkdir()
                # Alternate the order (the first cold run says which exporter the bare one uses).
                for kind in ("cold", "bare") if i % 2 == 0 else ("bare", "cold"):
                    if kind == "cold":
                        seconds, per_stage, exporter = _cold(manifest, run / "out", run / "cache")
                        cold.append(seconds)
                        for stage, value in per_stage.items():
                            stages[stage].append(value)
                    else:
                        bare.append(_bare(manifest, run, exporter))
                warm.append(_warm_in_process(manifest, run / "out", run / "cache"))
                warm_cli.append(_warm_cli(manifest, run / "out", run / "cache"))
                shutil.rmtree(run)
            rows.append((entry["name"], exporter, bare, cold, warm, warm_cli, stages))
            ratio = statistics.median(cold) / statistics.median(bare)
            print(f"{entry['name']}: bare {_stat(bare)} cold {_stat(cold)} ratio {ratio:.2f}x", file=sys.stderr)
        load_after = os.getloadavg()
    print(f"gen-repo build, one zoo model per manifest, --target python ({args.repeat} repetitions; seconds, median "
          "(min..max))")
    print(f"{'model':<20} {'exporter':<8} {'bare export':>19} {'cold build':>19} {'cold/bare':>9} "
          f"{'warm in-process':>19} {'warm CLI':>19}")
    for name, exporter, bare, cold, warm, warm_cli, _ in rows:
        ratio = statistics.median(cold) / statistics.median(bare)
        print(f"{name:<20} {exporter:<8} {_stat(bare):>19} {_stat(cold):>19} {ratio:>8.2f}x {_stat(warm):>19} "
              f"{_stat(warm_cli):>19}")
    print("\nwhere a cold build's time goes (medians, seconds; 'in export' is the torch.onnx.export call inside the "
          "export stage, 'added' the cold build minus it)")
    print(f"{'model':<20} " + " ".join(f"{s:>9}" for s in (*STAGES, "in export", "added")))
    for name, _, _, cold, *_, stages in rows:
        added = [c - e for c, e in zip(cold, stages["in export"], strict=True)]
        print(f"{name:<20} " + " ".join(f"{statistics.median(stages[s]):>9.2f}" for s in (*STAGES, "in export"))
              + f" {statistics.median(added):>9.2f}")
    met = [name for name, _, bare, cold, *_ in rows if statistics.median(cold) <= 1.5 * statistics.median(bare)]
    warm_met = [name for name, *_, warm_cli, _ in rows if statistics.median(warm_cli) <= 1.0]
    print(f"\ncold <= 1.5x bare: {len(met)} of {len(rows)} models; warm CLI <= 1 s: {len(warm_met)} of {len(rows)}")
    print("load average (1, 5, 15 min) before: " + ", ".join(f"{x:.1f}" for x in load_before) + "; after: "
          + ", ".join(f"{x:.1f}" for x in load_after))


if __name__ == "__main__":
    main()
