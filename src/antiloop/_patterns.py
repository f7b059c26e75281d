"""Named regular expressions, each compiled on its first use (a hook process reads one step).

Pure Python on purpose (not in the mypyc build): after its first use a pattern is a plain
instance attribute, which compiled and interpreted code read at the cost of a dict lookup.

Example:
    >>> RX = Patterns(word=r"[a-z]+")
    >>> RX.word.findall("two words")
    ['two', 'words']
"""

from __future__ import annotations

import re

__all__ = ["Patterns"]


class Patterns:
    """Regular expressions by name, compiled on first use."""

    def __init__(self, **sources: str) -> None:
        self._sources = sources

    def __getattr__(self, name: str) -> re.Pattern[str]:
        source = self.__dict__["_sources"].get(name)
        if source is None:
            raise AttributeError(name)
        compiled = re.compile(source)
        setattr(self, name, compiled)
        return compiled
