"""generator.planning.validation: one result per file, in the order given, summaries as asked."""

from __future__ import annotations

import json
from pathlib import Path

from generator.planning.validation import validate_files


def test_results_in_order_with_summaries_as_asked(tmp_path: Path, aitune_fixture_dir: Path) -> None:
    files = [str(p) for p in sorted(aitune_fixture_dir.glob("*.json"))]
    broken = json.loads((aitune_fixture_dir / "mlp.graphspec.json").read_text(encoding="utf-8"))
    broken["graph"]["input_spec"]["tensor_data"][0]["dtype"] = 42
    (tmp_path / "broken.json").write_text(json.dumps(broken), encoding="utf-8")
    paths = [*files, str(tmp_path / "broken.json"), str(tmp_path / "missing.json"), *files]
    data = validate_files(paths, summaries="data")
    assert [r.file for r in data] == paths
    assert [r.ok for r in data].count(False) == 2
    assert len(data[0].summaries) == len(data[0].max_batch_sizes) == 1
    assert validate_files(paths)[0].summaries == ()  # summaries only when asked
    encoded = validate_files(paths, summaries="json")
    assert [json.loads(line) for r in encoded for line in r.summaries] == [s for r in data for s in r.summaries]
