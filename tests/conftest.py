"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


@pytest.fixture
def shared() -> Path:
    """The read-only shared folder beside the repository (skips when absent)."""
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is not beside the repository")
    return SHARED
