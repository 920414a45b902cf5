"""Every lint rule's cases: a repository lint flags (``bad``) and its accepted neighbour (``good``), as data.

``generator/lint/rules.py`` names each case where it lists a Triton check (Triton refuses ``bad`` with the check's
words) or among a rule's ``cases`` (Triton loads ``bad``; lint warns). ``tests/lint/test_run.py`` lints them (the
planted finding at its file:line:col, nothing on the neighbour); ``tests/lint/test_triton.py`` loads both into the real
Triton.

A side is a set of models keyed by a short name; the first is the subject (the model loaded, the config where the
finding is). Model folders are named ``<case>-<side>-<key>``; ``<<key>>`` in a config stands for another model's
name and ``<<@key>>`` for its absolute folder. ``key@1`` puts a model into the second repository under the name of
``key``, ``key@2`` into a third that only the server sees (models "loaded from elsewhere"). A file name ending in
``/`` is an empty folder; a :class:`Link` is a symlink to a folder outside every repository.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from generator.lint.environment import Environment, RateLimitResource
from generator.lint.findings import Finding
from generator.lint.run import lint

#: A python-backend model that answers every request with zeros for each configured output (warmup included), through
#: the response sender when the model is decoupled.
PY_MODEL = '''import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.batching = int(config.get("max_batch_size", 0)) > 0
        self.decoupled = bool(config.get("model_transaction_policy", {}).get("decoupled"))
        self.outputs = [(o["name"], pb_utils.triton_string_to_numpy(o["data_type"]),
                         [max(int(d), 1) for d in o["dims"]]) for o in config.get("output", [])]

    def execute(self, requests):
        responses = []
        for request in requests:
            inputs = request.inputs()
            batch = [inputs[0].as_numpy().shape[0] if inputs else 1] if self.batching else []
            response = pb_utils.InferenceResponse(
                [pb_utils.Tensor(name, np.zeros(batch + dims, dtype=dtype)) for name, dtype, dims in self.outputs])
            if self.decoupled:
                request.get_response_sender().send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            else:
                responses.append(response)
        return None if self.decoupled else responses
'''
PY = {"1/model.py": PY_MODEL}
B = 'backend: "python"\nmax_batch_size: 4\n'
X = 'input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
Y = 'output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
IO = X + Y
#: The environment of the CPU test server (no GPU, the python backend only, auto-complete off).
CPU_SERVER = Environment(gpus=0, backends=frozenset({"python"}), source="the CPU test server", auto_complete=False)
#: The CPU test server with its rate limiter on, and with a count for one resource.
RATE_LIMITED = Environment(auto_complete=False, rate_limit="execution_count", source="--rate-limit=execution_count")
RATE_LIMITED_TO = Environment(auto_complete=False, rate_limit="execution_count",
                              rate_limit_resources=(RateLimitResource("limited", 3),),
                              source="--rate-limit=execution_count --rate-limit-resource=limited:3")


@dataclass(frozen=True)
class Link:
    """A symlink in a model folder to a folder outside every repository (beside them), holding ``files``."""

    files: Mapping[str, str]


@dataclass(frozen=True)
class Model:
    """One model folder: config text after the ``name:`` line (None: no config.pbtxt), and its files."""

    config: str | None = B + IO
    files: Mapping[str, str | bytes | Link | None] = field(default_factory=lambda: dict(PY))
    named: bool = True  #: prepend ``name: "<folder>"``


@dataclass(frozen=True)
class Case:
    """One case: the flagged side, the accepted neighbour, and where the finding is."""

    id: str
    bad: Mapping[str, Model]
    good: Mapping[str, Model]
    #: text in the subject's config.pbtxt where the finding points (or (text, n) for its n-th occurrence);
    #: None: a finding on a folder, ``where`` inside the subject's folder ("" the folder itself)
    at: str | tuple[str, int] | None = None
    where: str = ""
    #: more findings, on other bad models: (model key, text in its config or None for its folder)
    also: tuple[tuple[str, str | None], ...] = ()
    #: findings of other rules on the same value: (model key, text in its config, rule)
    plus: tuple[tuple[str, str | tuple[str, int], str], ...] = ()
    #: what lint is told (None: nothing, Triton's default options); the server test starts tritonserver with its
    #: options (:meth:`Environment.tritonserver_args`; None: :data:`CPU_SERVER`'s)
    environment: Environment | None = None
    external: tuple[str, ...] = ()  #: model keys named as loaded elsewhere
    load_first: tuple[str, ...] = ()  #: model keys the server loads, and keeps loaded, before the subject

    def name(self, side: str, key: str) -> str:
        """Folder name of model ``key`` on ``side``."""
        return f"{self.id}-{side}-{key.split('@')[0]}"

    def models(self, side: str) -> Mapping[str, Model]:
        """The models of ``side`` ("bad" or "good")."""
        return self.bad if side == "bad" else self.good


def one(config: str | None = B + IO, files: Mapping[str, str | bytes | Link | None] | None = None,
        named: bool = True) -> dict:
    """A single-model side."""
    return {"m": Model(config, dict(PY) if files is None else files, named)}


def repo_of(key: str) -> int:
    """Which repository a model key goes to."""
    return int(key.split("@")[1]) if "@" in key else 0


def write_side(case: Case, side: str, roots: list[Path]) -> None:
    """Write ``case``'s ``side`` into the repositories ``roots`` (0, 1 and the server-only 2)."""
    for key, model in case.models(side).items():
        name = case.name(side, key)
        folder = roots[repo_of(key)] / name
        folder.mkdir(parents=True, exist_ok=True)
        if model.config is not None:
            text = (f'name: "{name}"\n' if model.named else "") + model.config
            root = folder.parent.absolute()
            text = re.sub(r"<<@(\w[\w.]*)>>", lambda m, root=root: str(root / case.name(side, m.group(1))), text)
            text = re.sub(r"<<(\w[\w.]*)>>", lambda m: case.name(side, m.group(1)), text)
            (folder / "config.pbtxt").write_text(text)
        for rel, content in model.files.items():
            path = folder / rel
            if isinstance(content, Link):
                target = roots[0].parent / f"{roots[0].name}-elsewhere" / name / rel
                for inner, text in content.files.items():
                    (target / inner).parent.mkdir(parents=True, exist_ok=True)
                    (target / inner).write_text(text)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.symlink_to(target, target_is_directory=True)
                continue
            if content is None or rel.endswith("/"):
                path.mkdir(parents=True, exist_ok=True)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content.encode() if isinstance(content, str) else content)


def position(text: str, at: str | tuple[str, int]) -> tuple[int, int]:
    """1-based line and column of the n-th occurrence of ``at`` in ``text`` after its ``name:`` line (if first)."""
    needle, nth = (at, 1) if isinstance(at, str) else at
    start = text.index("\n") if text.startswith("name:") and not needle.startswith("name:") else -1
    for _ in range(nth):
        start = text.index(needle, start + 1)
    line = text.count("\n", 0, start) + 1
    return line, start - (text.rfind("\n", 0, start) + 1) + 1


# ---------------------------------------------------------------------------- ONNX graphs (lint-only cases)
OnnxTensor = tuple[str, str, list[int | str]]


