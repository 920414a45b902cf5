"""Triton's ``model_config.proto`` messages without importing the tritonclient gRPC client.

``from tritonclient.grpc import model_config_pb2`` runs ``tritonclient/grpc/__init__.py`` first, which imports grpc,
numpy and ml_dtypes: about 0.13 s that ``gen-repo plan``, ``config`` and ``lint`` never use. The generated module
itself needs only protobuf, so it is loaded from its file under its own name, ``tritonclient.grpc.model_config_pb2``:
one module object for the whole process, the same one a later ``import tritonclient.grpc`` finds in
``sys.modules`` and reuses (so its descriptors are registered once).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

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


model_config_pb2 = _load()
