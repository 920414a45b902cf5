"""generator/tuning/results.py: the tune report's form (the schema gen-repo report reads) and the machine's words."""

from __future__ import annotations

import json
import os

import jsonschema

from generator.resources import resource_dir
from generator.tuning.measure import Candidate, LevelResult
from generator.tuning.results import ModelTune, TuneReport, describe_hardware, load_average
from generator.tuning.search import SearchResult
from generator.tuning.space import Setting


def test_the_report_keeps_the_schema_and_leaves_skipped_models_out():
    base = Candidate(Setting(1, "KIND_CPU", 100, (4, 8)), [LevelResult(8, 100.0, 0.03, 5.0, 9.0, 3)], 100.0)
    best = Candidate(Setting(2, "KIND_CPU", 500, ()), [LevelResult(8, 180.0, 0.02, 4.0, 7.0, 4)], 180.0)
    failed = Candidate(Setting(3, "KIND_CPU", 500, ()), error="load failed: out of memory")
    tuned = ModelTune("text", [8], 20.0, SearchResult(base, best, [base, best, failed], "converged: x", 12.5))
    report = TuneReport("repo", "loop", describe_hardware(), load_average(), 0.05,
                        [tuned, ModelTune("chain", [2], None, skipped="an ensemble")])
    document = report.to_dict()
    schema = json.loads((resource_dir("schemas") / "report_tune.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(document)
    assert [m["model"] for m in document["models"]] == ["text"]
    assert document["models"][0]["best"]["max_queue_delay_microseconds"] == 500
    assert document["models"][0]["candidates"][2]["error"] == "load failed: out of memory"
    assert document["models"][0]["kept"] is False and document["models"][0]["unsettled"] == 0
    report.load_after = load_average()
    base.results[0].settled = False  # an unsettled baseline is counted, and the load after the run is reported
    document = report.to_dict()
    jsonschema.Draft202012Validator(schema).validate(document)
    assert document["models"][0]["unsettled"] == 1 and len(document["load_after"]) == 3
    assert document["models"][0]["baseline"]["settled"] is False
    assert tuned.measured and not ModelTune("x", [1], None, SearchResult(failed, failed, [failed])).measured


def test_the_hardware_names_the_cpus_and_the_gpus():
    text = describe_hardware()
    count = len(os.sched_getaffinity(0))
    assert text.startswith(f"{count} CPUs") and ("no GPU" in text or "," in text)
    assert len(load_average()) == 3
