"""ANSI colour for people at a terminal: never in a pipe, never under ``NO_COLOR``.

Example:
    >>> Painter(False)("stop", "red")
    'stop'
"""

from __future__ import annotations

import os
from typing import IO, Any

COLOURS = {"red": "31", "green": "32", "yellow": "33", "cyan": "36", "dim": "2", "bold": "1"}


def wants_colour(stream: IO[Any], choice: str = "auto") -> bool:
    """``always``, ``never``, or ``auto``: a terminal, and ``NO_COLOR`` unset or empty."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Painter:
    """ANSI colours when enabled, plain text otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    @classmethod
    def for_stream(cls, stream: IO[Any], choice: str = "auto") -> Painter:
        """A painter for ``stream``: on only where ``wants_colour`` says so."""
        return cls(wants_colour(stream, choice))

    def __call__(self, text: str, colour: str) -> str:
        """Paint ``text`` in ``colour``."""
        if not self.enabled:
            return text
        return f"\033[{COLOURS[colour]}m{text}\033[0m"
