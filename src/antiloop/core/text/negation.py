"""Negation scope for the goal check: what a negation in a final message applies to.

"No test broke", "grep finds no reference left", "no longer flaky", "without a failure",
"nothing older remains": each negates a defect or a leftover, so it reports success. "The
tests do not pass", "no longer works", "nothing was fixed" negate the work. A negation whose
scope names neither is left to the caller (it blocks, as before). Pure, standard library.
"""

from __future__ import annotations

import re

from antiloop.core.text.patterns import LazyPattern

__all__ = ["GONE", "defect_negated", "former_state", "preserved"]

#: What a phrase that reports success in negative words ("no longer fails") is read as.
GONE = "nomore"

_WORD = LazyPattern(r"[a-z][a-z'-]*")
_NEGATORS = frozenset(
    {"no", "not", "never", "none", "nothing", "without", "zero", "nobody", "neither", "nor", GONE}
)
# Words for what goes wrong: a negation of them reports that it does not.
_DEFECT = LazyPattern(
    r"^(?:fail\w*|error\w*|warn\w*|flak\w*|broke|broken|break|breaks|crash\w*|leak\w*|"
    r"regress\w*|timeouts?|conflicts?|exceptions?|bugs?|problems?|issues?|complaints?|"
    r"incidents?|outages?|hangs?|regressions?|downtime|timed|duplicat\w*|deadlock\w*|"
    r"stall\w*|exceed\w*|went|rose|grew|climbed)$"
)
# Words for what is left over: a negation of them says it is gone.
_LEFTOVER = LazyPattern(r"^(?:left|remain\w*|anymore|longer|again|nomore|referenc\w*|refers?)$")
# Words for the work or a working behaviour: a negation of them says it is not done.
_WORK = LazyPattern(
    r"^(?:pass\w*|work\w*|fix\w*|done|green|succe\w*|build\w*|built|compil\w*|run|runs|"
    r"running|load\w*|start\w*|respond\w*|connect\w*|boot\w*|exist\w*|available|possible|"
    r"supported|resolv\w*|complet\w*|finish\w*|change\w*|help\w*|solv\w*|effect)$"
)
_TIMES_OUT = LazyPattern(r"^tim(?:es|ed|ing|e)\s+out$")
# Where a negation's scope ends.
_SCOPE_END = frozenset({"and", "but", "so", "while", "because", "though", "although", "which"})
_SCOPE = 6
_BACK = 4


def _words_after(text: str) -> list[str]:
    """The words of a negation's scope: up to punctuation, a conjunction or ``_SCOPE`` words."""
    out: list[str] = []
    part = re.split(r"[;:()]|,\s+(?!(?:\w+\s+)?(?:or|and)\s)", text.lower(), maxsplit=1)[0]
    part = part.replace("any more", "anymore")
    for word in _WORD.findall(part):
        if word in _SCOPE_END or len(out) >= _SCOPE:
            break
        out.append(word)
    return out


def _scope_says(words: list[str]) -> bool | None:
    """True when the words name a defect or a leftover, False when they name the work."""
    if any(_WORK.match(w) for w in words):
        return False
    if any(_DEFECT.match(w) or _LEFTOVER.match(w) for w in words):
        return True
    if _TIMES_OUT.match(" ".join(words[:2])):
        return True
    return None


