"""The smoke ``burst``: many requests from many threads at once, and the model statistics read around them.

Every thread opens its own connection, then all send together (dynamic batching only shows when requests queue);
the statistics are read once they are quiet before the burst and once they count every request after it.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from generator.client import ModelContract
from generator.serving.requests import exception_text, infer, output_problems
from generator.serving.smoke_results import SmokeOptions
from generator.triton.connection import Connection, is_transport_error

__all__ = ["BurstOutcome", "Counts", "burst", "burst_figures", "quiet_statistics", "settled_statistics"]


@dataclass(slots=True)
class BurstOutcome:
    """What a burst saw: requests that succeeded, failures quoted, latencies, its wall time, a transport error."""

    succeeded: int = 0
    failures: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    transport_error: BaseException | None = None


Counts = tuple[int, int]


def quiet_statistics(read: Callable[[], Counts], timeout_s: float) -> Counts:
    """A model's (inference_count, execution_count) from ``read`` once two readings 20 ms apart agree.

    Triton counts a request after it has sent the response (see :func:`settled_statistics`), so earlier requests
    may still be being counted; counted into a burst's, they would inflate it. Polled for at most ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    last = read()
    while time.monotonic() < deadline:
        time.sleep(0.02)
        now = read()
        if now == last:
            break
        last = now
    return last


def settled_statistics(read: Callable[[], Counts], before: Counts, succeeded: int, timeout_s: float) -> Counts:
    """The counts from ``read`` once they include the ``succeeded`` requests sent since ``before``.

    A client that has every response can still read counts without the last requests; a burst's counts read then
    would be short, and the next burst's would include the rest. Polled for at most ``timeout_s``; the last reading
    is returned either way.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        after = read()
        if after[0] - before[0] >= succeeded or time.monotonic() >= deadline:
            return after
        time.sleep(0.01)


def _open_connection(url: str, protocol: str, timeout_s: float) -> Connection:
    """A connection whose channel is open (a liveness call made), closed again when that fails."""
    connection = Connection(url, protocol, timeout_s)
    try:
        connection.live()  # gRPC opens its channel lazily: a burst's first requests would pay for it
    except BaseException:
        connection.close()
        raise
    return connection


def burst(
    url: str, protocol: str, model: str, contract: ModelContract, inputs: dict[str, np.ndarray], options: SmokeOptions
) -> BurstOutcome:
    """Send ``options.burst`` requests from ``options.concurrency`` threads (one connection each).

    Stops handing out requests after the first transport error. Worker threads are daemons and every request has
    the timeout, so the join below is bounded even when the server hangs.
    """
    outcome = BurstOutcome()
    lock = threading.Lock()
    counter = itertools.count()
    abort = threading.Event()
    datatypes = {t.name: t.datatype for t in contract.inputs}
    outputs = [t.name for t in contract.outputs]
    thread_count = max(1, min(options.concurrency, options.burst))
    # Every thread connects first and then all send at once: requests that trickle in while threads still connect
    # (slow on a loaded machine) are each executed alone, and dynamic batching would look broken when it is not.
    start_line = threading.Barrier(thread_count)

    def worker() -> None:
        try:
            connection = _open_connection(url, protocol, options.timeout_s)
        except Exception as exc:
            with lock:
                outcome.failures.append(f"cannot connect: {exception_text(exc)}")
                outcome.transport_error = outcome.transport_error or exc
            abort.set()
            start_line.abort()
            return
        with contextlib.suppress(threading.BrokenBarrierError):
            start_line.wait(options.timeout_s)
        with connection:
            while not abort.is_set():
                with lock:
                    index = next(counter)
                if index >= options.burst:
                    return
                started = time.monotonic()
                try:
                    result = infer(connection, model, inputs, outputs, datatypes)
                except Exception as exc:
                    with lock:
                        outcome.failures.append(f"request {index}: {exception_text(exc)}")
                        if is_transport_error(exc):
                            outcome.transport_error = outcome.transport_error or exc
                            abort.set()
                    continue
                elapsed = time.monotonic() - started
                problems = output_problems(contract, inputs, result)
                with lock:
                    if problems:
                        outcome.failures.append(f"request {index}: {'; '.join(problems)}")
                    else:
                        outcome.succeeded += 1
                        outcome.latencies.append(elapsed)

    workers = [threading.Thread(target=worker, daemon=True, name=f"smoke-burst-{i}") for i in range(thread_count)]
    started = time.monotonic()
    for thread in workers:
        thread.start()
    # Each request is bounded by the timeout; a whole burst by (requests / threads + 2) timeouts.
    deadline = started + options.timeout_s * (math.ceil(options.burst / len(workers)) + 2)
    try:
        for thread in workers:
            thread.join(max(0.0, deadline - time.monotonic()))
    finally:
        abort.set()
    outcome.wall_s = time.monotonic() - started
    if any(thread.is_alive() for thread in workers):
        with lock:
            outcome.failures.append("requests still running after the burst's deadline")
    return outcome


def burst_figures(outcome: BurstOutcome) -> dict[str, float]:
    """Throughput and latency (p50, p99, mean) of a burst's successful requests: ``smoke --perf``'s figures."""
    latencies_ms = np.array(outcome.latencies) * 1000.0
    return {
        "throughput_infer_per_s": round(outcome.succeeded / outcome.wall_s, 3) if outcome.wall_s > 0 else 0.0,
        "latency_p50_ms": round(float(np.percentile(latencies_ms, 50)), 3),
        "latency_p99_ms": round(float(np.percentile(latencies_ms, 99)), 3),
        "latency_mean_ms": round(float(latencies_ms.mean()), 3),
        "wall_s": round(outcome.wall_s, 4),
    }
