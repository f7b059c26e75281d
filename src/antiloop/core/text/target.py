"""A goal's numeric target against the measure a final message reports (the goal check).

"Shrink the bundle below 200 KB" is not reached by "Down to 236 KB": the message reports
progress in the goal's own unit, on the wrong side of the goal's bound. Only a measure told
as the outcome ("down to", "now", "->") in the same unit is compared. Pure, standard library.
"""

from __future__ import annotations

import re

from antiloop.core.text.patterns import LazyPattern

__all__ = ["missed"]

_NUMBER = r"(\d[\d,]*(?:\.\d+)?)\s*([a-z%]+)?"
_UPPER = LazyPattern(rf"\b(?:below|under|less\s+than|at\s+most|within)\s+{_NUMBER}", re.I)
_LOWER = LazyPattern(
    rf"\b(?:at\s+least|above|more\s+than)\s+{_NUMBER}|\b{_NUMBER}\s+or\s+(?:more|higher)\b",
    re.I,
)
_OUTCOME = LazyPattern(
    r"(?:down\s+to|up\s+to|->|\u2192|reduced\s+to|cut\s+to|brought\s+to|raised\s+to|"
    r"is\s+now(?:\s+at)?|are\s+now(?:\s+at)?|now\s+at|now\s+takes|now\s+is)\s+"
    rf"{_NUMBER}",
    re.I,
)
_MINUTES = frozenset({"m", "min", "mins", "minute", "minutes"})
_SECONDS = frozenset({"s", "sec", "secs", "second", "seconds"})


def _value(text: str) -> float:
    return float(text.replace(",", ""))


def _same_unit(a: str | None, b: str | None) -> bool:
    a, b = (a or "").lower(), (b or "").lower()
    if a == b:
        return True
    return any(a in group and b in group for group in (_MINUTES, _SECONDS))


def _bounds(goal: str) -> list[tuple[str, float, str | None]]:
    out = [("upper", _value(m.group(1)), m.group(2)) for m in _UPPER.finditer(goal)]
    for m in _LOWER.finditer(goal):
        number, unit = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        out.append(("lower", _value(number), unit))
    return out


def missed(goal: str, text: str) -> str | None:
    """The outcome measure of ``text`` on the wrong side of ``goal``'s bound, or ``None``.

    Example:
        >>> missed("Shrink the bundle below 200 KB.", "Down to 236 KB after the change.")
        '236 KB'
        >>> missed("Shrink the bundle below 200 KB.", "412 KB -> 168 KB gzipped.") is None
        True
        >>> missed("Raise coverage to at least 80%.", "Coverage is now 74%.")
        '74%'
    """
    bounds = _bounds(goal)
    if not bounds:
        return None
    for m in _OUTCOME.finditer(text):
        value, unit = _value(m.group(1)), m.group(2)
        for side, bound, bound_unit in bounds:
            if not _same_unit(unit, bound_unit):
                continue
            if (side == "upper" and value > bound) or (side == "lower" and value < bound):
                return text[m.start(1) : m.end(2) if unit else m.end(1)]
    return None
