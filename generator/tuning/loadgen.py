"""The built-in load for tuning: closed-loop clients spread over separate processes, so the client is not the limit.

Threads share one GIL and can cap the rate they measure, so clients run in spawned worker processes (gRPC's threads
do not survive a fork) and report each completion's time and latency. Loopback servers only.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from multiprocessing.connection import Connection as Pipe
from typing import Any

import numpy as np

from generator.errors import GenRepoError, Problem, one_line
from generator.serving.load import check_loopback

__all__ = ["MAX_PROCESSES", "Completions", "LoadGenerator"]

#: Worker processes at most (more than the cores only adds scheduling; at least 2 so one slow process cannot stall
#: the whole load).
MAX_PROCESSES = max(2, min(8, os.cpu_count() or 2))
#: Seconds a worker may take to answer a command (a start, a pause waits for the requests in flight).
_ANSWER_S = 120.0


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


def _worker(pipe: Pipe, url: str, model: str, inputs: Mapping[str, np.ndarray[Any, Any]],
            datatypes: Mapping[str, str], first_client: int, threads: int, timeout_s: float) -> None:
    """A worker process: ``threads`` closed-loop clients, driven by commands on ``pipe`` until ``exit``.

    Clients are numbered from ``first_client`` (unique across workers), so rates can be taken per client.
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
    taken = Completions()

    def client(index: int) -> None:
        connection = Connection(url, "grpc", timeout_s)
        infer_inputs = to_infer_inputs(inputs, protocol="grpc", datatypes=datatypes)
        try:
            while not stop.is_set():
                if not running.wait(0.05):
                    continue
                with lock:
                    in_flight[0] += 1
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
            command = pipe.recv()
            if command == "start":
                take()
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
                 datatypes: Mapping[str, str], *, concurrency: int, timeout_s: float = 30.0) -> None:
        check_loopback(url)
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.concurrency = concurrency
        self._timeout_s = timeout_s
        processes = min(MAX_PROCESSES, concurrency)
        shares = [concurrency // processes + (1 if k < concurrency % processes else 0) for k in range(processes)]
        context = multiprocessing.get_context("spawn")
        self._pipes: list[Pipe] = []
        self._processes: list[Any] = []
        for k, share in enumerate(shares):
            parent, child = context.Pipe()
            process = context.Process(target=_worker, args=(child, url, model, dict(inputs), dict(datatypes),
                                                            sum(shares[:k]), share, timeout_s), daemon=True)
            process.start()
            child.close()
            self._pipes.append(parent)
            self._processes.append(process)

    @property
    def workers(self) -> int:
        """Worker processes started."""
        return len(self._processes)

    def alive(self) -> int:
        """Worker processes still running (0 after :meth:`close`)."""
        return sum(1 for process in self._processes if process.is_alive())

    def _ask(self, command: str) -> list[Any]:
        for pipe in self._pipes:
            pipe.send(command)
        answers = []
        for pipe, process in zip(self._pipes, self._processes, strict=True):
            if not pipe.poll(_ANSWER_S + self._timeout_s):
                raise GenRepoError([Problem("<load>", "", f"load worker {process.pid} did not answer {command!r}")])
            answers.append(pipe.recv())
        return answers

    def start(self) -> None:
        """Every client starts sending (what completed before is dropped)."""
        self._ask("start")

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
                pipe.send("exit")
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
