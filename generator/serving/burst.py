"""The smoke ``burst``: many requests from many threads at once, and the model statistics read around them.

All threads send together (dynamic batching only shows when requests queue), statistics read before and after;
``--perf``'s figures come from the one load generator (:func:`perf_figures`).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from generator.client import ModelContract
from generator.errors import GenRepoError
from generator.serving.loadgen import Windows, check_loopback, measure_model
from generator.serving.requests import exception_text, infer, output_problems
from generator.serving.smoke_results import SmokeOptions
from generator.triton.connection import Connection, is_transport_error

__all__ = ["BurstOutcome", "Counts", "burst", "perf_figures", "quiet_statistics", "settled_statistics"]

#: ``smoke --perf``'s measurement: short windows (smoke checks, it does not benchmark), every one kept.
_PERF_WINDOWS = Windows(window_s=0.5, warmup_s=0.25, agree=3, max_windows=3)


@dataclass(slots=True)
class BurstOutcome:
    """What a burst saw: requests that succeeded, failures quoted, a transport error."""

    succeeded: int = 0
    failures: list[str] = field(default_factory=list)
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
                try:
                    result = infer(connection, model, inputs, outputs, datatypes)
                except Exception as exc:
                    with lock:
                        outcome.failures.append(f"request {index}: {exception_text(exc)}")
                        if is_transport_error(exc):
                            outcome.transport_error = outcome.transport_error or exc
                            abort.set()
                    continue
                problems = output_problems(contract, inputs, result)
                with lock:
                    if problems:
                        outcome.failures.append(f"request {index}: {'; '.join(problems)}")
                    else:
                        outcome.succeeded += 1

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
    if any(thread.is_alive() for thread in workers):
        with lock:
            outcome.failures.append("requests still running after the burst's deadline")
    return outcome


def perf_figures(url: str, protocol: str, model: str, contract: ModelContract, inputs: dict[str, np.ndarray],
                 options: SmokeOptions) -> dict[str, Any]:
    """``smoke --perf``'s figures: the one load generator at the burst's concurrency, with the burst's request.

    ``{"skipped": why}`` for a server not on loopback (the generator never loads a remote host).
    """
    try:
        check_loopback(url)
    except GenRepoError as error:
        return {"skipped": error.problems[0].message}
    done = measure_model(url, model, inputs, {t.name: t.datatype for t in contract.inputs},
                         concurrency=min(options.concurrency, options.burst), windows=_PERF_WINDOWS,
                         protocol=protocol, timeout_s=options.timeout_s)

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 3)

    return {"throughput_infer_per_s": round(done.throughput, 3), "throughput_noise": round(done.noise, 4),
            "latency_p50_ms": rounded(done.p50_ms), "latency_p99_ms": rounded(done.p99_ms),
            "latency_mean_ms": rounded(done.mean_ms), "wall_s": round(done.seconds, 4)}
