"""generator/tuning/space.py: the search never leaves what the engine's profile and the contract allow."""

from __future__ import annotations

import textwrap

import pytest
from google.protobuf import text_format
from hypothesis import given, settings
from hypothesis import strategies as st

from generator.errors import GenRepoError
from generator.triton.proto import model_config_pb2
from generator.tuning.space import (
    DELAY_LADDER_US,
    MAX_CONCURRENCY,
    MAX_INSTANCES,
    Setting,
    TuneFacts,
    candidate_config,
    default_concurrency,
    facts_from_repository,
    grid,
    loaded_preferred,
    neighbours,
    setting_problems,
)

KINDS = ["KIND_CPU", "KIND_GPU", "KIND_AUTO"]


@st.composite
def model_facts(draw: st.DrawFn) -> TuneFacts:
    """Facts as a generated config and contract could give them: a profile max batch at most max_batch_size, the
    generated preferred sizes within 1..max_batch_size (not always within the profile), or no batching at all."""
    mbs = draw(st.integers(0, 256))
    batching = mbs > 0 and draw(st.booleans())
    profile_max = draw(st.integers(1, mbs)) if mbs > 0 else 0
    preferred = tuple(sorted(draw(st.sets(st.integers(1, mbs), max_size=3)))) if batching else ()
    preferred = () if preferred == (mbs,) else preferred  # as the server loads it (loaded_preferred)
    return TuneFacts(name="m", max_batch_size=mbs, profile_max_batch=profile_max, kind=draw(st.sampled_from(KINDS)),
                      instance_count=draw(st.integers(1, 6)), dynamic_batching=batching,
                      max_queue_delay_us=draw(st.sampled_from([0, 100, 250, 500, 10_000])) if batching else 0,
                      preferred_batch_size=preferred)


def _config(facts: TuneFacts) -> model_config_pb2.ModelConfig:
    config = model_config_pb2.ModelConfig(name=facts.name, backend="python", max_batch_size=facts.max_batch_size)
    config.input.add(name="X", data_type=model_config_pb2.TYPE_FP32, dims=[4])
    config.output.add(name="Y", data_type=model_config_pb2.TYPE_FP32, dims=[4])
    group = config.instance_group.add(count=facts.instance_count)
    group.kind = model_config_pb2.ModelInstanceGroup.Kind.Value(facts.kind)
    if facts.dynamic_batching:
        config.dynamic_batching.max_queue_delay_microseconds = facts.max_queue_delay_us
        config.dynamic_batching.preferred_batch_size.extend(facts.preferred_batch_size)
    return config


@settings(max_examples=200, deadline=None)
@given(model_facts())
def test_every_neighbour_and_grid_point_stays_inside_the_profile_and_the_contract(facts):
    base = _config(facts)
    frontier = [facts.baseline]
    seen = set(frontier)
    while frontier:  # every setting the climb can reach from the baseline, not only one step
        setting = frontier.pop()
        for neighbour in neighbours(setting, facts):
            assert not setting_problems(neighbour, facts), neighbour
            if neighbour not in seen:
                seen.add(neighbour)
                frontier.append(neighbour)
    for setting in seen | set(grid(facts)):
        assert setting.kind == facts.kind
        assert 1 <= setting.instance_count <= max(MAX_INSTANCES, facts.instance_count)
        assert all(1 <= size <= facts.profile_max_batch for size in setting.preferred_batch_size) or \
            setting == facts.baseline
        config = candidate_config(base, setting)
        # Nothing a client sees changes: the name, backend, max_batch_size, inputs and outputs are the base's.
        for field in ("name", "backend", "max_batch_size", "input", "output"):
            assert getattr(config, field) == getattr(base, field), field
        assert sum(g.count for g in config.instance_group) == setting.instance_count
        assert config.HasField("dynamic_batching") == facts.dynamic_batching
    assert set(grid(facts)) >= seen  # the climb never reaches what the benchmark's grid does not hold


def test_neighbours_step_one_dimension_at_a_time():
    facts = TuneFacts("m", 8, 8, "KIND_CPU", 1, True, 100, (4, 8))
    got = set(neighbours(facts.baseline, facts))
    assert got == {Setting(2, "KIND_CPU", 100, (4, 8)), Setting(1, "KIND_CPU", 0, (4, 8)),
                   Setting(1, "KIND_CPU", 500, (4, 8)), Setting(1, "KIND_CPU", 100, ())}
    assert len(grid(facts)) == MAX_INSTANCES * len(DELAY_LADDER_US) * 2 and grid(facts)[0] == facts.baseline


