"""Behaviour pinned by the mutation run (bench/mutation.py): each test kills a core mutant."""

from __future__ import annotations
