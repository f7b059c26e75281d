"""The public API stays honest."""

from __future__ import annotations

import inspect

import antiloop


def test_all_is_sorted_and_complete():
    """__all__ is sorted and names every public object the package exports."""
    assert antiloop.__all__ == sorted(antiloop.__all__)
    public = {
        name
        for name, value in vars(antiloop).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert public <= set(antiloop.__all__)
    for name in antiloop.__all__:
        assert hasattr(antiloop, name), name
