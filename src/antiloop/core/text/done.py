"""What a final message says was done, by the goal's own verbs (used by the goal check).

A starting state told in the goal's words ("the backup job has failed every night since
Monday") mentions the goal's terms but reports no work; a report says what was done: a goal
verb in its past form ("HTTPS is enabled"), a change told as a past verb ("Drafted the
reply"). A goal that asks for a fact is answered by a statement of it, and its negations are
content. Pure, standard library only.
"""

from __future__ import annotations

import re

from antiloop.core.text.patterns import LazyPattern

__all__ = [
    "acted_cue",
    "asks_for_content",
    "asks_for_fact",
    "content_clause",
    "done_form",
    "goal_verbs",
    "history_after",
]


_MESSAGE_WORD = LazyPattern(r"[A-Za-z][a-z'-]*")
# The verbs of a goal: its first word, and a word after "and", "then" or a comma.
_VERB_AT = frozenset({"and", "then", ","})
_IRREGULAR = {
    "find": ("found",),
    "write": ("wrote", "written"),
    "build": ("built",),
    "set": ("set",),
    "make": ("made",),
    "get": ("got", "gotten"),
    "run": ("ran",),
    "keep": ("kept",),
    "send": ("sent",),
    "put": ("put",),
    "draw": ("drew", "drawn"),
    "give": ("gave", "given"),
    "take": ("took", "taken"),
    "do": ("did", "done"),
    "choose": ("chose", "chosen"),
    "buy": ("bought",),
    "cut": ("cut",),
    "shut": ("shut",),
    "split": ("split",),
    "rewrite": ("rewrote", "rewritten"),
    "speed": ("sped",),
}


def goal_verbs(goal: str) -> tuple[str, ...]:
    """The words of ``goal`` that may be its verbs: the first, and any after "and" or "then".

    Example:
        >>> goal_verbs("Find out why the job fails and fix it.")
        ('find', 'fix')
    """
    tokens = [t for t in re.findall(r"[a-z][a-z'-]*|,", goal.lower()) if t != "please"]
    verbs = [
        t
        for i, t in enumerate(tokens)
        if t not in _VERB_AT and (i == 0 or tokens[i - 1] in _VERB_AT)
    ]
    return tuple(dict.fromkeys(verbs))


def _done_forms(verb: str) -> frozenset[str]:
    forms = set(_IRREGULAR.get(verb, ()))
    if verb.endswith("e"):
        forms.add(verb + "d")
    elif verb.endswith("y") and len(verb) > 2 and verb[-2] not in "aeiou":
        forms.add(verb[:-1] + "ied")
    else:
        forms.add(verb + "ed")
        if len(verb) > 2 and verb[-1] not in "aeiouwxy" and verb[-2] in "aeiou":
            forms.add(verb + verb[-1] + "ed")
    return frozenset(forms)


def done_form(message: str, goal: str) -> str | None:
    """A goal verb in its past form ("Enable HTTPS" -> "HTTPS is enabled"), or ``None``.

    A message that tells the goal's own action as done reports the work, not the state
    before it; a state told in the goal's nouns ("the backup job has failed every night")
    has no such word.

    Example:
        >>> done_form("Booked a table for two at 8 pm.", "Book a table for two.")
        'Booked'
    """
    forms: frozenset[str] = frozenset()
    for verb in goal_verbs(goal):
        forms |= _done_forms(verb)
    if not forms:
        return None
    for found in _MESSAGE_WORD.finditer(message):
        if found.group(0).lower() in forms and not (
            history_after(message, found.end()) or _BY_SYSTEM.match(message, found.end())
        ):
            return found.group(0)
    return None


# Verbs of a goal that asks for a fact: a message that states it is the answer.
_ASK_VERBS = frozenset(
    {"find", "answer", "calculate", "compute", "count", "locate", "tell", "determine", "look"}
)
_WHY = LazyPattern(r"\bwhy\b|\bcause\b|\breason\b", re.IGNORECASE)


