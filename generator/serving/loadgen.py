"""The one load generator of ``perf``, ``tune`` and ``smoke --perf``, and the one way its figures are read.

Closed-loop clients in spawned worker processes on the cores the server does not need (:func:`client_processes`),
loopback only; :func:`measure` reads windows until they agree: :func:`completion_rate`, :func:`spread`,
:func:`percentile`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import math
import multiprocessing
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection as Pipe
from typing import Any

import numpy as np

from generator.errors import GenRepoError, Problem, one_line

__all__ = ["MAX_PROCESSES", "TOLERANCE", "Completions", "LoadGenerator", "Measurement", "Windows", "check_loopback",
           "client_processes", "completion_rate", "measure", "measure_model", "percentile", "spread"]

#: Worker processes at most (beyond 8 a process's threads keep up with any CPU server measured here).
MAX_PROCESSES = 8
#: Seconds a worker may take to answer a command (a start, a pause waits for the requests in flight).
_ANSWER_S = 120.0
#: The relative spread within which a measurement's windows must agree (and the least gain tune acts on): repeats
#: of one config here differed by up to 8% with single 8 s runs.
TOLERANCE = 0.05


@dataclass(frozen=True, slots=True)
class Windows:
    """How one measurement is taken: warmup, window length, how many must agree, at most how many, tolerance.

    ``settle_s`` > 0: windows that do not agree are taken again twice as long, until they agree or the measurement
    has taken ``settle_s`` seconds (0: one round of windows, as perf takes them).
    """

    window_s: float = 1.0
    warmup_s: float = 0.5
    agree: int = 3
    max_windows: int = 8
    tolerance: float = TOLERANCE
    settle_s: float = 0.0

    @property
    def least_s(self) -> float:
        """The shortest measurement that can settle: the warmup and ``agree`` windows."""
        return self.warmup_s + self.agree * self.window_s


@dataclass(slots=True)
class Measurement:
    """Inferences/s with their relative noise, latency (ms) and the requests of the windows kept."""

    throughput: float = 0.0
    noise: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None
    mean_ms: float | None = None
    requests: int = 0
    seconds: float = 0.0
    windows: int = 0
    errors: int = 0
    first_error: str | None = None
    #: Whether the windows kept agree within the tolerance (False: the figure is *unsettled*, its noise above it).
    settled: bool = False
    window_s: float = 0.0


def client_processes(concurrency: int, server_cores: int, cores: int | None = None) -> int:
    """Worker processes for ``concurrency`` clients beside a server whose instances need ``server_cores`` cores.

    The cores this process may use (its affinity) less the server's, at least 1 (one process's threads still drive
    the load, more than the cores left only take CPU from the server measured), at most :data:`MAX_PROCESSES` and
    never more than the clients: on 2 cores beside a 2-instance server, 1.
    """
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(concurrency, MAX_PROCESSES, cores - max(server_cores, 0)))


def check_loopback(url: str) -> None:
    """Refuse a server that is not on this machine's loopback (the load must never hit a remote host)."""
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


@dataclass(slots=True)
class Completions:
    """Requests completed in a span: end times (monotonic s), their clients, latencies (ms), errors, the first error."""

    ends: list[float] = field(default_factory=list)
    clients: list[int] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str | None = None

    def extend(self, other: Completions) -> None:
        """Add another worker's completions."""
        self.ends += other.ends
        self.clients += other.clients
        self.latencies_ms += other.latencies_ms
        self.errors += other.errors
        self.first_error = self.first_error or other.first_error


