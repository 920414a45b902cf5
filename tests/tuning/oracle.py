"""The oracle: a python-backend model whose cost is known by construction, and the best throughput it allows.

Each execution of ``n`` items sleeps ``HOST_MS`` on its own instance (pre/post-processing), then holds one lock that
every instance shares (one device) while it sleeps ``FIXED_MS + PER_ITEM_MS * n``. One execution at a time per
instance (the Python backend runs one ``execute`` per instance process). So no configuration can beat the device
serving full batches back to back: ``MAX_BATCH / (FIXED_MS + PER_ITEM_MS * MAX_BATCH)`` items per millisecond, and
that bound is reached exactly when (a) batches are full, which a preferred batch size below the max prevents, and
(b) a second instance overlaps its host part with the other's device part (one instance leaves the device idle
``HOST_MS`` of every cycle). The generated config starts far from it: one instance, preferred batch size 4.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

FIXED_MS = 16.0
PER_ITEM_MS = 1.0
HOST_MS = 16.0
MAX_BATCH = 16
PREFERRED = (4,)
NAME = "oracle"


def bound_throughput() -> float:
    """Items per second of the device serving full batches back to back: the best any setting can reach."""
    return MAX_BATCH / (FIXED_MS + PER_ITEM_MS * MAX_BATCH) * 1000.0


def setting_reaches_bound(instance_count: int, preferred: tuple[int, ...]) -> bool:
    """Whether arithmetic says a setting reaches the bound: full batches (no preferred size below the max) and an
    instance to overlap the host part; with one instance the cycle is HOST + device, with small batches each
    execution pays FIXED_MS for fewer items."""
    return instance_count >= 2 and all(size == MAX_BATCH for size in preferred)


def expected_throughput(instance_count: int, preferred: tuple[int, ...]) -> float:
    """Items per second by arithmetic with every client's request queued (concurrency 2 x MAX_BATCH)."""
    batch = max(preferred) if preferred else MAX_BATCH
    device = FIXED_MS + PER_ITEM_MS * batch
    cycle = device if instance_count >= 2 and device * (instance_count - 1) >= HOST_MS else HOST_MS + device
    return batch / cycle * 1000.0


MODEL_PY = textwrap.dedent('''
    import fcntl
    import json
    import time

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            parameters = json.loads(args["model_config"]).get("parameters", {})
            self.lock_path = parameters["device_lock"]["string_value"]
            self.costs = json.loads(parameters["costs_ms"]["string_value"])

        def execute(self, requests):
            arrays = [pb_utils.get_input_tensor_by_name(r, "X").as_numpy() for r in requests]
            items = sum(a.shape[0] for a in arrays)
            time.sleep(self.costs["host"] / 1000.0)
            with open(self.lock_path, "a") as device:
                fcntl.flock(device, fcntl.LOCK_EX)
                try:
                    time.sleep((self.costs["fixed"] + self.costs["per_item"] * items) / 1000.0)
                finally:
                    fcntl.flock(device, fcntl.LOCK_UN)
            return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", (a * 2).astype(np.float32))]) for a in arrays]
''')


def write_oracle_repository(root: Path) -> Path:
    """The repository with the oracle model (config.pbtxt as gen-repo would generate it untuned); its folder."""
    repo = root / "oracle_repository"
    version = repo / NAME / "1"
    version.mkdir(parents=True)
    (version / "model.py").write_text(MODEL_PY)
    lock = root / "device.lock"
    lock.write_text("")
    costs = f'{{\\"host\\": {HOST_MS}, \\"fixed\\": {FIXED_MS}, \\"per_item\\": {PER_ITEM_MS}}}'
    (repo / NAME / "config.pbtxt").write_text(textwrap.dedent(f'''
        name: "{NAME}"
        backend: "python"
        max_batch_size: {MAX_BATCH}
        input {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }}
        output {{ name: "Y" data_type: TYPE_FP32 dims: [ 1 ] }}
        instance_group {{ kind: KIND_CPU count: 1 }}
        dynamic_batching {{ preferred_batch_size: [ {", ".join(map(str, PREFERRED))} ]
                            max_queue_delay_microseconds: 100 }}
        parameters {{ key: "device_lock" value {{ string_value: "{lock}" }} }}
        parameters {{ key: "costs_ms" value {{ string_value: "{costs}" }} }}
    ''').lstrip())
    return repo
