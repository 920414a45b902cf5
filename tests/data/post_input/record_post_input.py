"""A GraphSpec with AITune main's ``post_input_spec`` (inputs after the call), recorded with aitune 0.6.0's own code.

aitune 0.6.0 records no ``post_input_spec``; AITune main's RecordingModule computes it the way this script does:
``SampleMetadata.from_inputs`` over the normalized arguments after the call (with the global batch size), merged over
the calls with ``update_shapes_seen``. Checked against AITune main's source (github.com/ai-dynamo/aitune,
``aitune/torch/module/graph_spec.py`` and the RecordingModule test "tracks input metadata before and after call"):
``GraphSpec.post_input_spec: SampleMetadata | None = None``, the last field, written by ``to_dict`` after
``dynamic_shapes`` in the same form as ``input_spec`` (None when not recorded) and read back with
``data.get("post_input_spec")``; ``update_shapes_seen(inputs, outputs, post_inputs)`` takes the first call's
metadata and merges later calls into it. Tensors changed by the call show in ``tensor_data``, non-tensor leaves
(a counter) in ``other_data``, as here. Everything else comes from ``../shared/tools/aitune-record/record.py``
(RecordingModule as ``tune()`` drives it). Regenerate (the aitune-record venv, see its README)::

    python tests/data/post_input/record_post_input.py /work/shared/tools/aitune-record tests/data/post_input
"""

from __future__ import annotations

import copy
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch


class StreamingTagger(torch.nn.Module):
    """Tags a chunk of a stream and updates the stream's state in place, as a streaming model does.

    ``state["history"]`` grows by the chunk (its shape changes), ``state["chunks"]`` counts the calls (a non-tensor
    leaf), ``state["last"]`` is overwritten with the chunk's last features (same shape: invisible to the metadata).
    """

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 3)

    def forward(self, x: torch.Tensor, state: dict) -> torch.Tensor:
        state["history"] = torch.cat([state["history"], x], dim=1)
        state["chunks"] += 1
        state["last"].copy_(x[:, -1])
        return self.proj(state["history"][:, -x.shape[1]:])


def _calls() -> list:
    generator = torch.Generator().manual_seed(0)
    calls = []
    for batch, seq, past in ((1, 3, 5), (2, 4, 7), (4, 6, 9)):
        state = {"history": torch.randn(batch, past, 8, generator=generator), "chunks": 0,
                 "last": torch.zeros(batch, 8)}
        calls.append((batch, (torch.randn(batch, seq, 8, generator=generator), state), {}))
    return calls


def main(tool: Path, out: Path) -> None:
    sys.dont_write_bytecode = True  # no __pycache__ next to the tool
    sys.path.insert(0, str(tool))
    import record  # type: ignore[import-not-found]

    work = Path(tempfile.mkdtemp(prefix="aitune-record-"))
    try:
        _record(record, work, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _record(record: Any, work: Path, out: Path) -> None:
    mods = record._load_aitune(work)
    ds, fs, _, _, sm, tu = mods
    from aitune.torch.config import config

    case = record.Case(lambda: StreamingTagger().eval(), _calls())
    model, (graph,) = record.record_case("streaming", case, mods, work / "cache", check=True)
    signature = fs.ForwardSignature.from_callable(model.forward)
    post = None
    for batch, args, kwargs in copy.deepcopy(case.calls):
        with torch.no_grad():
            model(*args, **kwargs)
        after = sm.SampleMetadata.from_inputs(signature.normalize(args, kwargs).arguments,
                                              strict=config.strict_mode, batch_size=batch)
        if post is None:
            post = after
        else:
            post.update_shapes_seen(after)
    document = {"aitune_version": __import__("aitune").__version__,
                "graph": {**record.graph_json(graph, ds), "post_input_spec": post.to_json_dict()},
                "expected": record.expected_json(graph, tu)}
    (out / "streaming.graphspec.json").write_text(json.dumps(document, indent=2, allow_nan=False) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