def _worker(pipe: Pipe, url: str, protocol: str, model: str, inputs: Mapping[str, np.ndarray[Any, Any]],
            datatypes: Mapping[str, str], first_client: int, threads: int, timeout_s: float) -> None:
    """A worker process: ``threads`` closed-loop clients, driven by commands on ``pipe`` until ``exit``.

    Clients are numbered from ``first_client`` (unique across workers), so rates can be taken per client. A start
    may carry a request budget (None: unbounded); once it is spent the clients wait.
    """
    import signal

    from generator.client import to_infer_inputs
    from generator.triton.connection import Connection

    # Ctrl-C reaches the whole process group: the parent ends its workers itself (LoadGenerator.close).
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    lock = threading.Lock()
    running = threading.Event()
    stop = threading.Event()
    in_flight = [0]
    budget: list[int | None] = [None]
    taken = Completions()

    def client(index: int) -> None:
        connection = Connection(url, protocol, timeout_s)
        infer_inputs = to_infer_inputs(inputs, protocol=protocol, datatypes=datatypes)
        try:
            while not stop.is_set():
                if not running.wait(0.05):
                    continue
                with lock:
                    spent = budget[0] is not None and budget[0] <= 0
                    if not spent:
                        in_flight[0] += 1
                        budget[0] = None if budget[0] is None else budget[0] - 1
                if spent:
                    time.sleep(0.01)
                    continue
                begin = time.monotonic()
                try:
                    connection.send(model, infer_inputs)
                except Exception as error:  # tritonclient raises InferenceServerException and transport errors
                    with lock:
                        in_flight[0] -= 1
                        taken.errors += 1
                        taken.first_error = taken.first_error or one_line(error)
                    time.sleep(0.01)  # a model being reloaded refuses at once: do not spin
                    continue
                end = time.monotonic()
                with lock:
                    in_flight[0] -= 1
                    taken.ends.append(end)
                    taken.clients.append(index)
                    taken.latencies_ms.append((end - begin) * 1000.0)
        finally:
            connection.close()

    pool = [threading.Thread(target=client, args=(first_client + k,), daemon=True) for k in range(threads)]
    for thread in pool:
        thread.start()

    def take() -> Completions:
        nonlocal taken
        with lock:
            out, taken = taken, Completions()
        return out

    try:
        while True:
            command, argument = pipe.recv()
            if command == "start":
                take()
                with lock:
                    budget[0] = argument
                running.set()
                pipe.send("started")
            elif command == "take":
                pipe.send(take())
            elif command == "pause":
                running.clear()
                # Requests in flight finish within their timeout; what they complete is part of this span.
                deadline = time.monotonic() + timeout_s
                while time.monotonic() < deadline:
                    time.sleep(0.01)
                    with lock:
                        if in_flight[0] == 0:
                            break
                pipe.send(take())
            else:
                break
    finally:
        stop.set()
        running.clear()
        for thread in pool:
            thread.join(timeout=timeout_s + 1)