def defect_negated(clause: str, start: int, end: int) -> bool:
    """Whether the negative word at ``clause[start:end]`` negates a defect or a leftover.

    A negator ("no", "without", "nothing") looks at the words after it; a defect or
    leftover word ("broke", "remains", "failure") looks back for a negator a few words
    before it, and then at that negator's scope.

    Example:
        >>> text = "no client-facing test broke"
        >>> defect_negated(text, 0, 2)
        True
        >>> defect_negated("the tests do not pass", 12, 15)
        False
        >>> defect_negated("transient errors no longer fail the upload", 10, 16)
        True
    """
    phrase = " ".join(clause[start:end].lower().split())
    word = (phrase.split() or [""])[0]
    if word.endswith("n't"):
        word = "not"
    if word in _NEGATORS:
        return bool(_scope_says(_words_after(clause[end:])))
    if not (_DEFECT.match(word) or _LEFTOVER.match(word) or _TIMES_OUT.match(phrase)):
        return False
    before = _WORD.findall(re.split(r"[,;:()]", clause[:start].lower())[-1])[-_BACK:]
    for i in range(len(before) - 1, -1, -1):
        if before[i] in _NEGATORS or before[i].endswith("n't"):
            return _scope_says(before[i + 1 :] + _words_after(clause[start:])) is True
    after = _words_after(clause[end:])  # the defect as the subject: "failures no longer fail"
    for i, nxt in enumerate(after[:_BACK]):
        if nxt in _NEGATORS or nxt.endswith("n't"):
            return nxt == GONE or _scope_says(after[i + 1 :]) is True
    return False


# "still" before one of these keeps a behaviour that should stay ("still accepted").
_PRESERVED = LazyPattern(
    r"\s+(?:(?:is|are|gets?|being|be)\s+)?(?:accepted|supported|allowed|added|returned|"
    r"honou?red|respected|available|compatible|valid|readable|reachable|served|kept|"
    r"preserved|intact|backward[s-]?\s*compatible)\b",
    re.IGNORECASE,
)


# "Non-retryable errors still surface", "a real conflict still warns": the cases the change
# leaves alone, named by a contrasting qualifier.
_OTHER_CASES = LazyPattern(
    r"(?:^|[.;:!?]\s+|,\s+(?:and\s+|while\s+)?|\band\s+)(?:an?\s+|the\s+|any\s+)?(?:non-?\w+|real|"
    r"genuine|true|actual|valid|invalid|legitimate|other|normal|regular|unrelated)\s+"
    r"(?:[\w-]+\s+){0,2}still\s*$",
    re.IGNORECASE,
)


def preserved(text: str, end: int) -> bool:
    """Whether the "still" that ends at ``end`` keeps a behaviour ("is still accepted").

    Example:
        >>> preserved("the old name is still accepted", 21)
        True
        >>> preserved("a real conflict still warns", 21)
        True
        >>> preserved("the test still fails", 14)
        False
    """
    return _PRESERVED.match(text, end) is not None or _OTHER_CASES.search(text[:end]) is not None


_FORMER_AFTER = LazyPattern(r"[^().;!?]*?\bbefore\s*(?:\)|[.;,!?]|$)", re.IGNORECASE)
_FORMER_BEFORE = LazyPattern(
    r"\b(?:used\s+to|previously|formerly|originally|until\s+now|before\s+(?:the|my|this)\s+"
    r"(?:fix|change|patch))\b[^().;!?]*$",
    re.IGNORECASE,
)


# "the query that timed out ... now takes 40 ms": a relative clause, then the change.
_RELATIVE = LazyPattern(r"\b(?:that|which|who)\s+(?:\w+\s+){0,2}$", re.IGNORECASE)
_NOW_AFTER = LazyPattern(
    r"[^.;,!?]*?(?<!for\s)(?<!until\s)(?<!right\s)(?<!just\s)\bnow\b", re.IGNORECASE
)


def former_state(clause: str, start: int, end: int) -> bool:
    """Whether the failure word at ``clause[start:end]`` tells the state before the change.

    Example:
        >>> text = "it passed 500 runs (it failed 1 in 30 before)"
        >>> former_state(text, 23, 29)
        True
        >>> former_state("the query that timed out now takes 40 ms", 15, 20)
        True
        >>> former_state("it failed again", 3, 9)
        False
    """
    return (
        _FORMER_AFTER.match(clause, end) is not None
        or _FORMER_BEFORE.search(clause[:start]) is not None
        or (
            _RELATIVE.search(clause[:start]) is not None
            and _NOW_AFTER.match(clause, end) is not None
        )
    )
