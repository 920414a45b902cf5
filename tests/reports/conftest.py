"""Fixtures of the reports' tests."""

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def example_build_cache(example_repository: Path) -> Path:
    """The build cache ``example_repository`` filled: a CLI build of the example models with it is a cache hit."""
    return example_repository.parent / "cache"
