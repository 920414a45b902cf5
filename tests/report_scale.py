"""Report inputs at scale for ``gen-repo report``: an ensemble of many steps and a perf document of many variants.

Both are built from the example repository (``gen-repo config examples/gen-repo.yaml`` or its build): the ensemble
chains its real ``mlp`` model ``steps`` times; the perf document measures ``mlp`` in ``variants`` request variants.
Used by the report's scale test and by ``bench/bench_report_scale.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: The example model every step and every perf variant is about, with its input and output tensors.
MODEL, MODEL_INPUT, MODEL_OUTPUT = "mlp", "input_x", "output"


def add_chain_ensemble(repository: Path, steps: int, name: str = "chain") -> Path:
    """Write ensemble ``name`` into ``repository``: ``steps`` calls of the mlp model, each reading the last's output."""
    blocks = "".join(
        f'  step {{\n    model_name: "{MODEL}"\n    model_version: -1\n'
        f'    input_map {{ key: "{MODEL_INPUT}" value: "t{i}" }}\n'
        f'    output_map {{ key: "{MODEL_OUTPUT}" value: "t{i + 1}" }}\n  }}\n' for i in range(steps))
    config = (f'name: "{name}"\nplatform: "ensemble"\nmax_batch_size: 32\n'
              'input { name: "t0" data_type: TYPE_FP32 dims: 16 }\n'
              f'output {{ name: "t{steps}" data_type: TYPE_FP32 dims: 4 }}\n'
              f"ensemble_scheduling {{\n{blocks}}}\n")
    folder = repository / name
    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text(config, encoding="utf-8")
    return folder


def perf_document(variants: int, concurrencies: tuple[int, ...] = (1, 4)) -> dict[str, Any]:
    """A ``gen-repo perf --json`` document: the mlp model at ``variants`` batch sizes, each at ``concurrencies``."""
    results = [{"model": MODEL, "concurrency": c, "batch_size": batch, "shape": "opt", "engine": "loop",
                "throughput": 100.0 * batch / c, "p50_ms": 1.0 + c, "p99_ms": 2.0 + c}
               for batch in range(1, variants + 1) for c in concurrencies]
    return {"results": results, "engine_note": "synthetic (report scale)"}


def write_perf_document(path: Path, variants: int) -> Path:
    """:func:`perf_document` written to ``path``."""
    path.write_text(json.dumps(perf_document(variants)), encoding="utf-8")
    return path