def onnx_bytes(inputs: list[OnnxTensor], outputs: list[OnnxTensor]) -> bytes:
    """A small ONNX graph with these inputs and outputs (names, "FLOAT"/"INT32", shapes; str dims are dynamic)."""
    from onnx import TensorProto

    from tests.lint_corpus.make_onnx import build

    def tensors(items: list[OnnxTensor]) -> list[tuple[str, int, list[int | str]]]:
        return [(name, getattr(TensorProto, dtype), shape) for name, dtype, shape in items]

    return build(tensors(inputs), tensors(outputs)).SerializeToString(deterministic=True)


def _onnx(inputs: list[OnnxTensor], outputs: list[OnnxTensor] | None = None) -> dict[str, bytes | str | None]:
    return {"1/model.onnx": onnx_bytes(inputs, outputs or [("y", "FLOAT", ["b", 4])])}


ONNX_OK = [("x", "FLOAT", ["b", 4])]
NO_PLATFORM = "max_batch_size: 4\n"  # neither platform nor backend: Triton infers them from the files


# ---------------------------------------------------------------------------- ensembles
def ensemble(steps: str, io: str = IO, mbs: int = 4, extra: str = "") -> Model:
    """An ensemble model with these steps (an empty version folder)."""
    text = f'platform: "ensemble"\nmax_batch_size: {mbs}\n{io}{extra}ensemble_scheduling {{ step [ {steps} ] }}\n'
    return Model(text, {"1/": None})


def step(model: str = "s", version: str = "model_version: -1 ", maps: str = 'input_map { key: "x" value: "x" } '
         'output_map { key: "y" value: "y" }') -> str:
    """One ensemble step running ``<<model>>``."""
    return f'{{ model_name: "<<{model}>>" {version}{maps} }}'


ENS_OK = {"e": ensemble(step()), "s": Model()}
TWO_INPUTS = (B + 'input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "z" data_type: TYPE_FP32 dims: '
              '[ 4 ] } ]\n' + Y)


# ---------------------------------------------------------------------------- sequence batching
def seq(body: str, mbs: int = 4) -> str:
    """A python model with ``sequence_batching { body }`` (before the I/O, so texts in it come first)."""
    return f'backend: "python"\nmax_batch_size: {mbs}\nsequence_batching {{ {body} }}\n' + IO


def control(name: str, kind: str, values: str = "int32_false_true: [ 0, 1 ]") -> str:
    """One control_input entry."""
    return f'{{ name: "{name}" control [ {{ kind: {kind} {values} }} ] }}'


CONTROLS_OK = (f'control_input [ {control("S", "CONTROL_SEQUENCE_START")}, {control("E", "CONTROL_SEQUENCE_END")}, '
               f'{control("R", "CONTROL_SEQUENCE_READY", "bool_false_true: [ false, true ]")}, '
               f'{control("C", "CONTROL_SEQUENCE_CORRID", "data_type: TYPE_UINT64")} ]')


def state(initial: str, dims: str = "[ 4 ]", name: str = "si") -> str:
    """One implicit state with the given initial_state list."""
    return (f'{{ input_name: "{name}" output_name: "so" data_type: TYPE_FP32 dims: {dims} '
            f'initial_state [ {initial} ] }}')


INITIAL_OK = '{ name: "i" data_type: TYPE_FP32 dims: [ 4 ] zero_data: true }'
INITIAL_J = '{ name: "j" data_type: TYPE_FP32 dims: [ 4 ] zero_data: true }'
INITIAL_FILE = seq("state [ " + state('{ name: "i" data_type: TYPE_FP32 dims: [ 4 ] data_file: "s.bin" }') + " ]")


def warmup(inputs: str, batch: int = 1) -> str:
    """A model_warmup list with one sample."""
    return f'model_warmup [ {{ name: "w" batch_size: {batch} {inputs} }} ]\n'


def winput(name: str = "x", body: str = "data_type: TYPE_FP32 dims: [ 4 ] zero_data: true") -> str:
    """One warmup input."""
    return f'inputs {{ key: "{name}" value: {{ {body} }} }}'


def metrics(control_text: str) -> str:
    """A model with model_metrics holding one metric control."""
    return B + f"model_metrics {{ metric_control [ {control_text} ] }}\n" + IO


METRIC_OK = '{ metric_identifier { family: "f" } histogram_options { buckets: [ 1 ] } }'
TRT = 'platform: "tensorrt_plan"\n'  # with backend python: core allows any platform for a custom backend
F4, F2 = bytes(16), bytes(8)  # four and two float32 zeros
BATCH_PATH = 'parameters { key: "TRITON_BATCH_STRATEGY_PATH" value: { string_value: "%s" } }\n'
PROFILE = 'instance_group [ { kind: KIND_CPU profile: [ "%s" ] } ]\n'
PROFILES = 'instance_group [ { kind: KIND_CPU profile: [ %s ] } ]\n'
#: A gen-repo contract saying the version's plan holds two optimization profiles (all the TensorRT rules read).
TWO_PROFILES = {**PY, "1/gen_repo/contract.json": '{"format": "gen-repo-contract/1", "optimization_profiles": '
                '[{"index": 0, "name": "short"}, {"index": 1, "name": "long"}]}'}
SCATTER_Y = 'batch_output [ { target_name: [ "y" ] kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: [ "x" ] } ]\n'
PRIORITY = "dynamic_batching { priority_levels: 2 default_priority_level: 1 priority_queue_policy { key: %d value: "

# ---------------------------------------------------------------------------- backends the CPU server lacks
PT = 'platform: "pytorch_libtorch"\nmax_batch_size: 4\n'
PT_FILE = {"1/model.pt": "torchscript"}  # lint reads the config, never the TorchScript file
ORT = 'platform: "onnxruntime_onnx"\nmax_batch_size: 4\n'


def pytorch(config: str) -> dict:
    """A pytorch model (its config after the platform line)."""
    return one(PT + config, dict(PT_FILE))


def pt_controls(name: str, kind: str, values: str = "int32_false_true: [ 0, 1 ]") -> str:
    """A pytorch config body with one control tensor of ``CONTROL_SEQUENCE_<kind>``."""
    return f"sequence_batching {{ control_input [ {control(name, f'CONTROL_SEQUENCE_{kind}', values)} ] }}\n" + IO


def onnx_sequence(graph_control: OnnxTensor | None, values: str = "int32_false_true: [ 0, 1 ]") -> dict:
    """An onnxruntime sequence model with a START control 'S' and this graph input for it (None: no such input)."""
    graph = [*ONNX_OK, *([graph_control] if graph_control else [])]
    return one(ORT + f'sequence_batching {{ control_input [ {control("S", "CONTROL_SEQUENCE_START", values)} ] }}\n'
               + IO, _onnx(graph))


def rate_limited(*resources: tuple[str, bool, int]) -> str:
    """A python model with one KIND_CPU instance group per resource: (name, global, count)."""
    groups = ", ".join(f'{{ kind: KIND_CPU rate_limiter {{ resources [ {{ name: "{name}" '
                       f'{"global: true " if is_global else ""}count: {count} }} ] }} }}'
                       for name, is_global, count in resources)
    return B + f"instance_group [ {groups} ]\n" + IO


