"""Fixtures shared by the repository/ tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    return tmp_path / "out" / "model_repository"
