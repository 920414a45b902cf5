"""Config generation throughput: N synthetic GraphSpecs -> config.pbtxt files, gen-repo vs NVIDIA Model Navigator.

    python bench/bench_config_gen.py [--counts 1000 10000] [--repeats 3]

gen-repo's path is timed from a loaded GraphSpec: plan (batching decision, names, shapes) -> ModelConfig message ->
text -> mkdir + write (``generator.repository.files.write_files``, what ``gen-repo config`` writes with). Navigator
gets the decisions for free (its ModelConfig dataclass is filled from our plan outside the clock) and is timed for
``ModelConfig(...)`` + ``ModelConfigGenerator(...).to_file(path)`` (which does the mkdir and write itself). Same
names, dims, data types, max_batch_size, dynamic batching, instance groups and warmup; the mix is a third each
tensorrt, onnx and python targets. Navigator is optional: pip install triton-model-navigator==0.14.0 --no-deps plus
its pure-Python deps (see bench/README.md); skipped with a message if
absent. Prints a table, then the ratio lines last.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from generator.manifest.entries import ManifestModel  # noqa: E402
from generator.planning.config import ConfigRequest, build_model_config, render_config  # noqa: E402
from generator.planning.plan import ModelPlan, plan_model  # noqa: E402
from generator.repository.files import write_files  # noqa: E402
from generator.specs.graphspec import GraphSpec, infer_batch_multipliers  # noqa: E402

TARGETS = ("tensorrt", "onnx", "python")
DTYPES = ("torch.float32", "torch.float16", "torch.int64", "torch.int32")


def synthetic_graph(i: int, rng: random.Random) -> dict[str, Any]:
    """One AITune-style GraphSpec: 1-3 inputs with a batch axis and sometimes a dynamic axis, 1-2 outputs."""
    high = rng.choice((4, 8, 16, 32, 64))
    inputs, dynamic = [], []
    explicit = rng.random() < 0.3
    for k in range(rng.randint(1, 3)):
        rank = rng.randint(2, 4)
        static = [rng.choice((3, 16, 64, 128, 224)) for _ in range(rank - 1)]
        shape: list[Any] = ["batch0", *static]
        low_shape, high_shape = [1, *static], [high, *static]
        if rank >= 3 and rng.random() < 0.5:
            shape[1], low_shape[1], high_shape[1] = "dim1", 8, 256
        name = f"in{k}"
        inputs.append({"access_path": name, "semantic_path": name, "shape": shape, "min_shape": low_shape,
                       "max_shape": high_shape, "dtype": rng.choice(DTYPES)})
        if explicit:
            dims: list[Any] = [{"type": "BatchDim", "name": "batch", "min": 1, "max": high, "opt": max(1, high // 2)}]
            for a in range(1, rank):
                if shape[a] == "dim1":
                    dims.append({"type": "DynamicDim", "name": "seq", "min": 8, "max": 256, "opt": 64})
                else:
                    dims.append(static[a - 1])
            dynamic.append({"path": name, "shape": dims})
    outputs = []
    for k in range(rng.randint(1, 2)):
        width = rng.choice((2, 10, 1000))
        path: Any = [] if k == 0 else [k]
        outputs.append({"access_path": "output" if k == 0 else f"output[{k}]", "semantic_path": path,
                        "shape": ["batch0", width], "min_shape": [1, width], "max_shape": [high, width],
                        "dtype": "torch.float32"})
    params = [{"name": d["access_path"], "kind": "POSITIONAL_OR_KEYWORD", "has_default": False} for d in inputs]
    return {"type": "GraphSpec", "name": f"g{i}",
            "input_spec": {"tensor_data": inputs, "other_data": [], "strict": True, "llm_phase": None},
            "output_spec": {"tensor_data": outputs, "other_data": [], "strict": True, "llm_phase": None},
            "forward_signature": {"parameters": params}, "dynamic_shapes": dynamic}


def manifest_models(count: int, seed: int = 0) -> list[ManifestModel]:
    """``count`` planned-to-be models, loaded (schema-valid by construction) outside the clock."""
    rng = random.Random(seed)
    models = []
    for i in range(count):
        graph = GraphSpec.from_dict(synthetic_graph(i, rng))
        infer_batch_multipliers(graph)
        target = TARGETS[i % len(TARGETS)]
        options: dict[str, Any] = {"dynamic_batching": {"max_queue_delay_microseconds": 100}}
        if target == "tensorrt":
            options["warmup"] = True
        models.append(ManifestModel(index=i, name=f"model_{i:05d}", version=1, graph=graph,
                                    spec_file=Path("synthetic.json"), spec_pointer=f"/{i}", source=None,
                                    target=target, options=options, own_options=frozenset(options)))
    return models


def run_ours(models: list[ManifestModel], out: Path) -> float:
    """Plan + build ModelConfig + render per model, then every file written with the product's writer."""
    start = time.perf_counter()
    files = {}
    for model in models:
        plan = plan_model(model, "synthetic.yaml")
        files[f"{plan.name}/config.pbtxt"] = render_config(plan.config)
    write_files(out, files)
    return time.perf_counter() - start


