"""A second build of the example manifest whose contracts differ from the first in known ways (the diff and publish
tests compare the two).

:func:`make_variant_project` writes a manifest next to two variant factories of ``examples/models.py`` and their
GraphSpecs, recorded from real calls the way AITune records them (:func:`tests.build_helpers.record`):

- ``mlp``: the example MLP that also returns its hidden layer (an added output ``hidden``; ``tensor_names`` keeps
  the first output's name) and batches up to 64 (``max_batch_size`` raised from 32): compatible changes only.
- ``text``: the example text model without its ``attention_mask`` (a removed input), ``input_ids`` as int32 (a data
  type change) taking ``0..49`` (a narrowed value domain; the table has 100 rows), sequence lengths ``8..128`` (from
  ``4..64``: narrowed at the low end, widened at the high end) and batches up to 8 (``max_batch_size`` lowered from 16).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from tests.build_helpers import load_module, record

REPO_ROOT = Path(__file__).resolve().parent.parent

VARIANTS_SOURCE = '''\
"""Variants of the example models (written by tests/diff_helpers.py)."""
import torch
from torch import nn

from examples.models import make_mlp, make_text


class MlpWithHidden(nn.Module):
    """The example MLP returning (logits, hidden)."""

    def __init__(self):
        super().__init__()
        self.mlp = make_mlp()

    def forward(self, x):
        hidden = self.mlp.net[1](self.mlp.net[0](x))
        return self.mlp.net[2](hidden), hidden


class TextIdsOnly(nn.Module):
    """The example text model without an attention mask: int32 ids, every position kept."""

    def __init__(self):
        super().__init__()
        self.text = make_text()

    def forward(self, input_ids):
        return self.text(input_ids.to(torch.int64), torch.ones_like(input_ids, dtype=torch.int64))


def make_mlp_with_hidden():
    return MlpWithHidden().eval()


def make_text_ids_only():
    return TextIdsOnly().eval()
'''


def make_variant_project(root: Path) -> Path:
    """Write the variant project into ``root`` and return its manifest (see the module docstring)."""
    import torch

    root.mkdir(parents=True, exist_ok=True)
    (root / "variants.py").write_text(VARIANTS_SOURCE, encoding="utf-8")
    variants = load_module(root / "variants.py", "_recording_variants")
    torch.manual_seed(5)
    specs = root / "specs"
    specs.mkdir(exist_ok=True)
    documents = {
        "mlp": record("mlp", variants.make_mlp_with_hidden(), ["x"],
                      [(b, {"x": torch.randn(b, 16)}) for b in (1, 8, 64)]),
        "text": record("text", variants.make_text_ids_only(), ["input_ids"],
                       [(b, {"input_ids": torch.randint(0, 50, (b, s), dtype=torch.int32)})
                        for b, s in ((1, 8), (4, 16), (8, 64))]),
    }
    for name, document in documents.items():
        (specs / f"{name}.graphspec.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    seq = {"type": "DynamicDim", "name": "seq", "min": 8, "max": 128, "opt": 16}
    batch = {"type": "BatchDim", "name": "batch", "min": 1, "max": 8, "opt": 4}
    manifest = {
        "models": [
            {"name": "mlp", "spec": "specs/mlp.graphspec.json", "source": {"factory": "variants:make_mlp_with_hidden"},
             "tensor_names": {"output_0": "output", "output_1": "hidden"}},
            {"name": "text", "spec": "specs/text.graphspec.json", "source": {"factory": "variants:make_text_ids_only"},
             "inputs": {"input_ids": {"value_range": [0, 49]}},
             "dynamic_shapes": [{"path": "input_ids", "shape": [batch, seq]}]},
        ],
    }
    path = root / "gen-repo.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    return path


def copy_repository(source: Path, destination: Path) -> Path:
    """A writable copy of a (read-only session) repository."""
    shutil.copytree(source, destination)
    for path in destination.rglob("*"):
        if path.is_file():
            path.chmod(0o644)
    return destination
