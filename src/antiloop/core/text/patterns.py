"""Regular expressions compiled on their first use (a hook process reads one step).

``LazyPattern`` is one pattern; ``Patterns`` is a set of them by name. Pure Python on purpose
(not in the mypyc build): after its first use a ``Patterns`` entry is a plain instance
attribute, which compiled and interpreted code read at the cost of a dict lookup.

Example:
    >>> RX = Patterns(word=r"[a-z]+")
    >>> RX.word.findall("two words")
    ['two', 'words']
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["LazyPattern", "Patterns"]


class LazyPattern:
    """A regular expression compiled on its first use (modules with many patterns import fast).

    Example:
        >>> WORD = LazyPattern("[a-z]+")
        >>> WORD.findall("two words")
        ['two', 'words']
    """

    __slots__ = ("_compiled", "flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        """The compiled pattern."""
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self.pattern, self.flags)
        return compiled

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        """``re.Pattern.search``."""
        return self.compiled.search(string, pos, endpos)

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        """``re.Pattern.match``."""
        return self.compiled.match(string, pos, endpos)

    def fullmatch(
        self, string: str, pos: int = 0, endpos: int = sys.maxsize
    ) -> re.Match[str] | None:
        """``re.Pattern.fullmatch``."""
        return self.compiled.fullmatch(string, pos, endpos)

    def finditer(
        self, string: str, pos: int = 0, endpos: int = sys.maxsize
    ) -> Iterator[re.Match[str]]:
        """``re.Pattern.finditer``."""
        return self.compiled.finditer(string, pos, endpos)

    def findall(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> list[Any]:
        """``re.Pattern.findall``."""
        return self.compiled.findall(string, pos, endpos)

    def sub(self, repl: str | Callable[[re.Match[str]], str], string: str, count: int = 0) -> str:
        """``re.Pattern.sub``."""
        return self.compiled.sub(repl, string, count)

    def split(self, string: str, maxsplit: int = 0) -> list[str | Any]:
        """``re.Pattern.split``."""
        return self.compiled.split(string, maxsplit)


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