def config_requests(models: list[ManifestModel], plans: list[ModelPlan]) -> list[ConfigRequest]:
    """The config stage's input (the plan's decisions), like Navigator's ModelConfig arguments: built off the clock."""
    return [
        ConfigRequest(name=p.name, target=p.target, max_batch_size=p.max_batch_size, opt_batch=p.opt_batch_size,
                      inputs=p.inputs, outputs=p.outputs, options=m.options, file="synthetic.yaml",
                      model_pointer=m.pointer, option_pointer=m.option_pointer, own_options=m.own_options)
        for m, p in zip(models, plans, strict=True)
    ]


def run_config_stage(requests: list[ConfigRequest], out: Path | None) -> float:
    """ConfigRequest -> ModelConfig (Triton's rules checked) -> text; the files written when ``out`` is given."""
    start = time.perf_counter()
    files = {f"{request.name}/config.pbtxt": render_config(build_model_config(request).config) for request in requests}
    if out is not None:
        write_files(out, files)
    return time.perf_counter() - start


def run_ours_no_io(models: list[ManifestModel]) -> float:
    start = time.perf_counter()
    for model in models:
        render_config(plan_model(model, "synthetic.yaml").config)
    return time.perf_counter() - start


def run_file_creation(texts: list[bytes], out: Path) -> float:
    """The floor any generator pays: one folder and one file per config, with bare ``os`` calls and the texts ready."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    root = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    start = time.perf_counter()
    for i, text in enumerate(texts):
        name = f"model_{i:05d}"
        os.mkdir(name, dir_fd=root)
        fd = os.open(f"{name}/config.pbtxt", flags, 0o666, dir_fd=root)
        os.write(fd, text)
        os.close(fd)
    elapsed = time.perf_counter() - start
    os.close(root)
    return elapsed


@dataclass
class NavigatorArgs:
    """What Navigator's ModelConfig needs, computed from our plan outside the clock."""

    kwargs: dict[str, Any]


def navigator_available() -> tuple[Any, str]:
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            import model_navigator.triton.model_config as nav_config
            import model_navigator.triton.model_config_generator as nav_generator
            from loguru import logger
    except Exception as error:  # any import failure means "not installed here"
        return None, f"{type(error).__name__}: {error}"
    # Navigator logs through loguru at DEBUG to stderr by default; silence the sink (its f-strings, including a
    # json.dumps of the whole config, are still evaluated: that is part of its real cost).
    logger.remove()
    return (nav_config, nav_generator), ""


