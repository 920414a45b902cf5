"""generator/serving/loadgen.py: loopback only, clients shared out over the worker processes, the window arithmetic
(rates per client, spread, nearest-rank percentiles), a request budget, and perf agreeing with tune's measurement."""

from __future__ import annotations

import math
import multiprocessing
import time

import numpy as np
import pytest

from generator.errors import GenRepoError
from generator.serving.loadgen import (
    MAX_PROCESSES,
    Completions,
    LoadGenerator,
    client_processes,
    completion_rate,
    percentile,
    spread,
)


def test_remote_servers_are_refused_before_any_process_starts():
    with pytest.raises(GenRepoError, match="loopback"):
        LoadGenerator("10.1.2.3:8001", "m", {"x": np.zeros((1, 2), np.float32)}, {"x": "FP32"}, concurrency=2)


@pytest.mark.triton
def test_workers_start_answer_and_end(triton_server_factory, tmp_path):
    """Workers against a live server with no such model: every request is an error, counted, none hangs."""
    (tmp_path / "empty").mkdir()
    server = triton_server_factory(tmp_path / "empty")
    with LoadGenerator(server.grpc_url, "missing", {"x": np.zeros((1, 2), np.float32)}, {"x": "FP32"},
                       concurrency=MAX_PROCESSES + 1, server_cores=1) as load:
        assert len(multiprocessing.active_children()) == client_processes(MAX_PROCESSES + 1, 1)
        load.start()
        time.sleep(0.5)
        done = load.pause()
        assert done.errors >= 1 and not done.ends and "missing" in (done.first_error or "")
        load.start(budget=5)  # shared out over the workers: exactly 5 requests in all, then every client waits
        time.sleep(0.5)
        assert load.pause().errors == 5
    assert not multiprocessing.active_children()


def test_client_processes_leave_the_servers_cores_to_it():
    # The cores less the server's instances, at least 1, at most MAX_PROCESSES and the clients.
    assert client_processes(64, 2, cores=2) == 1 and client_processes(64, 4, cores=2) == 1
    assert client_processes(64, 1, cores=2) == 1 and client_processes(64, 2, cores=16) == 8
    assert client_processes(3, 1, cores=16) == 3 and client_processes(64, 4, cores=8) == 4


def _batches(clients: int, period: float, start: float, stop: float) -> Completions:
    """Every client completing once per ``period`` s, all at once (one batch), from ``start`` to ``stop``."""
    done = Completions()
    t = start
    while t <= stop:
        for client in range(clients):
            done.ends.append(t)
            done.clients.append(client)
            done.latencies_ms.append(period * 1000)
        t += period
    return done


@pytest.mark.parametrize("offset", [0.0, 0.01, 0.049, 0.05, 0.099])
def test_a_window_cutting_a_batch_does_not_change_the_rate(offset):
    # 16 clients served in one batch every 0.1 s: 160 requests/s wherever the 1 s window starts. A plain count over
    # the window gives 160 or 176 depending on where it cuts; the per-client rate is 160 every time.
    done = _batches(16, 0.1, offset, offset + 1.0)
    assert completion_rate(done, 1.0) == pytest.approx(160.0)


def test_clients_slower_than_the_window_fall_back_to_the_count():
    done = Completions(ends=[0.5, 0.6], clients=[0, 1], latencies_ms=[800.0, 900.0])
    assert completion_rate(done, 2.0) == 1.0
    assert completion_rate(Completions(), 1.0) == 0.0


def test_spread_and_percentiles():
    assert spread([95.0, 100.0, 105.0]) == pytest.approx(0.1)
    assert math.isinf(spread([0.0, 0.0]))
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 99), percentile([], 99)) == (50.0, 99.0, None)
