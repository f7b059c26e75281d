"""The stagnation rules: a changed counter is no progress, a changed measure is; the decayed score.

``antiloop.core.detectors.Stagnation`` and ``antiloop calibrate`` decide with these; they are
re-exported by ``antiloop.core.semantic``. Standard library and pure: no embedder is called.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from antiloop.core.text.patterns import LazyPattern

__all__ = ["DECAY", "FLOOR_MARGIN", "decayed_similarity", "numbers_progress", "stalled"]

_NUMBER = LazyPattern(r"\d+(?:\.\d+)?")

# Words that make the next (or previous) number a counter: attempt 3 -> 4 is no progress.
_COUNTER_WORDS = frozenset(
    """
    attempt attempts try tries tried retry retries retrying iteration iterations iter step
    steps round rounds pass run runs loop cycle time times turn turns no number n poll polls
    check checked again epoch trial waited waiting seconds second minutes elapsed
    """.split()  # noqa: SIM905 - a word list reads better as text
)
_WORD_BEFORE = LazyPattern(r"([a-z]+)\W{0,3}$", re.IGNORECASE)
_WORD_AFTER = LazyPattern(r"^\W{0,2}([a-z]+)", re.IGNORECASE)


# The stagnation check compares each message with the next ones of its window: read once.
@functools.lru_cache(maxsize=256)
def _numbers(text: str) -> tuple[str, ...]:
    return tuple(_NUMBER.findall(text))


def _is_counter(text: str, number: re.Match[str]) -> bool:
    """The number is a counter: a counter word right before or right after it."""
    before = _WORD_BEFORE.search(text, max(0, number.start() - 24), number.start())
    if before is not None and before.group(1).lower() in _COUNTER_WORDS:
        return True
    after = _WORD_AFTER.search(text[number.end() : number.end() + 24])
    return after is not None and after.group(1).lower() in _COUNTER_WORDS


def numbers_progress(before: str, after: str) -> bool:
    """True when a number that changed from ``before`` to ``after`` is a measure moving.

    A number next to a counter word (attempt 3, retry 4, 5 times, iteration 6...) is a
    counter: it changing is no progress. Any other changed number (a failing count, a line
    position, a percentage) is a measure: it changing is progress. A different count of
    numbers is progress too (the texts differ in more than a counter).

    Example:
        >>> numbers_progress("12 tests failing", "2 tests failing")
        True
        >>> numbers_progress("attempt 3: same error", "attempt 4: same error")
        False
    """
    a = _numbers(before)
    b = _numbers(after)
    if len(a) != len(b):
        return True
    if a == b:
        return False
    # Only a changed number's words are read, not the words around every number.
    matches: list[re.Match[str]] = []
    for i, (num_a, num_b) in enumerate(zip(a, b, strict=True)):
        if num_a == num_b:
            continue
        if not matches:
            matches = list(_NUMBER.finditer(before))
        if not _is_counter(before, matches[i]):
            return True
    return False


#: Weight of a message one step older than another, in the stagnation score.
DECAY = 0.8


def decayed_similarity(similarities: Sequence[float], decay: float = DECAY) -> float:
    """The weighted mean of the similarities to earlier messages, the most recent first.

    The message ``k`` steps back weighs ``decay ** (k - 1)``: recent steps count more than
    old ones, so a loop that has just begun weighs more than an old resemblance.
    """
    if not similarities:
        return 0.0
    weights = [decay**k for k in range(len(similarities))]
    return sum(w * s for w, s in zip(weights, similarities, strict=True)) / sum(weights)


#: No single earlier message may be less similar than the threshold minus this margin.
FLOOR_MARGIN = 0.05


def stalled(
    similarities: Sequence[float],
    progressed: Sequence[bool],
    threshold: float,
    decay: float = DECAY,
) -> bool:
    """The stagnation decision over the current message and the earlier ones (recent first).

    Stalled when no earlier message is followed by progress in numbers (``progressed``), the
    time-decayed similarity is at least ``threshold``, and none of the similarities is below
    ``threshold - FLOOR_MARGIN``.
    """
    if not similarities or any(progressed):
        return False
    if min(similarities) < threshold - FLOOR_MARGIN:
        return False
    return decayed_similarity(similarities, decay) >= threshold
