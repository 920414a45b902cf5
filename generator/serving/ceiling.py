"""The ceiling: what a model's runtime does on this machine without a server, the yardstick for served figures.

onnxruntime in-process for the python and onnx targets, TensorRT's own execution of the plan where a GPU is present;
where neither can run, a :class:`Ceiling` says why instead of a figure.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from generator.contracts.served import FolderReader, ServedModel, read_served_model
from generator.errors import one_line
from generator.serving.loadgen import spread

__all__ = ["Ceiling", "fraction", "measure_ceiling"]

#: Windows per batch size: their spread is the ceiling's noise.
_WINDOWS = 3


@dataclass(slots=True)
class Ceiling:
    """A model's runtime alone: its best items/s over the profile's batch sizes, or ``skipped`` with the reason."""

    model: str
    runtime: str
    throughput: float | None = None
    noise: float = 0.0
    batch_size: int | None = None
    sessions: int = 0
    threads: int = 0
    #: Items/s at each batch size measured.
    per_batch: dict[int, float] = field(default_factory=dict)
    #: This process's CPU seconds per item while the runtime ran, at the best batch size and at each one (what
    #: serving adds is measured against it).
    cpu_s_per_item: float | None = None
    cpu_per_batch: dict[int, float] = field(default_factory=dict)
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (perf's ``ceilings``, tune's model ``ceiling``)."""
        return {"model": self.model, "runtime": self.runtime,
                "throughput": None if self.throughput is None else round(self.throughput, 2),
                "throughput_noise": round(self.noise, 4), "batch_size": self.batch_size, "sessions": self.sessions,
                "threads": self.threads, "skipped": self.skipped,
                "per_batch": [{"batch_size": b, "throughput": round(t, 2),
                               "cpu_seconds_per_item": round(self.cpu_per_batch.get(b, 0.0), 7)}
                              for b, t in sorted(self.per_batch.items())],
                "cpu_seconds_per_item": None if self.cpu_s_per_item is None else round(self.cpu_s_per_item, 7)}

    def describe(self) -> str:
        """One line: ``ceiling 5120.3/s +-3% (onnxruntime, 2 sessions x 1 thread, batch 8)`` or why it was skipped."""
        if self.throughput is None:
            return f"ceiling not measured ({self.runtime}): {self.skipped}"
        return (f"ceiling {self.throughput:.1f}/s +-{self.noise:.0%} ({self.runtime}, {self.sessions} session(s) x "
                f"{self.threads or 'default'} thread(s), batch {self.batch_size})")


def fraction(served: float, ceiling: Ceiling | None) -> float | None:
    """``served`` as a fraction of the ceiling (None where there is none)."""
    if ceiling is None or not ceiling.throughput:
        return None
    return round(served / ceiling.throughput, 3)


def measure_ceiling(repo: Path | str, model: str, *, seconds: float = 3.0, sessions: int | None = None) -> Ceiling:
    """Measure ``model``'s runtime alone for about ``seconds`` per batch size; never raises for a runtime it lacks.

    ``sessions`` overrides the served config's instance count (the instances a candidate would run).
    """
    served = read_served_model(FolderReader(Path(repo)), model)
    config = served.config
    backend = "" if config is None else (config.backend or config.platform)
    folder = Path(repo) / model / str(served.version)
    if backend in ("tensorrt", "tensorrt_plan"):
        return _tensorrt_ceiling(served, folder, seconds)
    if backend not in ("python", "onnxruntime", "onnxruntime_onnx"):
        return Ceiling(model, backend or "unknown", skipped=f"no runtime of its own to measure (backend "
                                                              f"{backend or 'unknown'})")
    onnx = folder / "model.onnx"
    if not onnx.is_file():
        return Ceiling(model, "onnxruntime", skipped=f"{onnx} is missing")
    assert config is not None  # a backend was read from it
    count = sessions or sum(g.count or 1 for g in config.instance_group) or 1
    threads = _threads(served, backend)
    ceiling = Ceiling(model, "onnxruntime", sessions=count, threads=threads)
    try:
        _measure_onnxruntime(ceiling, onnx, _feeds(served), seconds)
    except Exception as exc:  # onnxruntime raises its own exception types for a model it cannot run
        ceiling.skipped, ceiling.throughput = f"onnxruntime failed: {one_line(exc)}", None
    return ceiling


def _threads(served: ServedModel, backend: str) -> int:
    """Intra-op threads per session as the instance runs them (0: onnxruntime's default, one per core)."""
    if backend == "python":  # the generated model.py reads the same variable from the server's environment
        return int(os.environ.get("GEN_REPO_ORT_THREADS", "1"))
    assert served.config is not None
    value = served.config.parameters.get("intra_op_thread_count")
    return int(value.string_value) if value is not None and value.string_value.isdigit() else 0


def _feeds(served: ServedModel) -> dict[int, dict[str, np.ndarray[Any, Any]]]:
    """Per batch size of the profile (min, opt, max), model-side inputs whose values come from the contract."""
    from generator.client import ModelContract

    contract = ModelContract.from_served(served)
    entries = {e["name"]: e for e in (served.contract_doc or {}).get("inputs", [])}
    if not contract.batching or not contract.inputs:
        return {1: _model_side(contract.example_inputs("opt"), entries, False)}
    first = contract.inputs[0]
    sizes = {first.min_shape[0], first.max_shape[0] or contract.max_batch_size}
    if first.opt_shape is not None:
        sizes.add(first.opt_shape[0])
    return {b: _model_side(contract.example_inputs("opt", batch_size=b), entries, True)
            for b in sorted(s for s in sizes if 1 <= s <= contract.max_batch_size)}


