"""Shared fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"

# Hook processes started by the tests answer in-process: a hook daemon started by one test
# would outlive it. The daemon's own tests (tests/hooks/test_daemon.py) turn it back on, in a
# socket directory of their own.
os.environ["ANTILOOP_HOOKD"] = "0"


@pytest.fixture
def shared() -> Path:
    """The read-only shared folder beside the repository (skips when absent)."""
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is not beside the repository")
    return SHARED
