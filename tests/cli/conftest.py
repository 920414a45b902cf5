"""Fixtures of the commands' tests."""

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def built_example_repository(example_repository: Path) -> Path:
    """The example manifest built by ``gen-repo build``'s library call (``--target python``, own cache), once.

    The same session build as ``example_repository`` (which already runs the real ``build_repository``); read-only.
    """
    return example_repository
