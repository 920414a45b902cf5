"""Triton's ``model_config.proto`` messages (``model_config_pb2``) without importing the tritonclient gRPC client.

``tritonclient.grpc`` imports grpc, numpy and ml_dtypes, which ``plan``, ``config`` and ``lint`` never use; the
generated module is loaded from its file alone. Every config.pbtxt is parsed here (:func:`parse_model_config`).
"""

from __future__ import annotations

import functools
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from generator.errors import GenRepoError, Problem

__all__ = ["ConfigTextError", "model_config_pb2", "parse_model_config"]

_NAME = "tritonclient.grpc.model_config_pb2"


def _load() -> ModuleType:
    loaded = sys.modules.get(_NAME)
    if loaded is not None:
        return loaded
    package = importlib.util.find_spec("tritonclient")  # the top-level package only: its __init__ imports nothing
    folders = list(package.submodule_search_locations or []) if package is not None else []
    path = next((Path(f) / "grpc" / "model_config_pb2.py" for f in folders
                 if (Path(f) / "grpc" / "model_config_pb2.py").is_file()), None)
    spec = importlib.util.spec_from_file_location(_NAME, path) if path is not None else None
    if spec is None or spec.loader is None:  # an unusual layout: the ordinary import, with its cost
        return importlib.import_module(_NAME)
    module = importlib.util.module_from_spec(spec)
    sys.modules[_NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[_NAME]
        raise
    return module


if TYPE_CHECKING:
    from tritonclient.grpc import model_config_pb2
else:
    model_config_pb2 = _load()


class ConfigTextError(GenRepoError):
    """A config.pbtxt text that is not a ModelConfig: one located problem; ``line``, ``column``, ``reason`` kept."""

    def __init__(self, where: str, line: int, column: int, reason: str) -> None:
        self.line, self.column, self.reason = line, column, reason
        super().__init__([Problem(where, "", f"not a valid config.pbtxt (line {line} column {column}): {reason}")])


def parse_model_config(text: str | bytes, where: str) -> model_config_pb2.ModelConfig:
    """The one config.pbtxt parser: ``text`` (of the file ``where``) as a ModelConfig; ConfigTextError otherwise.

    Protobuf's own limits hold the numbers (an integer past its field's type is a parse error), and a text that is
    not UTF-8 is refused like one that does not parse. Each call returns a message of its own.
    """
    from google.protobuf import text_format

    try:
        decoded = text.decode("utf-8") if isinstance(text, bytes) else text
        if len(decoded) < _MEMO_FROM:
            return text_format.Parse(decoded, model_config_pb2.ModelConfig())
        return model_config_pb2.ModelConfig.FromString(_parsed_once(decoded))
    except UnicodeDecodeError as error:
        raise ConfigTextError(where, 1, 1, f"not UTF-8 text (byte {error.start})") from None
    except text_format.ParseError as error:
        reason = re.sub(r"^\d+:\d+ : ", "", str(error))
        if len(reason) > 300:  # the parser quotes the whole line: a hostile line may be megabytes long
            reason = f"{reason[:200]}...{reason[-60:]}"
        raise ConfigTextError(where, error.GetLine() or 1, error.GetColumn() or 1, reason) from None


#: Texts this long are parsed once per process: a 10,000-step ensemble takes seconds in protobuf's pure-Python text
#: parser, and report (its models, then lint) reads it twice; a copy comes from the binary form, read natively.
_MEMO_FROM = 64 * 1024


@functools.lru_cache(maxsize=8)
def _parsed_once(text: str) -> bytes:
    from google.protobuf import text_format

    return text_format.Parse(text, model_config_pb2.ModelConfig()).SerializeToString()
