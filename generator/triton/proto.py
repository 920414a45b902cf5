"""Triton's ``model_config.proto`` messages (``model_config_pb2``) without importing the tritonclient gRPC client.

``tritonclient.grpc``'s ``__init__`` imports grpc, numpy and ml_dtypes, which ``plan``, ``config`` and ``lint`` never
use; the generated module needs only protobuf, so it is loaded from its file under its own name (one module object
per process, the one a later ``import tritonclient.grpc`` reuses). Type checkers see the real generated module.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

__all__ = ["model_config_pb2"]

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
