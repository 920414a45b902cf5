"""The oracle: a python-backend model whose cost is known by construction, and the best throughput it allows.

Each execution of ``n`` items sleeps ``HOST_MS`` on its own instance (pre/post-processing), then takes the next
``FIXED_MS + PER_ITEM_MS * n`` of one device every instance shares (a timeline in a file, under a lock) and sleeps
until that slot ends. One execution at a time per
instance (the Python backend runs one ``execute`` per instance process). So no configuration can beat the device
serving full batches back to back: ``MAX_BATCH / (FIXED_MS + PER_ITEM_MS * MAX_BATCH)`` items per millisecond, and
that bound is reached exactly when (a) batches are full and (b) a second instance overlaps its host part with the
other's device part (one instance leaves the device idle ``HOST_MS`` of every cycle). The generated config starts
away from it: one instance, preferred batch size 4 (Triton forms batches of 4 with it when the queue delay is 0).

The noisy oracle (:func:`write_noisy_oracle_repository`) has no such optimum: its device costs per item alone, so
every setting with two or more instances serves the same ``1 / NOISY_PER_ITEM_MS`` items per ms, and each
execution's device time is scaled by a factor drawn uniformly from ``1 +- NOISY_AMPLITUDE``: any gain measured over
its generated setting (two instances) is noise.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

FIXED_MS = 32.0
PER_ITEM_MS = 2.0
HOST_MS = 16.0
MAX_BATCH = 16
PREFERRED = (4,)
NAME = "oracle"
NOISY_PER_ITEM_MS = 4.0
NOISY_HOST_MS = 2.0
NOISY_AMPLITUDE = 0.9


def noisy_throughput() -> float:
    """Items per second of the noisy oracle with two or more instances, whatever its batches: the device's rate."""
    return 1000.0 / NOISY_PER_ITEM_MS


def bound_throughput() -> float:
    """Items per second of the device serving full batches back to back: the best any setting can reach."""
    return MAX_BATCH / (FIXED_MS + PER_ITEM_MS * MAX_BATCH) * 1000.0


def reaches_bound(instance_count: int) -> bool:
    """Whether arithmetic lets a setting reach the bound: one instance leaves the device idle ``HOST_MS`` of every
    ``HOST_MS + device`` cycle (at most ``device / (HOST_MS + device)`` of the bound); two or more overlap one's host
    part with another's device part, since ``HOST_MS`` is shorter than a full batch's device time."""
    return instance_count >= 2 and HOST_MS <= FIXED_MS + PER_ITEM_MS * MAX_BATCH


def one_instance_throughput() -> float:
    """The most one instance can reach: full batches, a cycle of HOST_MS plus the device time."""
    return MAX_BATCH / (HOST_MS + FIXED_MS + PER_ITEM_MS * MAX_BATCH) * 1000.0


def expected_throughput(instance_count: int, preferred_batch_size: tuple[int, ...], max_queue_delay_us: int) -> float:
    """Items per second arithmetic gives a setting at a concurrency that keeps the queue full (the test's 64): with no
    queue delay Triton forms batches of the largest preferred size, with a delay (or no preferred size) full batches
    (measured: preferred [4] serves 68/s on one instance at delay 0, 191/s at 100 us, as full batches would); the
    device serves them back to back once a second instance overlaps the host part (:func:`reaches_bound`); one
    instance adds ``HOST_MS`` per batch."""
    batch = max(preferred_batch_size) if preferred_batch_size and max_queue_delay_us == 0 else MAX_BATCH
    device_ms = FIXED_MS + PER_ITEM_MS * batch
    cycle_ms = device_ms if instance_count >= 2 and device_ms >= HOST_MS else HOST_MS + device_ms
    return batch / cycle_ms * 1000.0


MODEL_PY = textwrap.dedent('''
    import fcntl
    import json
    import random
    import time

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            parameters = json.loads(args["model_config"]).get("parameters", {})
            self.device_path = parameters["device"]["string_value"]
            self.costs = json.loads(parameters["costs_ms"]["string_value"])

        def _reserve(self, seconds):
            # The device's timeline lives in one file: when it is next free (CLOCK_MONOTONIC, one clock for every
            # process). An execution takes the next slot and sleeps until its end, so the device's busy time is
            # exact however late a process wakes up.
            with open(self.device_path, "r+") as device:
                fcntl.flock(device, fcntl.LOCK_EX)
                try:
                    free_at = float(device.read() or 0.0)
                    end = max(time.monotonic(), free_at) + seconds
                    device.seek(0)
                    device.write(repr(end))
                    device.truncate()
                finally:
                    fcntl.flock(device, fcntl.LOCK_UN)
            return end

        def execute(self, requests):
            arrays = [pb_utils.get_input_tensor_by_name(r, "X").as_numpy() for r in requests]
            items = sum(a.shape[0] for a in arrays)
            time.sleep(self.costs["host"] / 1000.0)
            factor = 1.0 + self.costs["noise"] * (2.0 * random.random() - 1.0)  # the known random amount
            end = self._reserve(factor * (self.costs["fixed"] + self.costs["per_item"] * items) / 1000.0)
            time.sleep(max(0.0, end - time.monotonic()))
            return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", (a * 2).astype(np.float32))]) for a in arrays]
''')


def write_oracle_repository(root: Path, *, host_ms: float = HOST_MS, fixed_ms: float = FIXED_MS,
                            per_item_ms: float = PER_ITEM_MS, noise: float = 0.0, instances: int = 1) -> Path:
    """The repository with the oracle model (config.pbtxt as gen-repo would generate it untuned); its folder."""
    repo = root / "oracle_repository"
    version = repo / NAME / "1"
    version.mkdir(parents=True)
    (version / "model.py").write_text(MODEL_PY)
    device = root / "device.timeline"
    device.write_text("")
    costs = (f'{{\\"host\\": {host_ms}, \\"fixed\\": {fixed_ms}, \\"per_item\\": {per_item_ms}, '
             f'\\"noise\\": {noise}}}')
    (repo / NAME / "config.pbtxt").write_text(textwrap.dedent(f'''
        name: "{NAME}"
        backend: "python"
        max_batch_size: {MAX_BATCH}
        input {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }}
        output {{ name: "Y" data_type: TYPE_FP32 dims: [ 1 ] }}
        instance_group {{ kind: KIND_CPU count: {instances} }}
        dynamic_batching {{ preferred_batch_size: [ {", ".join(map(str, PREFERRED))} ]
                            max_queue_delay_microseconds: 100 }}
        parameters {{ key: "device" value {{ string_value: "{device}" }} }}
        parameters {{ key: "costs_ms" value {{ string_value: "{costs}" }} }}
    ''').lstrip())
    return repo


def write_noisy_oracle_repository(root: Path) -> Path:
    """The noisy oracle: two instances, a device costing ``NOISY_PER_ITEM_MS`` per item times a random factor."""
    return write_oracle_repository(root, host_ms=NOISY_HOST_MS, fixed_ms=0.0, per_item_ms=NOISY_PER_ITEM_MS,
                                   noise=NOISY_AMPLITUDE, instances=2)