def asks_for_fact(goal: str) -> bool:
    """True when every verb of ``goal`` asks for a fact ("Find where ...", "Calculate ...").

    A goal that asks why needs a cause, and one that also asks for a change ("find out why
    it fails and fix it") needs the change: a statement of the facts reaches neither.

    Example:
        >>> asks_for_fact("Find out which service is using port 8080.")
        True
        >>> asks_for_fact("Find out why the job fails and fix it.")
        False
    """
    verbs = goal_verbs(goal)
    return bool(verbs) and set(verbs) <= _ASK_VERBS and _WHY.search(goal) is None


# What an agent did, told as a report: "Drafted the reply", "I bumped the version".
_REPORTED = LazyPattern(
    r"(?:^|[.!?;:]\s+|\n\s*(?:[-*\u2022]\s+)?)((?:[A-Z][a-z]+ed))\s+(?:the|a|an|all|every|it|"
    r"them|\w+)\b|\b(?:i|we)\s+(?:have\s+|'ve\s+|also\s+|then\s+)?([a-z]+ed)\b",
    re.IGNORECASE,
)
# Past verbs that tell a look or an attempt, not a change made.
_LOOKED = frozenset(
    """
    reproduced tried attempted started looked checked investigated examined inspected reviewed
    noticed observed needed wanted planned failed expected suspected assumed considered
    decided confirmed measured profiled traced searched explored analysed analyzed compared
    asked waited opened read counted timed ran grepped listed bisected debugged tested
    """.split()  # noqa: SIM905 - a word list reads better as text
)


def acted_cue(text: str) -> str | None:
    """The past verb that reports a change the agent made ("Drafted the reply"), or ``None``.

    Example:
        >>> acted_cue("Drafted the reply to Maria; it is in the Drafts folder.")
        'Drafted'
        >>> acted_cue("Checked the logs: the job has failed every night.") is None
        True
    """
    for found in _REPORTED.finditer(text):
        word = found.group(1) or found.group(2)
        if word.lower() not in _LOOKED:
            return word
    return None


# Verbs of a goal whose answer is content: its own negations are facts, not a status.
_CONTENT_VERBS = _ASK_VERBS | frozenset(
    {"summarise", "summarize", "explain", "describe", "compare", "outline", "list"}
)
_FIRST_PERSON = LazyPattern(r"\b(?:i|we|i'm|i've|i'd|we've|we're|my|our|me|us)\b", re.IGNORECASE)


def content_clause(goal: str, clause: str) -> bool:
    """True when ``goal`` asks for an answer and ``clause`` tells it, not the agent's work.

    In a summary or an answer, "the Starter plan doesn't include SSO" is the content; "I
    could not find the pricing page" is about the work.

    Example:
        >>> content_clause("Summarise the paper.", "it works on arithmetic, but not on reading")
        True
        >>> content_clause("Summarise the paper.", "I did not finish reading it")
        False
    """
    return asks_for_content(goal) and _FIRST_PERSON.search(clause) is None


def asks_for_content(goal: str) -> bool:
    """True when every verb of ``goal`` asks for an answer, a summary or an explanation."""
    verbs = goal_verbs(goal)
    return bool(verbs) and set(verbs) <= _CONTENT_VERBS


# After a past participle: a date in the past makes it history ("committed in 2023").
_HISTORY = LazyPattern(
    r"\s+(?:[\w-]+\s+){0,2}?(?:(?:in|since|back\s+in|during)\s+(?:19|20)\d\d\b|"
    r"\d+\s+(?:years?|months?|weeks?|days?)\s+ago\b|last\s+(?:year|month|week)\b)",
    re.IGNORECASE,
)
# After a goal verb's participle: the system that does it ("served by the app itself").
_BY_SYSTEM = LazyPattern(r"\s+by\s+(?:the|a|an|its|their)\s+", re.IGNORECASE)


def history_after(text: str, end: int) -> bool:
    """Whether the participle ending at ``end`` is dated in the past: history, not the work.

    Example:
        >>> history_after("both committed in 2023", 14)
        True
        >>> history_after("fixed and committed to main", 19)
        False
    """
    return _HISTORY.match(text, end) is not None
