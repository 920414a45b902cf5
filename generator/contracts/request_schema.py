"""A model's contract as a JSON Schema (Draft 2020-12) of a valid KServe v2 JSON inference request.

Written beside the contract and printed by ``gen-repo contract --format jsonschema``, so any client can check a
request before Triton sees it; what JSON Schema cannot express is listed in docs/client.md. Deterministic bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from generator.dtypes import by_triton, config_data_type
from generator.json_reader import parse_json

__all__ = [
    "REQUEST_SCHEMA_FILE", "contract_files", "json_request", "render_request_schema", "request_schema",
    "write_contract_files",
]

#: A model's request schema, relative to its version folder (beside ``gen_repo/contract.json``).
REQUEST_SCHEMA_FILE = "gen_repo/request.schema.json"
_DRAFT = "https://json-schema.org/draft/2020-12/schema"
_PROTOCOL = "https://kserve.github.io/website/latest/modelserving/data_plane/v2_protocol/"


def _leaf(data_type: str) -> dict[str, Any]:
    """One element of ``data`` in JSON for a config data type: its JSON type and, for integers, the type's range."""
    dtype = by_triton(config_data_type(data_type))
    assert dtype is not None  # config_data_type refused anything else
    if dtype.wire == "BOOL":
        return {"type": "boolean"}
    if dtype.wire == "BYTES":
        return {"type": "string"}
    if dtype.floating:
        return {"type": "number"}
    assert dtype.byte_size is not None
    bits = 8 * dtype.byte_size
    if dtype.wire.startswith("U"):
        return {"type": "integer", "minimum": 0, "maximum": 2**bits - 1}
    return {"type": "integer", "minimum": -(2 ** (bits - 1)), "maximum": 2 ** (bits - 1) - 1}


def _domain(leaf: dict[str, Any], tensor: Mapping[str, Any]) -> dict[str, Any]:
    """``leaf`` narrowed to the input's value domain (``value_range`` or ``values``), as the contract records it."""
    if "values" in tensor:
        values = list(tensor["values"])
        if leaf["type"] == "boolean":  # a bool domain is recorded as 0/1 or false/true; JSON has only booleans
            values = sorted({bool(v) for v in values})
        return {**leaf, "enum": values}
    if "value_range" in tensor:
        low, high = tensor["value_range"]
        narrowed = dict(leaf)
        if leaf["type"] == "boolean":
            return {"type": "boolean", "enum": [v for v in (False, True) if (low is None or v >= low)
                                                and (high is None or v <= high)]}
        if low is not None:
            narrowed["minimum"] = max(low, leaf.get("minimum", low))
        if high is not None:
            narrowed["maximum"] = min(high, leaf.get("maximum", high))
        return narrowed
    return leaf


def _element(tensor: Mapping[str, Any]) -> dict[str, Any]:
    """One element of the input's ``data``: its JSON type within its data type and value domain."""
    element = _domain(_leaf(str(tensor["data_type"])), tensor)
    if "source" in tensor:
        element["description"] = str(tensor["source"])
    return element


def _axis(low: int, high: int | None) -> dict[str, Any]:
    axis: dict[str, Any] = {"type": "integer", "minimum": low}
    if high is not None and high >= 0:  # None or -1: no upper bound (a -1 dim known only from a config)
        axis["maximum"] = high
    return axis


def _input(tensor: Mapping[str, Any], max_batch_size: int, ref: str) -> dict[str, Any]:
    """What one input's entry of ``inputs`` must hold, beyond the shape every entry has."""
    low_shape = [int(d) for d in tensor["min_shape"]]
    high_shape = [None if d is None else int(d) for d in tensor["max_shape"]]
    axes = [_axis(lo, hi) for lo, hi in zip(low_shape, high_shape, strict=True)]
    if max_batch_size > 0 and axes:
        # Axis 0 is the batch: 1..max_batch_size, narrowed by the profile's range (as ModelContract.validate).
        high = axes[0].get("maximum", max_batch_size)
        axes[0] = {**axes[0], "maximum": min(high, max_batch_size)}
    dtype = by_triton(config_data_type(str(tensor["data_type"])))
    assert dtype is not None
    return {
        "type": "object",
        "properties": {
            "datatype": {"const": dtype.wire},
            "shape": {"type": "array", "prefixItems": axes, "minItems": len(axes), "maxItems": len(axes),
                      "items": False},
            # Flat (row-major) or nested as the shape: Triton reads both; each element is checked at any depth.
            "data": {"$ref": f"{ref}_data"},
        },
    }


def _data(ref: str) -> dict[str, Any]:
    return {"type": "array", "items": {"anyOf": [{"$ref": f"{ref}_element"}, {"$ref": f"{ref}_data"}]}}


def _def_name(index: int) -> str:
    # By position, not name: a tensor name then never needs escaping in a JSON pointer.
    return f"input{index}"


