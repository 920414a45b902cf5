"""Checks shared by the zoo test, the held-out run (tests/heldout_run.py) and its test.

:func:`recording_problems` checks an aitune-record GraphSpec against aitune's own answers.
:func:`outputs_outside_contract` is the "every stored reference output lies inside its contract range" check of
issue 22: contract output ranges come from the model over its whole input range, never narrower than what it
produces, and the config's dims are -1 wherever that range varies.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from generator.contracts.reference_data import read_reference
from generator.planning.config import parse_config
from generator.specs.graphspec import GraphSpec


def recording_problems(path: Path) -> list[str]:
    """Where gen-repo's reading of an aitune-record file differs from aitune 0.6.0's answers stored in it.

    The batch range (``get_max_batch_size``/``get_min_batch_size``) and every input's effective min/opt/max shapes
    (``get_effective_input_shapes``), as the recorder wrote them under ``expected``.
    """
    document = json.loads(path.read_text())
    problems = [] if document["aitune_version"] == "0.6.0" else [f"recorded by aitune {document['aitune_version']}"]
    graph = GraphSpec.from_dict(document["graph"])
    expected = document["expected"]
    if (graph.get_max_batch_size(), graph.get_min_batch_size()) != (expected["max_batch_size"],
                                                                     expected["min_batch_size"]):
        problems.append(f"batch range {graph.get_min_batch_size()}..{graph.get_max_batch_size()}, aitune says "
                        f"{expected['min_batch_size']}..{expected['max_batch_size']}")
    for (locator, spec), want in zip(graph.input_spec.tensor_data, expected["inputs"], strict=True):
        shapes = [list(s) for s in graph.get_effective_input_shapes(locator, spec)]
        aitune = [want[f"effective_{which}_shape"] for which in ("min", "opt", "max")]
        if shapes != aitune:
            problems.append(f"input {want['tensor_name']!r}: effective shapes {shapes}, aitune says {aitune}")
    return problems


def repository_models(repository: Path) -> list[str]:
    """The model folders of ``repository`` (those with a config.pbtxt), sorted."""
    return sorted(p.name for p in repository.iterdir() if (p / "config.pbtxt").is_file())


def outputs_outside_contract(repository: Path, models: Sequence[str] | None = None) -> tuple[int, list[str]]:
    """Every output of every stored reference case of ``models`` (default: all) against its contract's range.

    Returns (outputs checked, one sentence per problem): an output shape outside ``min_shape..max_shape``, a rank
    that differs, or a config dim that is fixed where the contract's range varies.
    """
    checked = 0
    problems: list[str] = []
    for model in models if models is not None else repository_models(repository):
        version = repository / model / "1"
        contract = json.loads((version / "gen_repo" / "contract.json").read_text())
        config = parse_config((repository / model / "config.pbtxt").read_text())
        dims = {o.name: list(o.dims) for o in config.output}
        first = 1 if contract["max_batch_size"] > 0 else 0
        for output in contract["outputs"]:
            low, high = output["min_shape"], output["max_shape"]
            fixed = [a for a, (lo, hi) in enumerate(zip(low, high, strict=True))
                     if lo != hi and a >= first and dims[output["name"]][a - first] != -1]
            if fixed:
                problems.append(f"{model}: output {output['name']!r} varies on axes {fixed} ({low}..{high}) where "
                                f"config.pbtxt fixes them ({dims[output['name']]})")
        for case in read_reference(version / "gen_repo"):
            for output in contract["outputs"]:
                shape = list(case.outputs[output["name"]].shape)
                checked += 1
                low, high = output["min_shape"], output["max_shape"]
                # A max of -1 has no upper bound (an axis whose size the data decides).
                if len(shape) != len(low) or not all(lo <= n and (hi < 0 or n <= hi) for lo, n, hi in
                                                     zip(low, shape, high, strict=True)):
                    problems.append(f"{model}: case {case.name!r} output {output['name']!r} has shape {shape}, "
                                    f"outside the contract's {low}..{high}")
    return checked, problems
