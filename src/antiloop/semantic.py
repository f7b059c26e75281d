"""Text rules for the semantic checks: goal cues, digit masking, counters versus measures.

Similarity alone cannot tell "the login bug is fixed" from "the login bug is still not fixed"
(PROTOCOL.md section 5); these small rules give the second signals.
"""

from __future__ import annotations

import re

_DIGITS = re.compile(r"\d+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_WORD = re.compile(r"[a-z0-9]+")

# A message that says the goal is not reached: negation, failure, intention, open work.
_NOT_REACHED = re.compile(
    r"\b(?:not|no\s+longer|never|cannot|can't|couldn't|isn't|aren't|wasn't|weren't|doesn't|"
    r"didn't|won't|haven't|hasn't|unable|failed|fails|failing|still|yet\s+to|need\s+to|"
    r"needs\s+to|have\s+to|has\s+to|will|going\s+to|about\s+to|plan\s+to|next|todo|"
    r"let\s+me|i'll|trying|attempting|retry|unfortunately|broken|incomplete|partially|"
    r"remaining)\b|\?",
    re.IGNORECASE,
)

# Words that make the next number a counter (attempt 3 -> attempt 4 is no progress).
_COUNTER_WORDS = frozenset(
    {
        "attempt",
        "attempts",
        "try",
        "tries",
        "retry",
        "retries",
        "retrying",
        "iteration",
        "iter",
        "step",
        "steps",
        "round",
        "pass",
        "run",
        "loop",
        "cycle",
        "time",
        "times",
        "turn",
        "no",
        "number",
        "n",
        "poll",
        "check",
        "again",
    }
)
_COUNTER_BEFORE = re.compile(r"([a-z]+)\W{0,3}$", re.IGNORECASE)


def mask_digits(text: str) -> str:
    """Replace every run of digits with ``0``, so numbers alone never make texts differ."""
    return _DIGITS.sub("0", text)


def not_reached_cue(message: str) -> str | None:
    """The word of ``message`` that says the goal is not reached yet, or ``None``."""
    found = _NOT_REACHED.search(message)
    return found.group(0) if found else None


def is_blank(message: str) -> bool:
    """A message with nothing in it but white space."""
    return not message.strip()


def _numbers_with_lead(text: str) -> list[tuple[str, str]]:
    out = []
    for m in _NUMBER.finditer(text):
        lead = _COUNTER_BEFORE.search(text, max(0, m.start() - 24), m.start())
        out.append((m.group(0), lead.group(1).lower() if lead else ""))
    return out


def numbers_progress(before: str, after: str) -> bool:
    """True when a number that changed from ``before`` to ``after`` is a measure moving.

    A number that follows a counter word (attempt, retry, iteration, step, round...) is a
    counter: it changing is no progress. Any other changed number (a failing count, a
    position, a percentage) is a measure: it changing is progress.
    """
    a = _numbers_with_lead(before)
    b = _numbers_with_lead(after)
    if len(a) != len(b):
        return True
    for (num_a, lead_a), (num_b, lead_b) in zip(a, b, strict=True):
        if num_a == num_b:
            continue
        if lead_a in _COUNTER_WORDS or lead_b in _COUNTER_WORDS:
            continue
        return True
    return False


def key_terms(text: str) -> frozenset[str]:
    """The content words of ``text`` (lower-cased, three letters or more)."""
    return frozenset(w for w in _WORD.findall(text.lower()) if len(w) >= 3)