def request_schema(contract: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a valid KServe v2 JSON request to the model ``contract`` describes.

    ``contract`` is a ``contract.json`` document or :meth:`generator.client.ModelContract.to_dict`'s form; only the
    fields the module docstring names are read, so both give the same schema. Raises KeyError or ValueError on a
    contract without them (a contract is checked when it is read).
    """
    model = str(contract["model"])
    max_batch_size = int(contract.get("max_batch_size", 0))
    inputs: Sequence[Mapping[str, Any]] = list(contract.get("inputs", []))
    outputs = [str(t["name"]) for t in contract.get("outputs", [])]
    defs: dict[str, Any] = {}
    per_input = []
    names_present = []
    for index, tensor in enumerate(inputs):
        name = str(tensor["name"])
        key = _def_name(index)
        ref = f"#/$defs/{key}"
        defs[key] = _input(tensor, max_batch_size, ref)
        defs[f"{key}_data"] = _data(ref)
        defs[f"{key}_element"] = _element(tensor)
        per_input.append({"if": {"type": "object", "properties": {"name": {"const": name}}, "required": ["name"]},
                          "then": {"$ref": ref}})
        # Present once (twice is ambiguous; Triton refuses it), and at least once unless the config says optional.
        names_present.append({
            "contains": {"type": "object", "properties": {"name": {"const": name}}, "required": ["name"]},
            "minContains": 0 if tensor.get("optional") else 1,
            "maxContains": 1,
        })
    defs["input"] = {
        "type": "object",
        "required": ["name", "datatype", "shape", "data"],
        "properties": {
            "name": {"enum": [str(t["name"]) for t in inputs]},
            "datatype": {"type": "string"},
            "shape": {"type": "array", "items": {"type": "integer", "minimum": 0}},
            "data": {"type": "array"},
            "parameters": {"type": "object"},
        },
        "additionalProperties": False,
        "allOf": per_input,
    }
    return {
        "$schema": _DRAFT,
        "title": f"KServe v2 JSON inference request for model '{model}'",
        "description": (f"Written by gen-repo from the model's contract ({_PROTOCOL}). Not expressible here, checked "
                        "by generator.client.ModelContract.validate and Triton: data's length against the product "
                        "of shape, and one batch size (axis 0) for every input."),
        "type": "object",
        "required": ["inputs"],
        "properties": {
            "id": {"type": "string"},
            "parameters": {"type": "object"},
            "inputs": {"type": "array", "items": {"$ref": "#/$defs/input"}, "allOf": names_present},
            "outputs": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {"name": {"enum": outputs}, "parameters": {"type": "object"}},
                    "additionalProperties": False,
                },
            },
        },
        "additionalProperties": False,
        "$defs": defs,
    }


def render_request_schema(contract: Mapping[str, Any]) -> str:
    """``request.schema.json``'s text: the same bytes for the same contract (sorted keys, 2-space indent, newline)."""
    return json.dumps(request_schema(contract), indent=2, sort_keys=True, ensure_ascii=True) + "\n"


def contract_files(contract_text: str) -> dict[str, str]:
    """A model's contract files from its ``contract.json`` text: version-folder-relative path -> text.

    ``gen_repo/contract.json`` as given and ``gen_repo/request.schema.json`` made from it, so the schema says what
    the contract beside it says (the build's cache key holds both texts).
    """
    # Imported here: the client reads schemas and must not pay for the config renderer model_files imports.
    from generator.planning.model_files import CONTRACT_FILE

    schema = render_request_schema(parse_json(contract_text, CONTRACT_FILE))
    return {CONTRACT_FILE: contract_text, REQUEST_SCHEMA_FILE: schema}


def write_contract_files(version_folder: Path, contract_text: str) -> list[str]:
    """Write :func:`contract_files` into a build's version folder (a fresh work folder); returns their paths."""
    files = contract_files(contract_text)
    for name, text in files.items():
        (version_folder / name).parent.mkdir(parents=True, exist_ok=True)
        (version_folder / name).write_text(text, encoding="utf-8")
    return list(files)


def json_request(inputs: Mapping[str, Any], datatypes: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A KServe v2 JSON request body for ``name -> numpy array`` (``data`` flat, row-major).

    The datatype is ``datatypes[name]`` (wire names, ``"FP32"``) where given, else the array's own (numpy's dtype
    as Triton names it); bytes become strings (UTF-8). Raises ValueError for a dtype Triton has no datatype for.
    """
    import numpy as np

    from generator.dtypes import by_numpy

    body = []
    for name, value in inputs.items():
        array = np.asarray(value)
        datatype = (datatypes or {}).get(name)
        if datatype is None:
            found = by_numpy("object" if array.dtype.kind in "OS" else array.dtype.name)
            if found is None:
                raise ValueError(f"input '{name}': numpy dtype {array.dtype} has no Triton datatype")
            datatype = found.wire
        flat = array.ravel().tolist()
        if array.dtype.kind in "OS":
            flat = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in flat]
        body.append({"name": name, "datatype": datatype, "shape": [int(d) for d in array.shape], "data": flat})
    return {"inputs": body}
