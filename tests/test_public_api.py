"""The public API stays honest."""

from __future__ import annotations

import antiloop


def test_all_is_sorted_and_complete():
    """__all__ is sorted and names every public object the package exports."""
    assert antiloop.__all__ == sorted(antiloop.__all__)
    public = {n for n in vars(antiloop) if not n.startswith("_")} - {
        "config",
        "detectors",
        "errors",
        "events",
        "guard",
        "history",
        "verdict",
        "canonical",
        "readings",
        "fingerprint",
        "semantic",
        "embed",
        "testing",
        "demo",
        "commands",
        "cli",
        "traces",
    }
    assert public <= set(antiloop.__all__)
    for name in antiloop.__all__:
        assert hasattr(antiloop, name), name