class LoadGenerator:
    """``concurrency`` closed-loop clients of ``model`` in worker processes; a context manager that ends them.

    >>> with LoadGenerator(url, "m", inputs, datatypes, concurrency=32) as load:   # doctest: +SKIP
    ...     load.start(); time.sleep(1); done = load.take(); load.pause()
    """

    def __init__(self, url: str, model: str, inputs: Mapping[str, np.ndarray[Any, Any]],
                 datatypes: Mapping[str, str], *, concurrency: int, protocol: str = "grpc",
                 timeout_s: float = 30.0, server_cores: int = 1) -> None:
        check_loopback(url)
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.concurrency = concurrency
        self._timeout_s = timeout_s
        processes = client_processes(concurrency, server_cores)
        shares = [concurrency // processes + (1 if k < concurrency % processes else 0) for k in range(processes)]
        self._shares = shares
        context = multiprocessing.get_context("spawn")
        self._pipes: list[Pipe] = []
        self._processes: list[Any] = []
        for k, share in enumerate(shares):
            parent, child = context.Pipe()
            process = context.Process(target=_worker, args=(child, url, protocol, model, dict(inputs), dict(datatypes),
                                                            sum(shares[:k]), share, timeout_s), daemon=True)
            process.start()
            child.close()
            self._pipes.append(parent)
            self._processes.append(process)

    def _ask(self, command: str, arguments: Sequence[Any] | None = None) -> list[Any]:
        for k, pipe in enumerate(self._pipes):
            pipe.send((command, None if arguments is None else arguments[k]))
        answers = []
        for pipe, process in zip(self._pipes, self._processes, strict=True):
            if not pipe.poll(_ANSWER_S + self._timeout_s):
                raise GenRepoError([Problem("<load>", "", f"load worker {process.pid} did not answer {command!r}")])
            answers.append(pipe.recv())
        return answers

    def start(self, budget: int | None = None) -> None:
        """Every client starts sending, at most ``budget`` requests in all (what completed before is dropped)."""
        shares = None
        if budget is not None:  # in proportion to each worker's clients, the rest to the first workers
            shares = [budget * share // self.concurrency for share in self._shares]
            for k in range(budget - sum(shares)):
                shares[k] += 1
        self._ask("start", shares)

    def take(self) -> Completions:
        """What every client completed since the last start, take or pause."""
        out = Completions()
        for part in self._ask("take"):
            out.extend(part)
        return out

    def pause(self) -> Completions:
        """Stop sending, wait for the requests in flight; what completed since the last take."""
        out = Completions()
        for part in self._ask("pause"):
            out.extend(part)
        return out

    def close(self) -> None:
        """End the workers (asked first, then terminated; never left behind)."""
        for pipe in self._pipes:
            with contextlib.suppress(OSError, ValueError):
                pipe.send(("exit", None))
        for process in self._processes:
            process.join(timeout=self._timeout_s + 2)
            if process.is_alive():
                process.terminate()
                process.join(timeout=5)
        for pipe in self._pipes:
            pipe.close()

    def __enter__(self) -> LoadGenerator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile: the smallest value with at least ``q``% of the values at or below it (None: none)."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def completion_rate(done: Completions, elapsed: float) -> float:
    """Requests per second of closed-loop clients: the sum of each client's rate over its own completions.

    A client completing ``k`` requests between its first and last completion ran ``k - 1`` whole cycles in that
    span; summing those rates does not depend on where the window cut a batch (a plain count over the window
    jumps by a whole batch when one completes just inside or outside it). Where a client completed fewer than 2
    requests (requests longer than the window) the plain count over ``elapsed`` is the rate.
    """
    firsts: dict[int, float] = {}
    lasts: dict[int, float] = {}
    counts: dict[int, int] = {}
    for client, end in zip(done.clients, done.ends, strict=True):
        firsts[client] = min(firsts.get(client, end), end)
        lasts[client] = max(lasts.get(client, end), end)
        counts[client] = counts.get(client, 0) + 1
    if not counts or any(n < 2 or lasts[c] <= firsts[c] for c, n in counts.items()):
        return len(done.ends) / elapsed if elapsed > 0 else 0.0
    return sum((n - 1) / (lasts[c] - firsts[c]) for c, n in counts.items())


def spread(values: Sequence[float]) -> float:
    """Relative spread: (max - min) / mean (inf for a zero mean)."""
    mean = sum(values) / len(values)
    return (max(values) - min(values)) / mean if mean > 0 else math.inf


def measure(load: LoadGenerator, windows: Windows, *, batch: int = 1, max_requests: int | None = None) -> Measurement:
    """Measure ``load`` in windows after a warmup, until the last ``agree`` agree within the tolerance.

    A round stops early when its windows agree or ``max_requests`` were sent, else runs ``max_windows``. With
    ``settle_s``, a round that did not agree is followed by one of windows twice as long while time allows. Throughput
    (``batch`` items per request) is the mean of the last round's kept windows, the noise their spread.
    """
    w = windows
    load.start()
    time.sleep(w.warmup_s)
    load.start(max_requests)  # what the warmup completed is dropped; the budget counts from here
    result = Measurement()
    ends_at = time.monotonic() - w.warmup_s + w.settle_s
    length, sent = w.window_s, 0
    while True:
        left = None if max_requests is None else max_requests - sent
        rates, spans, agreed = _round(load, w, length, batch, ends_at, left, result)
        sent += sum(len(done.ends) + done.errors for done, _ in spans)
        spent = max_requests is not None and sent >= max_requests
        if agreed or spent or w.settle_s <= 0 or time.monotonic() + w.agree * 2 * length > ends_at:
            break
        length *= 2
    load.pause()
    # Agreeing windows: the last ``agree``; otherwise every window of the round, and their larger spread is the noise.
    keep = w.agree if agreed else len(rates)
    kept = rates[-keep:]
    latencies = [v for done, _ in spans[-keep:] for v in done.latencies_ms]
    result.throughput = sum(kept) / len(kept)
    result.noise = spread(kept) if result.throughput > 0 else 0.0
    result.settled = agreed
    result.window_s = length
    result.p50_ms, result.p99_ms = percentile(latencies, 50), percentile(latencies, 99)
    result.mean_ms = sum(latencies) / len(latencies) if latencies else None
    result.requests = len(latencies)
    result.seconds = sum(seconds for _, seconds in spans[-keep:])
    return result


def _round(load: LoadGenerator, w: Windows, length: float, batch: int, ends_at: float, left: int | None,
           result: Measurement) -> tuple[list[float], list[tuple[Completions, float]], bool]:
    """One round of windows of ``length`` s: (rates, spans, whether the last ``agree`` agree); counts into ``result``.

    It ends early once ``left`` requests were sent, or when a measurement that settles runs out of time.
    """
    rates: list[float] = []
    spans: list[tuple[Completions, float]] = []
    sent = 0
    began = time.monotonic()
    if result.windows:
        load.take()  # a later round starts now
    while len(rates) < w.max_windows:
        time.sleep(length)
        done = load.take()
        now = time.monotonic()
        rates.append(completion_rate(done, now - began) * batch)
        spans.append((done, now - began))
        began = now
        result.windows += 1
        result.errors += done.errors
        result.first_error = result.first_error or done.first_error
        sent += len(done.ends) + done.errors
        if len(rates) >= w.agree and spread(rates[-w.agree:]) <= w.tolerance:
            return rates, spans, True
        if left is not None and sent >= left:
            break
        if w.settle_s > 0 and now + length > ends_at and len(rates) >= w.agree:
            break
    return rates, spans, False


def measure_model(url: str, model: str, inputs: Mapping[str, np.ndarray[Any, Any]], datatypes: Mapping[str, str], *,
                  concurrency: int, windows: Windows, batch: int = 1, protocol: str = "grpc", timeout_s: float = 30.0,
                  max_requests: int | None = None, server_cores: int = 1) -> Measurement:
    """:func:`measure` with a generator of its own, ended afterwards."""
    with LoadGenerator(url, model, inputs, datatypes, concurrency=concurrency, protocol=protocol,
                       timeout_s=timeout_s, server_cores=server_cores) as load:
        return measure(load, windows, batch=batch, max_requests=max_requests)
