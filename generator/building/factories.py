"""User code: a manifest's ``module:callable`` factories, imported (only with ``--allow-code``) from its code path.

The folders searched first are the build's (:func:`generator.building.pipeline.factory_search_path`); a factory that
fails is the model's problem, located at its manifest entry.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from generator.errors import GenRepoError, Problem
from generator.planning.options import BuildOptions

__all__ = ["factory_import_path", "import_factory"]


@contextlib.contextmanager
def factory_import_path(folders: Sequence[str]) -> Iterator[None]:
    """Temporarily put ``folders`` at the front of ``sys.path`` (in order) while a factory is found or imported."""
    added = [f for f in folders if f not in sys.path]
    sys.path[:0] = added
    try:
        yield
    finally:
        for folder in added:
            with contextlib.suppress(ValueError):
                sys.path.remove(folder)


def import_factory(spec: str, options: BuildOptions, where: Problem, what: str = "source factory") -> Any:
    """Call ``module:callable`` (only with --allow-code) and return what it makes (an nn.Module, or sample calls)."""
    if not options.allow_code:
        raise GenRepoError(
            [replace(where, message=f"{what} {spec!r} is user code; pass --allow-code to import and run it")]
        )
    module_name, _, attr = spec.partition(":")
    try:
        with factory_import_path(options.code_path):
            factory = importlib.import_module(module_name)
        target: Any = factory
        for part in attr.split("."):
            target = getattr(target, part)
        module = target()
    except Exception as error:  # user code: anything can happen; report it as the model's problem
        message = f"{what} {spec!r} failed: {type(error).__name__}: {error}"
        raise GenRepoError([replace(where, message=message)]) from error
    return module