def test_a_model_without_dynamic_batching_varies_only_its_instances():
    facts = TuneFacts("m", 0, 0, "KIND_CPU", 1, False, 0, ())
    assert neighbours(facts.baseline, facts) == [Setting(2, "KIND_CPU", 0, ())]
    assert setting_problems(Setting(1, "KIND_CPU", 500, ()), facts)


def test_preferred_sizes_beyond_the_profile_are_cut_and_refused():
    # A TensorRT profile built to batch 4 under max_batch_size 8: 8 is never proposed.
    facts = TuneFacts("m", 8, 4, "KIND_GPU", 1, True, 100, (4, 8))
    assert all(s.preferred_batch_size in ((), (4,)) for s in grid(facts)[1:])
    assert setting_problems(Setting(1, "KIND_GPU", 100, (8,)), facts) == [
        "preferred_batch_size 8 is outside the engine's 1..4"]
    assert setting_problems(Setting(1, "KIND_CPU", 100, ()), facts)  # never another kind


def test_default_concurrency_follows_tritons_rule_capped():
    assert default_concurrency(TuneFacts("m", 4, 4, "KIND_CPU", 1, True, 100, ())) == [2 * 4 * MAX_INSTANCES]
    assert default_concurrency(TuneFacts("m", 64, 64, "KIND_CPU", 1, True, 100, ())) == [MAX_CONCURRENCY]
    assert default_concurrency(TuneFacts("m", 0, 0, "KIND_CPU", 1, False, 0, ())) == [2 * MAX_INSTANCES]


def _write_model(root, name, config_text, contract=None):
    folder = root / name
    (folder / "1" / "gen_repo").mkdir(parents=True)
    (folder / "config.pbtxt").write_text(textwrap.dedent(config_text))
    if contract is not None:
        (folder / "1" / "gen_repo" / "contract.json").write_text(contract)


def test_facts_come_from_the_config_and_the_contracts_profile(tmp_path):
    _write_model(tmp_path, "plan", '''
        name: "plan"
        platform: "tensorrt_plan"
        max_batch_size: 8
        instance_group { kind: KIND_GPU count: 2 }
        dynamic_batching { preferred_batch_size: [4, 8] max_queue_delay_microseconds: 100 }
    ''', '{"format": "gen-repo-contract/1", "model": "plan", "max_batch_size": 8, "inputs": '
         '[{"name": "x", "data_type": "TYPE_FP32", "dims": [3], "min_shape": [1, 3], "max_shape": [4, 3]}]}')
    _write_model(tmp_path, "chain", 'name: "chain"\nplatform: "ensemble"\nmax_batch_size: 0\n')
    (plan, plan_served), (chain, _) = sorted(facts_from_repository(tmp_path), key=lambda e: e[0].name, reverse=True)
    plan_config = plan_served.config
    assert (plan.max_batch_size, plan.profile_max_batch, plan.kind, plan.instance_count) == (8, 4, "KIND_GPU", 2)
    assert plan.preferred_batch_size == (4, 8) and plan.tunable
    assert text_format.MessageToString(plan_config).startswith('name: "plan"')
    assert not chain.tunable and "ensemble" in chain.why_not


def test_unknown_models_are_every_problem_at_once(tmp_path):
    _write_model(tmp_path, "a", 'name: "a"\nbackend: "python"\nmax_batch_size: 0\n')
    with pytest.raises(GenRepoError) as caught:
        facts_from_repository(tmp_path, ["a", "b", "c"])
    assert [p.message.split(" (")[0] for p in caught.value.problems] == ["no model 'b'", "no model 'c'"]
    with pytest.raises(GenRepoError, match="does not exist"):
        facts_from_repository(tmp_path / "nowhere")


def test_max_batch_size_alone_is_no_preferred_size_once_loaded():
    # Triton fills an empty preferred list with max_batch_size (read back from a loaded model: tests/cli/test_tune.py),
    # so the "preferred [4] and none, max batch 4" are one setting: never proposed as two.
    config = model_config_pb2.ModelConfig(max_batch_size=4)
    config.dynamic_batching.preferred_batch_size.append(4)
    assert loaded_preferred(config) == ()
    config.dynamic_batching.preferred_batch_size.append(2)
    assert loaded_preferred(config) == (4, 2)
    facts = TuneFacts("m", 4, 4, "KIND_CPU", 1, True, 100, ())
    assert {s.preferred_batch_size for s in grid(facts)} == {()}