def navigator_args(plans: list[ModelPlan], nav: Any) -> list[NavigatorArgs]:
    import numpy as np
    from model_navigator.triton import specialized_configs as sc

    from generator.dtypes import DTYPES

    numpy_of = {d.triton: d.host_numpy for d in DTYPES}  # Model Navigator's warmup takes numpy dtypes: BF16 as FP32
    out = []
    for plan in plans:
        config = plan.config
        kwargs: dict[str, Any] = {"model_name": plan.name, "model_version": plan.version,
                                  "max_batch_size": plan.max_batch_size, "batching": plan.max_batch_size > 0}
        if config.platform == "tensorrt_plan":
            kwargs["platform"] = sc.Platform.TensorRTPlan
        elif config.platform == "onnxruntime_onnx":
            kwargs["platform"] = sc.Platform.ONNXRuntimeONNX
        else:
            kwargs["backend"] = sc.Backend.Python
        if config.default_model_filename:
            kwargs["default_model_filename"] = config.default_model_filename
        kwargs["inputs"] = [sc.InputTensorSpec(name=t.name, shape=tuple(t.dims), dtype=np.dtype(numpy_of[t.data_type]))
                            for t in plan.inputs]
        kwargs["outputs"] = [sc.OutputTensorSpec(name=t.name, shape=tuple(t.dims),
                                                 dtype=np.dtype(numpy_of[t.data_type])) for t in plan.outputs]
        if config.HasField("dynamic_batching"):
            kwargs["batcher"] = sc.DynamicBatcher(
                max_queue_delay_microseconds=config.dynamic_batching.max_queue_delay_microseconds,
                preferred_batch_size=list(config.dynamic_batching.preferred_batch_size))
        kind = {1: sc.DeviceKind.KIND_GPU, 2: sc.DeviceKind.KIND_CPU}.get(config.instance_group[0].kind,
                                                                         sc.DeviceKind.KIND_AUTO)
        # Navigator accepts `profile` only with backend=TensorRT, not platform tensorrt_plan: left out.
        kwargs["instance_groups"] = [sc.InstanceGroup(kind=kind, count=g.count)
                                     for g in config.instance_group]
        if config.model_warmup:
            w = config.model_warmup[0]
            dtypes = {t.name: np.dtype(numpy_of[t.data_type]) for t in plan.inputs}
            kwargs["warmup"] = {w.name: sc.ModelWarmup(batch_size=w.batch_size, inputs={
                name: sc.ModelWarmupInput(
                    shape=tuple(entry.dims), dtype=dtypes[name],
                    input_data_type=sc.ModelWarmupInputDataType.RANDOM if entry.random_data
                    else sc.ModelWarmupInputDataType.ZERO)
                for name, entry in sorted(w.inputs.items())})}
        out.append(NavigatorArgs(kwargs))
    return out


def run_navigator(args: list[NavigatorArgs], nav: Any, out: Path) -> float:
    nav_config, nav_generator = nav
    ModelConfig, Generator = nav_config.ModelConfig, nav_generator.ModelConfigGenerator  # noqa: N806
    start = time.perf_counter()
    for a in args:
        config = ModelConfig(**a.kwargs)
        Generator(config).to_file(out / a.kwargs["model_name"] / "config.pbtxt")
    return time.perf_counter() - start


