"""The manifest (loaded and planned) and ``gen-repo lint`` refuse the same settings: generator.triton.config_rules.

Each case is one setting spelled twice, as manifest options and as config.pbtxt text: the bad one is refused by both
(the manifest at its JSON pointer, lint with the rule's id), the good neighbour is accepted by both (lint reads the
config the planner wrote, with the pbtxt text merged in).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.protobuf import text_format

from generator.errors import GenRepoError
from generator.lint import lint
from generator.planning.config import render_config
from tests.manifest_helpers import batch_graph, plan_for, problems_of

#: (id, lint rule, manifest options, the same in pbtxt, the manifest's pointer under /models/0; None: a good one)
CASES: list[tuple[str, str, dict[str, Any], str, str | None]] = [
    ("default-level", "priority-level", {"dynamic_batching": {"priority_levels": 2, "default_priority_level": 3}},
     "dynamic_batching { priority_levels: 2 default_priority_level: 3 }", "/dynamic_batching/default_priority_level"),
    ("default-level-ok", "priority-level", {"dynamic_batching": {"priority_levels": 2, "default_priority_level": 2}},
     "dynamic_batching { priority_levels: 2 default_priority_level: 2 }", None),
    ("no-default-level", "priority-level", {"dynamic_batching": {"priority_levels": 2}},
     "dynamic_batching { priority_levels: 2 }", "/dynamic_batching/priority_levels"),
    ("levels-off", "priority-level", {"dynamic_batching": {"default_priority_level": 1}},
     "dynamic_batching { default_priority_level: 1 }", None),  # Triton checks levels only when priorities are on
    ("policy-level", "priority-level",
     {"dynamic_batching": {"priority_levels": 1, "default_priority_level": 1,
                           "priority_queue_policy": {"3": {"max_queue_size": 1}}}},
     "dynamic_batching { priority_levels: 1 default_priority_level: 1 priority_queue_policy { key: 3 value: { "
     "max_queue_size: 1 } } }", "/dynamic_batching/priority_queue_policy/3"),
    ("policy-level-ok", "priority-level",
     {"dynamic_batching": {"priority_levels": 1, "default_priority_level": 1,
                           "priority_queue_policy": {"1": {"max_queue_size": 1}}}},
     "dynamic_batching { priority_levels: 1 default_priority_level: 1 priority_queue_policy { key: 1 value: { "
     "max_queue_size: 1 } } }", None),
    ("ordering-levels", "preserve-ordering",
     {"dynamic_batching": {"preserve_ordering": True, "priority_levels": 2, "default_priority_level": 1}},
     "dynamic_batching { preserve_ordering: true priority_levels: 2 default_priority_level: 1 }",
     "/dynamic_batching/preserve_ordering"),
    ("ordering-one-level", "preserve-ordering",
     {"dynamic_batching": {"preserve_ordering": True, "priority_levels": 1, "default_priority_level": 1}},
     "dynamic_batching { preserve_ordering: true priority_levels: 1 default_priority_level: 1 }", None),
    ("ordering-delay", "preserve-ordering",
     {"dynamic_batching": {"preserve_ordering": True,
                           "default_queue_policy": {"timeout_action": "DELAY", "default_timeout_microseconds": 10}}},
     "dynamic_batching { preserve_ordering: true default_queue_policy { timeout_action: DELAY "
     "default_timeout_microseconds: 10 } }", "/dynamic_batching/default_queue_policy/timeout_action"),
    ("ordering-delay-priority", "preserve-ordering",
     {"dynamic_batching": {"preserve_ordering": True, "priority_levels": 1, "default_priority_level": 1,
                           "priority_queue_policy": {"1": {"timeout_action": "DELAY",
                                                           "default_timeout_microseconds": 10}}}},
     "dynamic_batching { preserve_ordering: true priority_levels: 1 default_priority_level: 1 priority_queue_policy {"
     " key: 1 value: { timeout_action: DELAY default_timeout_microseconds: 10 } } }",
     "/dynamic_batching/priority_queue_policy/1/timeout_action"),
    ("ordering-delay-no-timeout", "preserve-ordering",
     {"dynamic_batching": {"preserve_ordering": True, "default_queue_policy": {"timeout_action": "DELAY"}}},
     "dynamic_batching { preserve_ordering: true default_queue_policy { timeout_action: DELAY } }", None),
    ("preferred-above", "preferred-batch-size", {"dynamic_batching": {"preferred_batch_size": [16]}},
     "dynamic_batching { preferred_batch_size: [ 16 ] }", "/dynamic_batching/preferred_batch_size/0"),
    ("preferred-ok", "preferred-batch-size", {"dynamic_batching": {"preferred_batch_size": [8]}},
     "dynamic_batching { preferred_batch_size: [ 8 ] }", None),
    ("gpus-on-cpu", "instance-group-gpus", {"instance_group": [{"kind": "KIND_CPU", "gpus": [0]}]},
     "instance_group [ { kind: KIND_CPU gpus: [ 0 ] } ]", "/instance_group/0/gpus"),
    ("gpus-on-gpu", "instance-group-gpus", {"instance_group": [{"kind": "KIND_GPU", "gpus": [0]}]},
     "instance_group [ { kind: KIND_GPU gpus: [ 0 ] } ]", None),
]


def _plan(folder: Path, options: dict[str, Any]) -> Any:
    return plan_for(folder, {"models": [{"name": "m", "spec": batch_graph(high=8), "target": "python",
                                         **options}]}).models[0]


def _lint_rules(folder: Path, config: Any) -> set[str]:
    """The rules lint reports on ``config`` as model ``m`` of a repository with a python model file."""
    model = folder / "repo" / "m"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    (model / "config.pbtxt").write_text(render_config(config))
    return {finding.rule for finding in lint([folder / "repo"]).findings}


@pytest.mark.parametrize(("rule", "options", "pbtxt", "pointer"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_manifest_and_lint_agree(tmp_path: Path, rule: str, options: dict[str, Any], pbtxt: str,
                                     pointer: str | None) -> None:
    base = _plan(tmp_path / "good", {})  # the setting merged into a config the planner wrote
    config = type(base.config)()
    config.CopyFrom(base.config)
    config.ClearField("instance_group")
    text_format.Merge(pbtxt, config)
    linted = _lint_rules(tmp_path, config)
    if pointer is None:
        plan = _plan(tmp_path / "manifest", options)
        assert rule not in linted and rule not in _lint_rules(tmp_path / "planned", plan.config)
        return
    with pytest.raises(GenRepoError) as refused:
        _plan(tmp_path / "manifest", options)
    assert any(p.startswith(f"/models/0{pointer}: ") for p in problems_of(refused.value)), problems_of(refused.value)
    assert rule in linted
