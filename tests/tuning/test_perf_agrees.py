"""``gen-repo perf`` and ``tune``'s measurement of one config on one server agree within the noise each reports."""

from __future__ import annotations

import pytest

from generator.client import ModelContract
from generator.serving.loadgen import Windows
from generator.serving.perf import PerfRun, run_perf
from generator.tuning.measure import Measurer
from generator.tuning.space import facts_from_repository
from tests.tuning.oracle import NAME, write_oracle_repository

pytestmark = [pytest.mark.triton, pytest.mark.slow]

#: Concurrency of both measurements: enough for the oracle's one instance to form its preferred batches.
LEVEL = 16
#: Beyond the two reported noises: the machine's load drifting between two measurements taken one after the other
#: (tests and other work share this 2-core machine; the oracle's cost is sleeps, so its rate drifts little).
MARGIN = 0.05


def test_perf_and_tunes_measurement_agree_within_their_noise(triton_server_factory, tmp_path):
    repo = write_oracle_repository(tmp_path)
    server = triton_server_factory(repo, model_control="explicit")
    ((facts, served),) = facts_from_repository(repo, (NAME,))
    contract = ModelContract.from_served(served)
    inputs = contract.example_inputs("opt")  # what perf sends: the same request for both
    datatypes = {t.name: t.datatype for t in contract.inputs}
    batch = int(next(iter(inputs.values())).shape[0])
    with Measurer(server.grpc_url, NAME, served.config, inputs, datatypes, batch=batch, levels=[LEVEL],
                  windows=Windows()) as measurer:
        tuned = measurer.measure(facts.baseline)  # loads the generated config, then measures it
        assert tuned.error is None, tuned.error
        report = run_perf(PerfRun(url=server.grpc_url, models=(NAME,), concurrency=(LEVEL,), duration_s=4.0,
                                  engine="loop"))
    (row,) = report.results
    (level,) = tuned.results
    a, b = level.throughput, row["throughput"]
    assert row["errors"] == 0 and row["batch_size"] == batch and a > 0 and b > 0, (level, row)
    allowed = a * level.throughput_noise + b * row["throughput_noise"] + MARGIN * max(a, b)
    assert abs(a - b) <= allowed, (level, row)
