"""Shared test data helpers: the AITune fixture names, small inline GraphSpecs and manifests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
AITUNE = REPO / "tests" / "data" / "aitune"
EXAMPLES_MANIFEST = REPO / "examples" / "gen-repo.yaml"
FIXTURE_FILES = sorted(p.name for p in AITUNE.glob("*.graphspec.json"))
#: The AITune fixtures by name ("mlp", "stacked_cfg", ...), derived from the files so the list cannot drift.
FIXTURES = [name.removesuffix(".graphspec.json") for name in FIXTURE_FILES]
#: Zoo recordings that ``plan`` refuses by design (a bfloat16 model: no target serves bfloat16; tests/test_zoo.py).
ZOO_REFUSED_SPECS = ("vit_bf16.graphspec.json",)


def tensor(path: Any, shape: list[Any], min_shape: list[int], max_shape: list[int],
           dtype: str = "torch.float32") -> dict[str, Any]:
    """One tensor_data entry (access_path derived from the path)."""
    if isinstance(path, list):
        access = "output" if not path else str(path[0]) + "".join(f'["{p}"]' for p in path[1:])
    else:
        access = str(path)
    return {"access_path": access, "semantic_path": path, "shape": shape, "min_shape": min_shape,
            "max_shape": max_shape, "dtype": dtype}


def graph(inputs: list[dict[str, Any]], outputs: list[dict[str, Any]], dynamic: list[dict[str, Any]] | None = None,
          name: str = "g") -> dict[str, Any]:
    """A bare GraphSpec document."""
    return {"name": name, "input_spec": {"tensor_data": inputs}, "output_spec": {"tensor_data": outputs},
            "dynamic_shapes": dynamic or []}


def batch_graph(low: int = 1, high: int = 8, dtype: str = "torch.float32", out_dtype: str = "torch.float32",
                name: str = "g") -> dict[str, Any]:
    """``x[b,16] -> output[b,4]`` with batch range low..high."""
    return graph(
        [tensor("x", ["batch0", 16], [low, 16], [high, 16], dtype)],
        [tensor([], ["batch0", 4], [low, 4], [high, 4], out_dtype)],
        name=name,
    )


def batch_dim(low: int, high: int, opt: int | None = None, name: str = "batch") -> dict[str, Any]:
    return {"type": "BatchDim", "name": name, "min": low, "max": high, "opt": opt}


def write_manifest(folder: Path, document: dict[str, Any], name: str = "gen-repo.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if name.endswith(".json"):
        import json

        path.write_text(json.dumps(document), encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def fixture_models(target: str = "python") -> list[dict[str, Any]]:
    """One manifest model per AITune fixture file plus every graph of the tune report (absolute paths)."""
    models: list[dict[str, Any]] = [{"spec": str(AITUNE / f), "target": target} for f in FIXTURE_FILES]
    models += [
        {"name": f"report_{i}", "spec": {"file": str(AITUNE / "tune_report.json"), "graph": i}, "target": target}
        for i in range(5)
    ]
    return models


def plan_for(folder: Path, document: dict[str, Any], **kwargs: Any) -> Any:
    """Write the manifest, load it (allow_outside) and plan it."""
    from generator.manifest.loading import load_manifest
    from generator.planning.plan import plan_repository

    return plan_repository(load_manifest(write_manifest(folder, document), allow_outside=True), **kwargs)


def one_model(folder: Path, spec: dict[str, Any], **options: Any) -> Any:
    """Plan a manifest with one inline-spec model named ``m`` and return its ModelPlan."""
    return plan_for(folder, {"models": [{"name": "m", "spec": spec, **options}]}).models[0]


def problems_of(error: Any) -> list[str]:
    return [f"{p.pointer}: {p.message}" for p in error.problems]
