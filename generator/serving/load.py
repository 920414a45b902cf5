"""``gen-repo perf``'s built-in load: one model at one concurrency, with a bounded loop of tritonclient requests.

Threads, one connection each; bounded by request count and by time, every request by its timeout; loopback servers
only (:func:`check_loopback`). Throughput and p50/p99 latency of the requests that succeeded.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from generator.errors import GenRepoError, Problem
from generator.triton.connection import Connection

__all__ = ["LoadResult", "check_loopback", "run_load"]


@dataclass(slots=True)
class LoadResult:
    """One measurement: a model at one concurrency, with latencies of the successful requests."""

    model: str
    concurrency: int
    batch_size: int
    shape: str
    engine: str
    requests: int = 0
    errors: int = 0
    seconds: float = 0.0
    throughput: float = 0.0  # inferences (batch items) per second
    requests_per_s: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None
    mean_ms: float | None = None
    first_error: str | None = None
    latencies_ms: list[float] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``gen-repo perf --json``), latencies summarised."""
        return {
            "model": self.model,
            "concurrency": self.concurrency,
            "batch_size": self.batch_size,
            "shape": self.shape,
            "engine": self.engine,
            "requests": self.requests,
            "errors": self.errors,
            "seconds": round(self.seconds, 3),
            "throughput": round(self.throughput, 2),
            "requests_per_s": round(self.requests_per_s, 2),
            "p50_ms": None if self.p50_ms is None else round(self.p50_ms, 3),
            "p99_ms": None if self.p99_ms is None else round(self.p99_ms, 3),
            "mean_ms": None if self.mean_ms is None else round(self.mean_ms, 3),
            "first_error": self.first_error,
        }


def check_loopback(url: str) -> None:
    """Refuse a server that is not on this machine's loopback (the load loop must never hit a remote host)."""
    host = url.rsplit(":", 1)[0] if url.count(":") == 1 or url.startswith("[") else url
    host = host.strip("[]")
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise GenRepoError([Problem(url, "", "the load loop only targets loopback servers (127.0.0.1, ::1, localhost)")])


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def run_load(
    url: str,
    model: str,
    inputs: Mapping[str, np.ndarray[Any, Any]],
    *,
    concurrency: int = 1,
    duration_s: float = 5.0,
    max_requests: int = 100_000,
    protocol: str = "grpc",
    batch_size: int = 1,
    shape: str = "opt",
    request_timeout_s: float = 30.0,
    datatypes: Mapping[str, str] | None = None,
) -> LoadResult:
    """Send ``inputs`` to ``model`` from ``concurrency`` threads; report throughput and latency percentiles.

    The loop stops when ``duration_s`` passed or ``max_requests`` were sent, whichever comes first. Throughput counts
    batch items per second.

    Each thread has its own client and sends one warmup request before the clock starts. Errors are counted, not
    raised; the first one is kept for the report.
    """
    check_loopback(url)
    if concurrency < 1 or duration_s <= 0 or max_requests < 1:
        raise ValueError("concurrency and max_requests must be >= 1 and duration_s > 0")
    from generator.client import to_infer_inputs

    result = LoadResult(model, concurrency, batch_size, shape, f"loop-{protocol}")
    lock = threading.Lock()
    budget = [max_requests]
    start_barrier = threading.Barrier(concurrency + 1)
    stop = threading.Event()
    per_thread: list[list[float]] = [[] for _ in range(concurrency)]
    errors: list[str] = []
    error_count = [0]

    def take() -> bool:
        with lock:
            if budget[0] <= 0:
                return False
            budget[0] -= 1
            return True

    def worker(index: int) -> None:
        connection = Connection(url, protocol, request_timeout_s)
        infer_inputs = to_infer_inputs(inputs, protocol=protocol, datatypes=datatypes)
        try:
            try:
                connection.send(model, infer_inputs)
            except Exception as error:  # the warmup failure is the measurement's first error
                with lock:
                    errors.append(str(error).splitlines()[0] if str(error) else type(error).__name__)
            start_barrier.wait()
            latencies = per_thread[index]
            while not stop.is_set() and take():
                begin = time.perf_counter()
                try:
                    connection.send(model, infer_inputs)
                except Exception as error:  # tritonclient raises InferenceServerException and transport errors
                    with lock:
                        error_count[0] += 1
                        if not errors:
                            errors.append(str(error).splitlines()[0] if str(error) else type(error).__name__)
                    continue
                latencies.append((time.perf_counter() - begin) * 1000.0)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(concurrency)]
    for thread in threads:
        thread.start()
    try:
        start_barrier.wait(timeout=request_timeout_s + 30)
    except threading.BrokenBarrierError:
        stop.set()
        raise GenRepoError([Problem(url, "", f"load threads for {model!r} did not start")]) from None
    began = time.perf_counter()
    deadline = began + duration_s
    while time.perf_counter() < deadline and any(t.is_alive() for t in threads):
        time.sleep(min(0.05, max(0.0, deadline - time.perf_counter())))
    stop.set()
    for thread in threads:
        thread.join(timeout=request_timeout_s + 5)
    elapsed = time.perf_counter() - began
    latencies = sorted(v for values in per_thread for v in values)
    result.requests = len(latencies)
    result.errors = error_count[0]
    result.seconds = elapsed
    result.first_error = errors[0] if errors else None
    result.latencies_ms = latencies
    if latencies and elapsed > 0:
        result.requests_per_s = len(latencies) / elapsed
        result.throughput = result.requests_per_s * batch_size
        result.p50_ms = _percentile(latencies, 50)
        result.p99_ms = _percentile(latencies, 99)
        result.mean_ms = sum(latencies) / len(latencies)
    return result
