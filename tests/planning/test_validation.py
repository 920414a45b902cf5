"""generator.planning.validation: the same results, in the same order, from one process or several."""

from __future__ import annotations

import json
import os
from pathlib import Path

from generator.planning.validation import PARALLEL_MIN_FILES, validate_files
from generator.planning.workers import usable_cpus


def test_worker_processes_give_the_same_results_in_order(tmp_path: Path, aitune_fixture_dir: Path) -> None:
    files = [str(p) for p in sorted(aitune_fixture_dir.glob("*.json"))]
    broken = json.loads((aitune_fixture_dir / "mlp.graphspec.json").read_text(encoding="utf-8"))
    broken["graph"]["input_spec"]["tensor_data"][0]["dtype"] = 42
    (tmp_path / "broken.json").write_text(json.dumps(broken), encoding="utf-8")
    (tmp_path / "missing.json").unlink(missing_ok=True)
    paths = [*files, str(tmp_path / "broken.json"), str(tmp_path / "missing.json"), *files]
    serial = validate_files(paths, summaries="data", jobs=1)
    parallel = validate_files(paths, summaries="data", jobs=3)
    assert parallel == serial
    # The worker path really ran (a silent fall-back to one process would check everything here).
    assert {r.checked_in for r in serial} == {os.getpid()}
    assert os.getpid() not in {r.checked_in for r in parallel}  # how chunks spread over workers: scheduling
    assert [r.file for r in parallel] == paths
    assert [r.ok for r in parallel].count(False) == 2
    assert len(serial[0].summaries) == len(serial[0].max_batch_sizes) == 1
    assert validate_files(paths, jobs=2)[0].summaries == ()  # summaries only when asked
    encoded = validate_files(paths, summaries="json", jobs=2)
    assert [json.loads(line) for r in encoded for line in r.summaries] == [s for r in serial for s in r.summaries]


def test_from_parallel_min_files_on_workers_check_them(tmp_path: Path, aitune_fixture_dir: Path) -> None:
    spec = str(aitune_fixture_dir / "mlp.graphspec.json")
    few = validate_files([spec] * (PARALLEL_MIN_FILES - 1))
    assert {r.checked_in for r in few} == {os.getpid()}
    many = validate_files([spec] * PARALLEL_MIN_FILES)
    pids = {r.checked_in for r in many}
    if usable_cpus() > 1:  # CI has 2 CPUs; one CPU means one process by design
        assert os.getpid() not in pids, pids
    else:
        assert pids == {os.getpid()}