def _model_side(arrays: Mapping[str, np.ndarray[Any, Any]], entries: Mapping[str, Mapping[str, Any]],
                batching: bool) -> dict[str, np.ndarray[Any, Any]]:
    """Request-side arrays as model.py hands them to onnxruntime (a per-item scalar's ``[1]`` reshaped away)."""
    out = {}
    for name, array in arrays.items():
        reshape = entries.get(name, {}).get("reshape")
        leading = [array.shape[0]] if batching else []
        out[name] = array if reshape is None else array.reshape(leading + list(reshape))
    return out


def _measure_onnxruntime(ceiling: Ceiling, onnx: Path, feeds: Mapping[int, Mapping[str, np.ndarray[Any, Any]]],
                         seconds: float) -> None:
    """Fill ``ceiling``: ``ceiling.sessions`` sessions, each looping in its own thread (onnxruntime drops the GIL)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = ceiling.threads
    options.inter_op_num_threads = 1
    sessions = [ort.InferenceSession(str(onnx), sess_options=options, providers=["CPUExecutionProvider"])
                for _ in range(ceiling.sessions)]
    best: tuple[float, float, int, float] | None = None
    for batch, feed in feeds.items():
        for session in sessions:
            session.run(None, dict(feed))  # warm-up: the first run allocates and plans
        rates, cpu, items = [], 0.0, 0
        for _ in range(_WINDOWS):
            rate, window_cpu, window_items = _window(sessions, feed, batch, seconds / _WINDOWS)
            rates.append(rate)
            cpu, items = cpu + window_cpu, items + window_items
        rate = sum(rates) / len(rates)
        ceiling.per_batch[batch], ceiling.cpu_per_batch[batch] = rate, cpu / max(items, 1)
        if best is None or rate > best[0]:
            best = (rate, spread(rates), batch, cpu / max(items, 1))
    assert best is not None
    ceiling.throughput, ceiling.noise, ceiling.batch_size, ceiling.cpu_s_per_item = best


def _window(sessions: Sequence[Any], feed: Mapping[str, np.ndarray[Any, Any]], batch: int,
            seconds: float) -> tuple[float, float, int]:
    """(items/s, CPU seconds, items) of every session running ``feed`` back to back for about ``seconds``."""
    counts = [0] * len(sessions)
    deadline = time.perf_counter() + seconds

    def loop(index: int) -> None:
        session, inputs = sessions[index], dict(feed)
        while time.perf_counter() < deadline:
            session.run(None, inputs)
            counts[index] += 1

    workers = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(len(sessions))]
    cpu, start = time.process_time(), time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    items = sum(counts) * batch
    return items / elapsed if elapsed > 0 else 0.0, cpu, items


def _tensorrt_ceiling(served: ServedModel, folder: Path, seconds: float) -> Ceiling:
    """TensorRT's own execution of the plan (trtexec's API) on the GPU; without a GPU or the module, why not."""
    from generator.gpu import current_gpu, detect_gpus, import_tensorrt

    ceiling = Ceiling(served.name, "tensorrt", sessions=1)
    gpu = current_gpu(detect_gpus())
    if gpu is None:
        ceiling.skipped = "no GPU here: TensorRT's own execution of the plan needs one"
        return ceiling
    assert served.config is not None
    plan = folder / (served.config.cc_model_filenames.get(gpu.compute_capability or "")
                     or served.config.default_model_filename or "model.plan")
    try:
        trt = import_tensorrt("tensorrt")
        import torch  # device buffers and a CUDA stream, as the build's TensorRT step uses them

        engine = trt.Runtime(trt.Logger(trt.Logger.ERROR)).deserialize_cuda_engine(plan.read_bytes())
        context, stream = engine.create_execution_context(), torch.cuda.Stream()
        for batch, feed in _feeds(served).items():
            buffers = [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in feed.values()]
            for name, buffer in zip(feed, buffers, strict=True):
                context.set_input_shape(name, tuple(buffer.shape))
                context.set_tensor_address(name, buffer.data_ptr())
            for name in (engine.get_tensor_name(i) for i in range(engine.num_io_tensors)):
                if engine.get_tensor_mode(name) == trt.TensorIOMode.OUTPUT:
                    dtype = torch.from_numpy(np.empty(0, trt.nptype(engine.get_tensor_dtype(name)))).dtype
                    buffers.append(torch.empty(tuple(context.get_tensor_shape(name)), dtype=dtype, device="cuda"))
                    context.set_tensor_address(name, buffers[-1].data_ptr())
            rates = []
            for _ in range(_WINDOWS):
                runs, start = 0, time.perf_counter()
                while time.perf_counter() - start < seconds / _WINDOWS:
                    context.execute_async_v3(stream.cuda_stream)
                    runs += 1
                    if runs % 16 == 0:
                        stream.synchronize()
                stream.synchronize()
                rates.append(runs * batch / (time.perf_counter() - start))
            ceiling.per_batch[batch] = sum(rates) / len(rates)
            if ceiling.per_batch[batch] >= max(ceiling.per_batch.values()):
                ceiling.throughput, ceiling.noise, ceiling.batch_size = ceiling.per_batch[batch], spread(rates), batch
    except Exception as exc:  # no module, no torch CUDA, a plan for another GPU: said, never raised
        ceiling.skipped, ceiling.throughput = f"TensorRT could not run {plan.name}: {one_line(exc)}", None
    return ceiling