CACHE = "response_cache { enable: true }\n"
DECOUPLED = Model(B + "model_transaction_policy { decoupled: true }\n" + IO)
MIXED = ('input_map { key: "x" value: "t" } input_map { key: "z" value: "x" } output_map { key: "y" value: "y" }')
TO_T = 'input_map { key: "x" value: "x" } output_map { key: "y" value: "t" }'

CASES: tuple[Case, ...] = (
    # ------------------------------------------------------------------------------------------------ layout
    Case("model-duplicate", {"m": Model(), "m@1": Model()}, one(), where="", also=(("m@1", None),)),
    # Triton's default, auto-complete on: the python backend fills in a config (no I/O) and the model loads
    Case("config-missing", one(None), one(), where="", environment=Environment()),
    Case("config-required", one(None), one(), where="", environment=CPU_SERVER),
    Case("config-required-pytorch", {"m": Model(None, dict(PT_FILE))}, pytorch(IO), where=""),
    Case("config-required-graphdef", {"m": Model(None, {"1/model.graphdef": "graph"})},
         one('platform: "tensorflow_graphdef"\nmax_batch_size: 4\n' + IO, {"1/model.graphdef": "graph"}), where=""),
    Case("config-parse", one(B + 'input [ { name: "x" data_type: TYPE_FP32 dimz: [ 4 ] } ]\n' + Y), one(), at="dimz"),
    Case("config-name-mismatch", one('name: "other"\n' + B + IO, named=False), one(), at='name: "other"'),
    Case("version-missing", one(files={"model.py": PY_MODEL}), one(), where=""),
    Case("version-policy-none", one(B + "version_policy { specific { versions: [ 3 ] } }\n" + IO),
         one(B + "version_policy { specific { versions: [ 1 ] } }\n" + IO), at="version_policy"),
    Case("version-policy-partial", one(B + "version_policy { specific { versions: [ 1, 3 ] } }\n" + IO),
         one(B + "version_policy { specific { versions: [ 1 ] } }\n" + IO), at="3 ]"),
    Case("version-leading-zero", one(files={**PY, "02/model.py": PY_MODEL}), one(), where="02"),
    Case("version-non-numeric", one(files={**PY, "extra/notes.txt": "x"}), one(), where="extra"),
    # Triton follows a linked version folder and imports the model.py it finds there (the case loads)
    Case("symlink-version-folder", one(files={"1": Link({"model.py": PY_MODEL})}), one(), where="1"),
    Case("version-folder-prefix", one(files={"1abc/model.py": PY_MODEL}), one(), where="1abc"),
    Case("version-folder-name", one(files={**PY, "+1/model.py": PY_MODEL}), one(), where="+1"),
    Case("warmup-data-file-missing", one(B + warmup(winput(body='data_type: TYPE_FP32 dims: [ 4 ] input_data_file: '
                                                             '"x.bin"')) + IO),
         one(B + warmup(winput(body='data_type: TYPE_FP32 dims: [ 4 ] input_data_file: "x.bin"')) + IO,
             {**PY, "warmup/x.bin": F4}), at="input_data_file"),
    Case("warmup-data-file-short", one(B + warmup(winput(body='data_type: TYPE_FP32 dims: [ 4 ] input_data_file: '
                                                           '"x.bin"')) + IO, {**PY, "warmup/x.bin": F2}),
         one(B + warmup(winput(body='data_type: TYPE_FP32 dims: [ 4 ] input_data_file: "x.bin"')) + IO,
             {**PY, "warmup/x.bin": F4}), at="input_data_file"),
    Case("warmup-data-file-long", one(B + warmup(winput(body='data_type: TYPE_FP32 dims: [ 4 ] input_data_file: '
                                                          '"x.bin"')) + IO, {**PY, "warmup/x.bin": bytes(20)}),
         one(B + warmup(winput(body='data_type: TYPE_FP32 dims: [ 4 ] input_data_file: "x.bin"')) + IO,
             {**PY, "warmup/x.bin": F4}), at="input_data_file"),
    Case("initial-state-file-missing",
         one(INITIAL_FILE),
         one(INITIAL_FILE,
             {**PY, "initial_state/s.bin": F4}), at="data_file"),
    Case("initial-state-file-short",
         one(INITIAL_FILE,
             {**PY, "initial_state/s.bin": F2}),
         one(INITIAL_FILE,
             {**PY, "initial_state/s.bin": F4}), at="data_file"),
    Case("label-file-missing", one(B + X + 'output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] label_filename: '
                                           '"labels.txt" } ]\n'),
         one(B + X + 'output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "labels.txt" } ]\n',
             {**PY, "labels.txt": "a\nb\nc\nd\n"}), at="label_filename"),
    # the path itself is always path-escape's: Triton opens it as given, so nothing confines it to the model
    Case("batch-strategy-sequence", one(B + "sequence_batching { }\n" + BATCH_PATH % "<<@m>>/libbatch.so" + IO,
                                        {**PY, "libbatch.so": ""}),
         one(B + "sequence_batching { }\n" + IO), at="value: {", plus=(("m", "string_value", "path-escape"),)),
    Case("batch-strategy-relative", one(B + BATCH_PATH % "libbatch.so" + IO, {**PY, "libbatch.so": ""}), one(),
         at="string_value"),
    Case("batch-strategy-missing", one(B + BATCH_PATH % "<<@m>>/libbatch.so" + IO), one(), at="string_value"),
    Case("runtime-escape", one(B + 'runtime: "../libtriton_fake.so"\n' + IO, {**PY, "libtriton_fake.so": ""}),
         one(B + 'runtime: "libtriton_python.so"\n' + IO), at="runtime"),
    # ------------------------------------------------------------------------------------------------ backends
    Case("platform-missing", one(NO_PLATFORM + IO, {"1/weights.bin": "w"}), one(NO_PLATFORM + IO), at="name:"),
    Case("platform-missing-default-file",
         one(NO_PLATFORM + 'default_model_filename: "weights.bin"\n' + IO, {"1/weights.bin": "w"}),
         one(NO_PLATFORM + 'default_model_filename: "model.py"\n' + IO), at="default_model_filename"),
    Case("platform-unknown", one('platform: "foo"\n' + NO_PLATFORM + IO),
         one('platform: "foo"\n' + B + IO), at="platform"),
    Case("platform-unknown-libtorch", one('platform: "libtorch"\n' + NO_PLATFORM + IO, {"1/model.pt": "pt"}),
         one('platform: "libtorch"\n' + B + IO), at="platform"),
    Case("platform-backend-mismatch", one('platform: "onnxruntime_onnx"\nbackend: "tensorrt"\n' + NO_PLATFORM + IO),
         one('platform: "onnxruntime_onnx"\n' + B + IO), at="backend"),
    Case("platform-backend-tensorflow", one('backend: "tensorflow"\n' + NO_PLATFORM + IO, {"1/model.bin": "b"}),
         one('platform: "tensorflow_savedmodel"\ndefault_model_filename: "model.py"\n' + B + IO), at="backend"),
    Case("model-file-missing", one(files={"1/other.py": PY_MODEL}), one(), where="1"),
    Case("python-model-file", one(B + 'default_model_filename: "model.python"\n' + IO, {"1/model.python": PY_MODEL}),
         one(B + 'default_model_filename: "model.py"\n' + IO), at="default_model_filename"),
    Case("python-execution-env", one(B + 'parameters { key: "EXECUTION_ENV_PATH" value: { string_value: '
                                        '"$$TRITON_MODEL_DIRECTORY/env.tar.gz" } }\n' + IO), one(), at="value: {"),
    Case("cc-model-file-missing",
         one(TRT + NO_PLATFORM + 'cc_model_filenames { key: "8.6" value: "model_86.plan" }\n' + IO,
             {"1/model.plan": "p"}),
         one(TRT + NO_PLATFORM + 'cc_model_filenames { key: "8.6" value: "model_86.plan" }\n' + IO,
             {"1/model.plan": "p", "1/model_86.plan": "p"}), at='value: "model_86.plan"'),
    Case("onnx-load", one(NO_PLATFORM + IO, {"1/model.onnx": "not onnx"}),
         one(NO_PLATFORM + IO, _onnx(ONNX_OK)), at="name:"),
    Case("onnx-io-name-inferred", one(NO_PLATFORM + IO, _onnx([("x0", "FLOAT", ["b", 4])])),
         one(NO_PLATFORM + IO, _onnx(ONNX_OK)), at='name: "x"'),
    Case("onnx-input-missing-inferred", one(NO_PLATFORM + IO, _onnx([*ONNX_OK, ("z", "FLOAT", ["b", 4])])),
         one(NO_PLATFORM + TWO_INPUTS.replace(B, ""), _onnx([*ONNX_OK, ("z", "FLOAT", ["b", 4])])), at="input ["),
    Case("onnx-data-type", one(NO_PLATFORM + IO, _onnx([("x", "INT32", ["b", 4])])),
         one(NO_PLATFORM + IO, _onnx(ONNX_OK)), at="data_type"),
    Case("onnx-rank-inferred", one(NO_PLATFORM + IO, _onnx([("x", "FLOAT", ["b", 4, 1])])),
         one(NO_PLATFORM + IO, _onnx(ONNX_OK)), at="dims"),
    Case("onnx-dim-inferred", one(NO_PLATFORM + IO, _onnx([("x", "FLOAT", ["b", 8])])),
         one(NO_PLATFORM + IO, _onnx(ONNX_OK)), at="4 ]"),
    Case("onnx-batch-inferred", one(NO_PLATFORM + IO, _onnx([("x", "FLOAT", [1, 4])])),
         one(NO_PLATFORM + IO, _onnx(ONNX_OK)), at="max_batch_size"),
    # what each backend takes in a config (Triton QA L0_libtorch_io_types: the first three)
    Case("backend-data-type-pytorch-input", pytorch(IO.replace("TYPE_FP32", "TYPE_UINT32", 1)), pytorch(IO),
         at="data_type: TYPE_UINT32"),
    Case("backend-data-type-pytorch-output", pytorch(X + Y.replace("TYPE_FP32", "TYPE_UINT64")), pytorch(IO),
         at="data_type: TYPE_UINT64"),
    Case("backend-data-type-pytorch-corrid", pytorch(pt_controls("CORRID__2", "CORRID", "data_type: TYPE_UINT32")),
         pytorch(pt_controls("CORRID__2", "CORRID", "data_type: TYPE_INT64")), at="data_type: TYPE_UINT32"),
    Case("backend-data-type-pytorch-string", pytorch(X.replace("TYPE_FP32", "TYPE_STRING") + Y),
         one(PT.replace("4", "0") + X.replace("TYPE_FP32", "TYPE_STRING") + Y, dict(PT_FILE)), at="dims"),
    Case("backend-data-type-onnx-bf16",
         one(ORT + IO.replace("TYPE_FP32", "TYPE_BF16", 1), _onnx([("x", "BFLOAT16", ["b", 4])])),
         one(ORT + IO, _onnx(ONNX_OK)), at="data_type: TYPE_BF16"),
    Case("backend-control-name-pytorch", pytorch(pt_controls("START", "START")),
         pytorch(pt_controls("START__1", "START")), at='name: "START"'),
    Case("backend-control-dims-onnx", onnx_sequence(("S", "INT32", ["b", 2])),
         onnx_sequence(("S", "INT32", ["b", 1])), at='name: "S"'),
    Case("backend-control-type-onnx", onnx_sequence(("S", "FLOAT", ["b", 1])),
         onnx_sequence(("S", "FLOAT", ["b", 1]), "fp32_false_true: [ 0, 1 ]"), at='name: "S"'),
    Case("backend-control-missing-onnx", onnx_sequence(None), onnx_sequence(("S", "INT32", ["b", 1])),
         at='name: "S"'),
    Case("backend-io-required-pytorch", pytorch(Y), pytorch(IO), at="name:"),
    Case("optional-input-onnxruntime",
         one(ORT + TWO_INPUTS.replace(B, "").replace("[ 4 ] } ]", "[ 4 ] optional: true } ]", 1),
             _onnx([*ONNX_OK, ("z", "FLOAT", ["b", 4])])),
         one(ORT + TWO_INPUTS.replace(B, ""), _onnx([*ONNX_OK, ("z", "FLOAT", ["b", 4])])), at="optional"),
    Case("instance-kind-tensorrt-cpu",
         one(TRT + NO_PLATFORM + "instance_group [ { kind: KIND_CPU } ]\n" + IO, {"1/model.plan": "p"}),
         one(TRT + NO_PLATFORM + "instance_group [ { kind: KIND_GPU } ]\n" + IO, {"1/model.plan": "p"}), at="kind"),
    Case("instance-kind-openvino-gpu",
         one('backend: "openvino"\n' + NO_PLATFORM + "instance_group [ { kind: KIND_GPU } ]\n" + IO,
             {"1/model.xml": "<net/>"}),
         one('backend: "openvino"\n' + NO_PLATFORM + "instance_group [ { kind: KIND_CPU } ]\n" + IO,
             {"1/model.xml": "<net/>"}), at="kind"),
    # ------------------------------------------------------------------------------------------------ model_config
    Case("max-batch-size", one('backend: "python"\nmax_batch_size: -1\n' + IO), one(), at="max_batch_size"),
    Case("tensor-name", one(B + 'input [ { data_type: TYPE_FP32 dims: [ 4 ] } ]\n' + Y), one(), at="{ data_type"),
    Case("tensor-name-output", one(B + X + 'output [ { data_type: TYPE_FP32 dims: [ 4 ] } ]\n'), one(),
         at="{ data_type"),
    Case("tensor-duplicate-name", one(TWO_INPUTS.replace('"z"', '"x"')), one(TWO_INPUTS), at=('name: "x"', 2)),
    Case("tensor-data-type", one(B + 'input [ { name: "x" dims: [ 4 ] } ]\n' + Y), one(), at='name: "x"'),
    Case("dims-empty", one(B + 'input [ { name: "x" data_type: TYPE_FP32 } ]\n' + Y), one(), at='name: "x"'),
    Case("dims-invalid", one(B + 'input [ { name: "x" data_type: TYPE_FP32 dims: [ 0 ] } ]\n' + Y), one(), at="0 ]"),
    Case("dims-invalid-reshape",
         one(B + 'input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 0 ] } } ]\n' + Y),
         one(B + 'input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 2, 2 ] } } ]\n' + Y),
         at="0 ]"),
    Case("dims-int32", one(B + 'input [ { name: "x" data_type: TYPE_FP32 dims: [ 4294967296 ] } ]\n' + Y), one(),
         at="4294967296"),
    Case("reshape-size",
         one(B + 'input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 3 ] } } ]\n' + Y),
         one(B + 'input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 2, 2 ] } } ]\n' + Y),
         at="shape: ["),
    Case("reshape-size-variable-count",
         one(B + 'input [ { name: "x" data_type: TYPE_FP32 dims: [ -1, 4 ] reshape { shape: [ -1, -1 ] } } ]\n' + Y),
         one(B + 'input [ { name: "x" data_type: TYPE_FP32 dims: [ -1, 4 ] reshape { shape: [ -1, 2, 2 ] } } ]\n'
             + Y), at="shape: ["),
    Case("reshape-size-variable",
         one(B + 'input [ { name: "x" data_type: TYPE_FP32 dims: [ -1, 4 ] reshape { shape: [ -1, 2, 3 ] } } ]\n'
             + Y),
         one(B + 'input [ { name: "x" data_type: TYPE_FP32 dims: [ -1, 4 ] reshape { shape: [ -1, 2, 2 ] } } ]\n'
             + Y), at="shape: ["),
    Case("reshape-scalar-nobatch",
         one('backend: "python"\nmax_batch_size: 0\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ 1 ] '
             'reshape { shape: [ ] } } ]\n' + Y),
         one(B + 'input [ { name: "x" data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ ] } } ]\n' + Y),
         at="reshape"),
    Case("tensor-format", one(B + 'input [ { name: "x" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 4 ] } ]\n' + Y),
         one(B + 'input [ { name: "x" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 1, 2, 2 ] } ]\n' + Y),
         at="format"),
    Case("shape-tensor-input",
         one(B + 'input [ { name: "x" data_type: TYPE_INT32 dims: [ 2 ] is_shape_tensor: true } ]\n' + Y),
         one(TRT + B + 'input [ { name: "x" data_type: TYPE_INT32 dims: [ 2 ] is_shape_tensor: true } ]\n' + Y),
         at="is_shape_tensor"),
    Case("shape-tensor-output",
         one(B + X + 'output [ { name: "y" data_type: TYPE_INT32 dims: [ 2 ] is_shape_tensor: true } ]\n'),
         one(TRT + B + X + 'output [ { name: "y" data_type: TYPE_INT32 dims: [ 2 ] is_shape_tensor: true } ]\n'),
         at="is_shape_tensor"),
    Case("non-linear-platform",
         one(B + 'input [ { name: "x" data_type: TYPE_FP32 dims: [ 2, 2, 2 ] is_non_linear_format_io: true } ]\n' + Y),
         one(TRT + B + 'input [ { name: "x" data_type: TYPE_FP32 dims: [ 2, 2, 2 ] is_non_linear_format_io: true } ]\n'
             + Y), at="is_non_linear_format_io"),
    Case("non-linear-dims",
         one(TRT + B + 'input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] is_non_linear_format_io: true } ]\n' + Y),
         one(TRT + B + 'input [ { name: "x" data_type: TYPE_FP32 dims: [ 2, 2, 2 ] is_non_linear_format_io: true } ]\n'
             + Y), at="dims"),
    Case("optional-input-batching",
         one(B + 'dynamic_batching { }\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] }, '
             '{ name: "o" data_type: TYPE_FP32 dims: [ 4 ] optional: true } ]\n' + Y),
         one(B + 'dynamic_batching { }\n' + TWO_INPUTS.replace(B, "")), at="optional"),
    Case("batch-input-sources", one(B + 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "c" data_type: '
                                        'TYPE_INT32 source_input: [ "x", "x" ] } ]\n' + IO),
         one(B + 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "c" data_type: TYPE_INT32 source_input: '
             '[ "x" ] } ]\n' + IO), at="source_input"),
    Case("batch-input-kind", one(B + 'batch_input [ { kind: 99 target_name: "c" data_type: TYPE_INT32 source_input: '
                                     '[ "x" ] } ]\n' + IO),
         one(B + 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "c" data_type: TYPE_INT32 source_input: '
             '[ "x" ] } ]\n' + IO), at="kind"),
    Case("batch-input-data-type", one(B + 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "c" data_type: '
                                          'TYPE_INT64 source_input: [ "x" ] } ]\n' + IO),
         one(B + 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "c" data_type: TYPE_INT32 source_input: '
             '[ "x" ] } ]\n' + IO), at="data_type: TYPE_INT64"),
    Case("batch-input-source-unknown", one(B + 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "c" data_type: '
                                               'TYPE_INT32 source_input: [ "nope" ] } ]\n' + IO),
         one(B + 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "c" data_type: TYPE_INT32 source_input: '
             '[ "x" ] } ]\n' + IO), at="source_input"),
    Case("batch-output-target-unknown", one(B + 'batch_output [ { target_name: [ "nope" ] kind: '
                                                'BATCH_SCATTER_WITH_INPUT_SHAPE source_input: [ "x" ] } ]\n' + IO),
         one(B + SCATTER_Y + IO), at="target_name"),
    Case("batch-output-target-twice", one(B + 'batch_output [ { target_name: [ "y", "y" ] kind: '
                                              'BATCH_SCATTER_WITH_INPUT_SHAPE source_input: [ "x" ] } ]\n' + IO),
         one(B + SCATTER_Y + IO), at="target_name"),
    Case("instance-group-count", one(B + "instance_group [ { count: -1 kind: KIND_CPU } ]\n" + IO),
         one(B + "instance_group [ { count: 1 kind: KIND_CPU } ]\n" + IO), at="count"),
    Case("instance-group-cpu-gpus", one(B + "instance_group [ { kind: KIND_CPU gpus: [ 0 ] } ]\n" + IO),
         one(B + "instance_group [ { kind: KIND_CPU } ]\n" + IO), at="gpus"),
    Case("instance-group-model-gpus", one(B + "instance_group [ { kind: KIND_MODEL gpus: [ 0 ] } ]\n" + IO),
         one(B + "instance_group [ { kind: KIND_MODEL } ]\n" + IO), at="gpus"),
    Case("instance-group-negative-gpu", one(B + "instance_group [ { kind: KIND_GPU gpus: [ -1 ] } ]\n" + IO),
         one(B + "instance_group [ { kind: KIND_CPU } ]\n" + IO), at="-1"),
    Case("instance-group-profile-platform", one(B + PROFILE % "0" + IO), one(TRT + B + PROFILE % "0" + IO),
         at="profile"),
    Case("instance-group-profile-negative", one(TRT + B + PROFILE % "-1" + IO), one(TRT + B + PROFILE % "0" + IO),
         at='"-1"'),
    Case("instance-group-profile-text", one(TRT + B + PROFILE % "abc" + IO), one(TRT + B + PROFILE % "0" + IO),
         at='"abc"'),
    Case("instance-group-profile-int32", one(TRT + B + PROFILE % "99999999999" + IO),
         one(TRT + B + PROFILE % "0" + IO), at='"99999999999"'),
    # ---------------------------------------------------------------------------------------------- tensorrt
    # The layout of Triton server issue #8629: a plan with several profiles, a group listing none.
    Case("tensorrt-profiles-unlisted", one(TRT + B + "instance_group [ { kind: KIND_CPU } ]\n" + IO, TWO_PROFILES),
         one(TRT + B + PROFILES % '"0", "1"' + IO, TWO_PROFILES), at="{ kind"),
    Case("instance-group-profile-range", one(TRT + B + PROFILES % '"0", "2"' + IO, TWO_PROFILES),
         one(TRT + B + PROFILES % '"0", "1"' + IO, TWO_PROFILES), at='"2"',
         plus=(("m", "profile", "tensorrt-profiles-unlisted"),)),
    Case("instance-group-profile-sets",
         one(TRT + B + 'instance_group [ { kind: KIND_CPU profile: [ "0", "1" ] }, { kind: KIND_CPU profile: [ "0" ] '
             '} ]\n' + IO),
         one(TRT + B + 'instance_group [ { kind: KIND_CPU profile: [ "0", "1" ] }, { kind: KIND_CPU profile: [ "0", '
             '"1" ] } ]\n' + IO), at=("profile", 2)),
    Case("response-cache-decoupled",
         one(B + "response_cache { enable: true }\nmodel_transaction_policy { decoupled: true }\n" + IO),
         one(B + "response_cache { enable: true }\n" + IO), at="response_cache"),
    Case("response-cache-sequence", one(B + "response_cache { enable: true }\nsequence_batching { }\n" + IO),
         one(B + "sequence_batching { }\n" + IO), at="response_cache"),
    Case("metrics-identifier", one(metrics("{ histogram_options { buckets: [ 1 ] } }")), one(metrics(METRIC_OK)),
         at="{ histogram_options"),
    Case("metrics-family", one(metrics("{ metric_identifier { } histogram_options { buckets: [ 1 ] } }")),
         one(metrics(METRIC_OK)), at="metric_identifier"),
    Case("metrics-histogram", one(metrics('{ metric_identifier { family: "f" } }')), one(metrics(METRIC_OK)),
         at="{ metric_identifier"),
    Case("metrics-buckets", one(metrics('{ metric_identifier { family: "f" } histogram_options { } }')),
         one(metrics(METRIC_OK)), at="histogram_options"),
    Case("warmup-input-unknown", one(B + warmup(winput() + " " + winput("z")) + IO), one(B + warmup(winput()) + IO),
         at='key: "z"'),
    Case("warmup-input-missing", one(B + warmup("") + IO), one(B + warmup(winput()) + IO), at='name: "w"'),
    Case("warmup-dims-variable", one(B + warmup(winput(body="data_type: TYPE_FP32 dims: [ -1 ] zero_data: true")) + IO),
         one(B + warmup(winput()) + IO), at="dims: [ -1 ]"),
    Case("warmup-dims", one(B + warmup(winput(body="data_type: TYPE_FP32 dims: [ 5 ] zero_data: true")) + IO),
         one(B + warmup(winput()) + IO), at="dims: [ 5 ]"),
    Case("warmup-data-type", one(B + warmup(winput(body="data_type: TYPE_INT32 dims: [ 4 ] zero_data: true")) + IO),
         one(B + warmup(winput()) + IO), at="data_type: TYPE_INT32"),
    Case("warmup-input-data", one(B + warmup(winput(body="data_type: TYPE_FP32 dims: [ 4 ]")) + IO),
         one(B + warmup(winput()) + IO), at='key: "x"'),
    Case("warmup-batch-size", one(B + warmup(winput(), batch=8) + IO), one(B + warmup(winput(), batch=4) + IO),
         at="batch_size: 8"),
    # ------------------------------------------------------------------------------------------------ batching
    Case("dynamic-batching-no-batch", one('backend: "python"\nmax_batch_size: 0\ndynamic_batching { }\n' + IO),
         one(B + "dynamic_batching { }\n" + IO), at="dynamic_batching"),
    Case("preferred-batch-size-zero", one(B + "dynamic_batching { preferred_batch_size: [ 0 ] }\n" + IO),
         one(B + "dynamic_batching { preferred_batch_size: [ 2 ] }\n" + IO), at="0 ]"),
    Case("preferred-batch-size", one(B + "dynamic_batching { preferred_batch_size: [ 8 ] }\n" + IO),
         one(B + "dynamic_batching { preferred_batch_size: [ 4 ] }\n" + IO), at="8 ]"),
    Case("preferred-batch-size-sequence-zero", one(seq("oldest { preferred_batch_size: [ 0 ] }")),
         one(seq("oldest { preferred_batch_size: [ 2 ] }")), at="0 ]"),
    Case("preferred-batch-size-sequence", one(seq("oldest { preferred_batch_size: [ 8 ] }")),
         one(seq("oldest { preferred_batch_size: [ 4 ] }")), at="8 ]"),
    Case("priority-level", one(B + "dynamic_batching { priority_levels: 2 default_priority_level: 3 }\n" + IO),
         one(B + "dynamic_batching { priority_levels: 2 default_priority_level: 2 }\n" + IO),
         at="default_priority_level"),
    Case("priority-level-policy",
         one(B + PRIORITY % 3 + "{ max_queue_size: 4 } } }\n" + IO),
         one(B + PRIORITY % 2 + "{ max_queue_size: 4 } } }\n" + IO), at="key: 3"),
    Case("preserve-ordering-levels",
         one(B + "dynamic_batching { preserve_ordering: true priority_levels: 2 default_priority_level: 1 }\n" + IO),
         one(B + "dynamic_batching { preserve_ordering: true priority_levels: 1 default_priority_level: 1 }\n" + IO),
         at="preserve_ordering"),
    Case("preserve-ordering-delay",
         one(B + "dynamic_batching { preserve_ordering: true default_queue_policy { timeout_action: DELAY "
             "default_timeout_microseconds: 100 } }\n" + IO),
         one(B + "dynamic_batching { preserve_ordering: true default_queue_policy { timeout_action: REJECT "
             "default_timeout_microseconds: 100 } }\n" + IO), at="timeout_action"),
    Case("preserve-ordering-delay-priority",
         one(B + "dynamic_batching { preserve_ordering: true priority_levels: 1 default_priority_level: 1 "
             "priority_queue_policy { key: 1 value: { timeout_action: DELAY default_timeout_microseconds: 100 } } }\n"
             + IO),
         one(B + "dynamic_batching { preserve_ordering: true priority_levels: 1 default_priority_level: 1 "
             "priority_queue_policy { key: 1 value: { timeout_action: REJECT default_timeout_microseconds: 100 } } }\n"
             + IO), at="timeout_action"),
    Case("sequence-control-unnamed",
         one(seq('control_input [ { control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]')),
         one(seq(CONTROLS_OK)), at="{ control ["),
    Case("sequence-control-shared-name",
         one(seq(f'control_input [ {control("S", "CONTROL_SEQUENCE_START")}, '
                 f'{control("S", "CONTROL_SEQUENCE_END")} ]')),
         one(seq(CONTROLS_OK)), at=('name: "S"', 2)),
    Case("sequence-control-two-start",
         one(seq(f'control_input [ {control("S", "CONTROL_SEQUENCE_START")}, '
                 f'{control("T", "CONTROL_SEQUENCE_START")} ]')),
         one(seq(CONTROLS_OK)), at=("{ kind: CONTROL_SEQUENCE_START", 2)),
    Case("sequence-control-two-end",
         one(seq(f'control_input [ {control("E", "CONTROL_SEQUENCE_END")}, {control("F", "CONTROL_SEQUENCE_END")} ]')),
         one(seq(CONTROLS_OK)), at=("{ kind: CONTROL_SEQUENCE_END", 2)),
    Case("sequence-control-ready-value",
         one(seq(f'control_input [ {control("R", "CONTROL_SEQUENCE_READY", "")} ]')),
         one(seq(CONTROLS_OK)), at="{ kind: CONTROL_SEQUENCE_READY"),
    Case("sequence-control-two-values",
         one(seq('control_input [ ' + control("S", "CONTROL_SEQUENCE_START", "int32_false_true: [ 0, 1 ] "
                                              "fp32_false_true: [ 0, 1 ]") + ' ]')),
         one(seq(CONTROLS_OK)), at="fp32_false_true"),
    Case("sequence-control-value-count",
         one(seq(f'control_input [ {control("S", "CONTROL_SEQUENCE_START", "fp32_false_true: [ 0, 1, 1 ]")} ]')),
         one(seq(CONTROLS_OK)), at="fp32_false_true"),
    Case("sequence-control-corrid-value",
         one(seq(f'control_input [ {control("C", "CONTROL_SEQUENCE_CORRID", "int32_false_true: [ 0, 1 ]")} ]')),
         one(seq(CONTROLS_OK)), at="int32_false_true"),
    Case("sequence-control-corrid-type",
         one(seq(f'control_input [ {control("C", "CONTROL_SEQUENCE_CORRID", "data_type: TYPE_FP32")} ]')),
         one(seq(CONTROLS_OK)), at="data_type: TYPE_FP32"),
    Case("sequence-slot-utilization", one(seq("direct { minimum_slot_utilization: 1.5 }")),
         one(seq("direct { minimum_slot_utilization: 0.5 }")), at="minimum_slot_utilization"),
    Case("sequence-state-two-initial",
         one(seq(f'state [ {state(INITIAL_OK + ", " + INITIAL_J)} ]')),
         one(seq(f'state [ {state(INITIAL_OK)} ]')), at='{ name: "j"'),
    Case("sequence-state-data-type",
         one(seq(f'state [ {state(INITIAL_OK.replace("TYPE_FP32", "TYPE_INT32"))} ]')),
         one(seq(f'state [ {state(INITIAL_OK)} ]')), at="data_type: TYPE_INT32"),
    Case("sequence-state-unnamed",
         one(seq(f'state [ {state("{ data_type: TYPE_FP32 dims: [ 4 ] zero_data: true }")} ]')),
         one(seq(f'state [ {state(INITIAL_OK)} ]')), at="{ data_type"),
    Case("sequence-state-twice",
         one(seq(f'state [ {state(INITIAL_OK)}, {state(INITIAL_OK).replace("so", "so2")} ]')),
         one(seq(f'state [ {state(INITIAL_OK)}, {state(INITIAL_OK, name="si2").replace("so", "so2")} ]')),
         at=('input_name: "si"', 2)),
    Case("sequence-state-rank",
         one(seq(f'state [ {state(INITIAL_OK.replace("dims: [ 4 ]", "dims: [ 2, 2 ]"))} ]')),
         one(seq(f'state [ {state(INITIAL_OK)} ]')), at="dims: [ 2, 2 ]"),
    Case("sequence-state-variable",
         one(seq(f'state [ {state(INITIAL_OK.replace("dims: [ 4 ]", "dims: [ -1 ]"), dims="[ -1 ]")} ]')),
         one(seq(f'state [ {state(INITIAL_OK, dims="[ -1 ]")} ]')), at=("dims: [ -1 ]", 2)),
    Case("sequence-state-dims",
         one(seq(f'state [ {state(INITIAL_OK.replace("dims: [ 4 ]", "dims: [ 3 ]"))} ]')),
         one(seq(f'state [ {state(INITIAL_OK)} ]')), at="dims: [ 3 ]"),
    Case("sequence-state-data",
         one(seq(f'state [ {state(INITIAL_OK.replace(" zero_data: true", ""))} ]')),
         one(seq(f'state [ {state(INITIAL_OK)} ]')), at='{ name: "i"'),
    # ------------------------------------------------------------------------------------------------ ensembles
    Case("ensemble-backend", {"e": ensemble(step(), extra='backend: "python"\n'), "s": Model()}, ENS_OK,
         at="backend"),
    Case("ensemble-no-scheduling", one('platform: "ensemble"\nmax_batch_size: 4\n' + IO, {"1/": None}), ENS_OK,
         at="platform"),
    Case("ensemble-scheduling-not-ensemble",
         one(B + IO + 'ensemble_scheduling { step [ { model_name: "m" model_version: -1 input_map { key: "x" value: '
             '"x" } output_map { key: "y" value: "y" } } ] }\n'), one(), at="ensemble_scheduling"),
    Case("ensemble-instance-group",
         {"e": ensemble(step(), extra="instance_group [ { kind: KIND_CPU } ]\n"), "s": Model()}, ENS_OK,
         at="instance_group"),
    Case("ensemble-warmup", {"e": ensemble(step(), extra=warmup(winput())), "s": Model()}, ENS_OK, at="model_warmup"),
    Case("ensemble-no-step", {"e": Model('platform: "ensemble"\nmax_batch_size: 4\n' + IO + "ensemble_scheduling { }\n",
                                         {"1/": None})}, ENS_OK, at="ensemble_scheduling"),
    Case("ensemble-step-unnamed", {"e": ensemble('{ model_version: -1 input_map { key: "x" value: "x" } output_map { '
                                                 'key: "y" value: "y" } }'), "s": Model()}, ENS_OK,
         at="{ model_version"),
    Case("ensemble-step-no-input-map", {"e": ensemble(step(maps='output_map { key: "y" value: "y" }')), "s": Model()},
         ENS_OK, at="model_name"),
    Case("ensemble-step-no-output-map", {"e": ensemble(step(maps='input_map { key: "x" value: "x" }')), "s": Model()},
         ENS_OK, at="model_name"),
    # the neighbour's step model lies in the second repository: steps resolve across repositories
    Case("ensemble-model-missing", {"e": ensemble(step())}, {"e": ensemble(step()), "s@1": Model()}, at="model_name"),
    Case("ensemble-step-version", {"e": ensemble(step(version="model_version: 3 ")), "s": Model()}, ENS_OK,
         at="model_version"),
    Case("ensemble-step-version-omitted", {"e": ensemble(step(version="")), "s": Model()},
         {"e": ensemble(step(version="model_version: 1 ")), "s": Model()}, at="model_name"),
    Case("ensemble-cycle", {"e": ensemble(step("f")), "f": ensemble(step("e"))}, ENS_OK, at="model_name",
         also=(("f", "model_name"),)),
    Case("ensemble-self", {"e": ensemble(step("e"))}, ENS_OK, at="model_name"),
    Case("ensemble-map-input",
         {"e": ensemble(step(maps='input_map { key: "x" value: "x" } input_map { key: "nope" value: "x" } '
                                  'output_map { key: "y" value: "y" }')), "s": Model()}, ENS_OK, at='key: "nope"'),
    Case("ensemble-map-output",
         {"e": ensemble(step(maps='input_map { key: "x" value: "x" } output_map { key: "nope" value: "y" }')),
          "s": Model()}, ENS_OK, at='key: "nope"'),
    Case("ensemble-input-unmapped", {"e": ensemble(step()), "s": Model(TWO_INPUTS)},
         {"e": ensemble(step()), "s": Model(TWO_INPUTS.replace("[ 4 ] } ]", "[ 4 ] optional: true } ]", 1))},
         at="{ model_name"),
    Case("ensemble-two-producers",
         {"e": ensemble(step() + ", " + step("t")), "s": Model(), "t": Model()},
         {"e": ensemble(step() + ", " + step("t", maps='input_map { key: "x" value: "x" } output_map { key: "y" '
                                                        'value: "y2" }'),
                        io=X + 'output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] }, '
                                 '{ name: "y2" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'), "s": Model(), "t": Model()},
         at=('key: "y"', 2)),
    Case("ensemble-data-type", {"e": ensemble(step()), "s": Model(B + IO.replace("TYPE_FP32", "TYPE_INT32", 1))},
         ENS_OK, at='key: "x"'),
    Case("ensemble-dims", {"e": ensemble(step()), "s": Model(B + IO.replace("[ 4 ]", "[ 5 ]", 1))}, ENS_OK,
         at='key: "x"'),
    Case("ensemble-batch-size", {"e": ensemble(step(), mbs=8), "s": Model()}, ENS_OK, at="model_name"),
    Case("ensemble-input-unused",
         {"e": ensemble(step(), io=TWO_INPUTS.replace(B, "")), "s": Model()}, ENS_OK, at='name: "z"'),
    Case("ensemble-output-unconnected",
         {"e": ensemble(step(), io=X + 'output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] }, '
                                     '{ name: "z" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'), "s": Model()}, ENS_OK,
         at='name: "z"'),
    Case("ensemble-output-not-written",
         {"e": ensemble(step(maps='input_map { key: "x" value: "x" } input_map { key: "z" value: "t" } output_map { '
                                  'key: "y" value: "y" }')), "s": Model(TWO_INPUTS)},
         {"e": ensemble(step(maps='input_map { key: "x" value: "x" } input_map { key: "z" value: "x" } output_map { '
                                  'key: "y" value: "y" }')), "s": Model(TWO_INPUTS)}, at="{ model_name"),
    Case("ensemble-tensor-unused",
         {"e": ensemble(step() + ", " + step("t", maps='input_map { key: "x" value: "x" } output_map { key: "y" '
                                                       'value: "t_out" }')), "s": Model(), "t": Model()},
         ENS_OK, at=('key: "y"', 2)),
    Case("ensemble-decoupled",
         {"e": ensemble(step("d", maps='input_map { key: "x" value: "x" } output_map { key: "y" value: "t" }') + ", "
                        + step("s", maps='input_map { key: "x" value: "t" } input_map { key: "z" value: "x" } '
                                         'output_map { key: "y" value: "y" }')),
          "d": Model(B + "model_transaction_policy { decoupled: true }\n" + IO), "s": Model(TWO_INPUTS)},
         {"e": ensemble(step("d", maps='input_map { key: "x" value: "x" } output_map { key: "y" value: "t" }') + ", "
                        + step("s", maps='input_map { key: "x" value: "t" } output_map { key: "y" value: "y" }')),
          "d": Model(B + "model_transaction_policy { decoupled: true }\n" + IO), "s": Model()},
         at=("model_name", 2)),
    # the inner ensemble is decoupled through its step: its output and an ensemble input meet in step 's'
    Case("ensemble-decoupled-nested",
         {"o": ensemble(step("i", maps=TO_T) + ", " + step("s", maps=MIXED)), "i": ensemble(step("d")),
          "d": DECOUPLED, "s": Model(TWO_INPUTS)},
         {"o": ensemble(step("i", maps=TO_T) + ", " + step("s", maps=MIXED)), "i": ensemble(step("p")),
          "p": Model(), "s": Model(TWO_INPUTS)}, at=("model_name", 2)),
    Case("response-cache-ensemble-step", {"e": ensemble(step("d"), extra=CACHE), "d": DECOUPLED},
         {"e": ensemble(step(), extra=CACHE), "s": Model()}, at="response_cache"),
    Case("response-cache-nested-ensemble",
         {"o": ensemble(step("i"), extra=CACHE), "i": ensemble(step("d")), "d": DECOUPLED},
         {"o": ensemble(step("i"), extra=CACHE), "i": ensemble(step()), "s": Model()}, at="response_cache"),
    Case("ensemble-step-batching", {"e": ensemble(step()), "s": Model('backend: "python"\nmax_batch_size: 0\n' + IO)},
         {"e": ensemble(step()), "s": Model('backend: "python"\nmax_batch_size: 0\n'
                                            + IO.replace("[ 4 ]", "[ -1, 4 ]"))}, at='key: "x"'),
    # ------------------------------------------------------------------------------------------------ rate limiter
    # the server loads 'g' first: the second model to declare the resource is refused (Triton QA L0_rate_limiter)
    Case("rate-limiter-scope", {"m": Model(rate_limited(("r1", False, 1))), "g": Model(rate_limited(("r1", True, 2)))},
         {"m": Model(rate_limited(("r2", False, 1))), "g": Model(rate_limited(("r2", False, 2)))},
         at='{ name: "r1"', also=(("g", '{ name: "r1"'),), environment=RATE_LIMITED, load_first=("g",)),
    Case("rate-limiter-scope-one-model", one(rate_limited(("r3", True, 1), ("r3", False, 1))),
         one(rate_limited(("r4", False, 1), ("r4", False, 1))), at='{ name: "r3"',
         plus=(("m", ('{ name: "r3"', 2), "rate-limiter-resource"),), environment=RATE_LIMITED),
    Case("rate-limiter-count", one(rate_limited(("limited", False, 5))), one(rate_limited(("limited", False, 3))),
         at='{ name: "limited"', environment=RATE_LIMITED_TO),
    # ------------------------------------------------------------------------------------------------ environment
    Case("environment-no-gpu", one(B + "instance_group [ { kind: KIND_GPU } ]\n" + IO),
         one(B + "instance_group [ { kind: KIND_AUTO } ]\n" + IO), at="kind", environment=CPU_SERVER),
    Case("environment-gpu-id", one(B + "instance_group [ { kind: KIND_GPU gpus: [ 0 ] } ]\n" + IO),
         one(B + "instance_group [ { kind: KIND_CPU } ]\n" + IO), at="0 ]", environment=CPU_SERVER),
    Case("environment-auto-gpus", one(B + "instance_group [ { kind: KIND_AUTO gpus: [ 0 ] } ]\n" + IO),
         one(B + "instance_group [ { kind: KIND_AUTO } ]\n" + IO), at="gpus", environment=CPU_SERVER),
    Case("environment-backend", one('backend: "nosuch"\nmax_batch_size: 4\n' + IO, {"1/model.bin": "b"}), one(),
         at="backend", environment=CPU_SERVER),
    Case("environment-backend-from-name", {"c.identity": Model(NO_PLATFORM + IO, {"1/": None})},
         {"c.identity": Model(B + IO)}, at="name:", environment=CPU_SERVER),
)

CASE_IDS = {case.id: case for case in CASES}


def lint_repository(path: str | Path) -> list[Finding]:
    """Lint one repository alone: its findings, sorted by file, line, column, rule."""
    return lint([path]).findings