def run_navigator_no_io(args: list[NavigatorArgs], nav: Any) -> float:
    """Navigator's to_file steps without the mkdir and write: dict, its debug f-strings, ParseDict, text_format."""
    import json

    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    nav_config, nav_generator = nav
    ModelConfig, Generator = nav_config.ModelConfig, nav_generator.ModelConfigGenerator  # noqa: N806
    start = time.perf_counter()
    for a in args:
        as_dict = Generator(ModelConfig(**a.kwargs))._get_config()
        _ = f"Generated Triton config:\n{json.dumps(as_dict, indent=4)}"  # its logger.debug f-strings are evaluated
        payload = json_format.ParseDict(as_dict, model_config_pb2.ModelConfig())
        _ = f"Generated Triton config payload:\n{payload}"
        data = text_format.MessageToBytes(payload)
        if as_dict["max_batch_size"] == 0:
            data += b"max_batch_size: 0\n"
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeats", type=int, default=3,
                        help="alternating runs per count, after one warm-up round; the median is reported")
    parser.add_argument("--tmp-dir", default=str(REPO / "bench" / "out"),
                        help="where the configs are written (and removed); /tmp on this machine was 10x slower for "
                        "mkdir+write than the work disk, which hides both generators' cost")
    args = parser.parse_args()
    Path(args.tmp_dir).mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="bench-config-", dir=args.tmp_dir))
    try:
        measure(args, run_dir)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def measure(args: argparse.Namespace, run_dir: Path) -> None:
    """Run every generator ``args.repeats`` times per count, alternating, then print the table and the ratios."""

    nav, why = navigator_available()
    if nav is None:
        print(f"Model Navigator not importable ({why}); measuring gen-repo only")
    rows = []
    ratios: list[tuple[int, str, float, float]] = []
    ceilings: list[tuple[int, float]] = []
    for count in args.counts:
        models = manifest_models(count)
        plans = [plan_model(m, "synthetic.yaml") for m in models]
        nav_args = navigator_args(plans, nav) if nav else []
        requests = config_requests(models, plans)
        texts = [render_config(p.config).encode() for p in plans]
        times: dict[str, list[float]] = {key: [] for key in ("ours", "stage", "navigator", "floor", "ours_io_free",
                                                             "stage_io_free", "navigator_io_free")}
        # One warm-up round first (caches, first-call set-up, CPU frequency), for every generator alike; dropped.
        for _ in range(args.repeats + 1):
            for who in ("ours", "stage", "navigator", "floor"):
                # Every run writes into a folder of its own and nothing is removed until all runs are done: on ext4
                # without a journal (this machine's disk) creating inodes right after deleting thousands costs
                # O(recently deleted) each (ialloc's recently_deleted check), which would tax whoever runs next.
                tmp = Path(tempfile.mkdtemp(prefix=f"bench-config-{who}-", dir=run_dir))
                gc.collect()
                if who == "ours":
                    times[who].append(run_ours(models, tmp))
                elif who == "stage":
                    times[who].append(run_config_stage(requests, tmp))
                elif who == "floor":
                    times[who].append(run_file_creation(texts, tmp))
                elif nav:
                    times[who].append(run_navigator(nav_args, nav, tmp))
            times["ours_io_free"].append(run_ours_no_io(models))
            times["stage_io_free"].append(run_config_stage(requests, None))
            if nav:
                times["navigator_io_free"].append(run_navigator_no_io(nav_args, nav))
        ours, stage, theirs, floor = (times[k][1:] for k in ("ours", "stage", "navigator", "floor"))
        ours_io_free, stage_io_free, theirs_io_free = (times[k][1:] for k in ("ours_io_free", "stage_io_free",
                                                                               "navigator_io_free"))
        rows.append(("gen-repo (plan+config+write)", count, statistics.median(ours), min(ours), max(ours)))
        rows.append(("gen-repo (plan+config, no I/O)", count, statistics.median(ours_io_free), min(ours_io_free),
                     max(ours_io_free)))
        rows.append(("gen-repo config stage + write", count, statistics.median(stage), min(stage), max(stage)))
        rows.append(("gen-repo config stage, no I/O", count, statistics.median(stage_io_free), min(stage_io_free),
                     max(stage_io_free)))
        rows.append(("file creation alone (os calls)", count, statistics.median(floor), min(floor), max(floor)))
        if theirs:
            ceilings.append((count, statistics.median(theirs) / statistics.median(floor)))
            rows.append(("Model Navigator 0.14 to_file", count, statistics.median(theirs), min(theirs), max(theirs)))
            rows.append(("Model Navigator 0.14, no I/O", count, statistics.median(theirs_io_free), min(theirs_io_free),
                         max(theirs_io_free)))
            ratios.append((count, "like for like (config stage), files written",
                           statistics.median(theirs) / statistics.median(stage), min(theirs) / min(stage)))
            ratios.append((count, "like for like (config stage), no I/O",
                           statistics.median(theirs_io_free) / statistics.median(stage_io_free),
                           min(theirs_io_free) / min(stage_io_free)))
            ratios.append((count, "whole path from GraphSpecs (also plans), files written",
                           statistics.median(theirs) / statistics.median(ours), min(theirs) / min(ours)))
            ratios.append((count, "whole path from GraphSpecs, no I/O",
                           statistics.median(theirs_io_free) / statistics.median(ours_io_free),
                           min(theirs_io_free) / min(ours_io_free)))
    print(f"{'generator':<32} {'N':>6} {'median s':>9} {'configs/s':>10} {'min..max configs/s':>22}")
    for name, count, median, low, high in rows:
        best, worst = count / low, count / high
        print(f"{name:<32} {count:>6} {median:>9.3f} {count / median:>10.0f} {worst:>10.0f}..{best:<10.0f}")
    print()
    print(f"storage for written configs: {args.tmp_dir} (removed after the runs; on ext4 without a journal, file "
          "creation stays slower for a few minutes after such a removal: wait before running again)")
    for count, ceiling in ceilings:
        print(f"I/O ceiling N={count}: Navigator's time / file creation alone = {ceiling:.2f}x (no generator that "
              "creates these folders and files can be faster than Navigator by more than this, on this disk now)")
    for count, what, median_ratio, best_ratio in ratios:
        verdict = (" -> goal met" if median_ratio >= 5 else " -> goal NOT met") if "goal" in what else ""
        print(f"ratio N={count} {what}: gen-repo / Navigator = {median_ratio:.2f}x configs/s on medians, "
              f"{best_ratio:.2f}x on best runs{verdict}")
    if not ratios:
        print("ratio: n/a (Model Navigator not installed)")


if __name__ == "__main__":
    main()
