"""generator/tuning/loadgen.py: loopback only, and clients shared out over the worker processes.

The load against a real server is exercised by tests/tuning/test_run.py (the oracle) and tests/cli/test_tune.py.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from generator.errors import GenRepoError
from generator.tuning.loadgen import MAX_PROCESSES, LoadGenerator


def test_remote_servers_are_refused_before_any_process_starts():
    with pytest.raises(GenRepoError, match="loopback"):
        LoadGenerator("10.1.2.3:8001", "m", {"x": np.zeros((1, 2), np.float32)}, {"x": "FP32"}, concurrency=2)


@pytest.mark.triton
def test_workers_start_answer_and_end(triton_server_factory, tmp_path):
    """Workers against a live server with no such model: every request is an error, counted, none hangs."""
    (tmp_path / "empty").mkdir()
    server = triton_server_factory(tmp_path / "empty")
    with LoadGenerator(server.grpc_url, "missing", {"x": np.zeros((1, 2), np.float32)}, {"x": "FP32"},
                       concurrency=MAX_PROCESSES + 1) as load:
        assert load.workers == MAX_PROCESSES == load.alive()
        load.start()
        time.sleep(0.5)
        done = load.pause()
        assert done.errors >= 1 and not done.ends and "missing" in (done.first_error or "")
    assert load.alive() == 0
