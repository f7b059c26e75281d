"""Text signals of the goal check for real agents' final messages (used by antiloop.core.semantic).

Real final messages are longer than a one-line claim: they quote code, deliver a document
after "Here is ...:", end with "Now let me submit", describe the starting state ("Reproduced:
... returns nan") or an undone change ("I reverted ...; back to the original code"). Each
signal here is one function, pure and standard library only.
"""

from __future__ import annotations

import re

from antiloop.core.text.patterns import LazyPattern

_FENCED = LazyPattern(r"```.*?(?:```|\Z)", re.DOTALL)
_INLINE_CODE = LazyPattern(r"`[^`\n]+`")
# "Here is the reply:" then the document itself on the next lines.
_DELIVERABLE = LazyPattern(
    r"^\s*(?:here\s+is|here's|here\s+are|below\s+is|voici)\b[^\n]*:[ \t]*\n", re.IGNORECASE
)

# A goal that asks for a piece of writing or an answer: "Here is ...:" then delivers it.
_ARTEFACT_GOAL = LazyPattern(
    r"^\W*(?:please\s+)?(?:write|draft|compose|create|prepare|produce|generate|make\s+a|"
    r"give|list|plan|suggest|propose|translate|summari[sz]e|reply|answer|outline|design|"
    r"draw|chart|plot|book|find|recommend|explain|describe|calculate|compute)\b",
    re.IGNORECASE,
)
_HERE_IS = LazyPattern(r"^(?:here\s+is|here's|here\s+are|voici)$", re.IGNORECASE)

# What may follow "let me", "I'll", "now I will": finishing touches, not the work itself.
_WRAP_UP = LazyPattern(
    r"^\W*(?:now\s+|then\s+|also\s+|just\s+|go\s+ahead\s+and\s+|proceed\s+to\s+)?(?:"
    r"submit\w*|finali[sz]e|wrap\s+up|commit\b|push\b|"
    r"(?:create|make|generate|prepare|write)\s+(?:the\s+|a\s+|my\s+)?(?:final\s+)?"
    r"(?:patch|diff|pull\s+request|pr)\b|"
    r"(?:verify|check|review|look\s+at|view|double[\s-]check)\s+(?:the\s+|my\s+|our\s+)?"
    r"(?:final\s+)?(?:patch|diff|git\s+diff|changes)\b|"
    r"(?:remove|delete|clean\s+up)\s+(?:the\s+|my\s+|all\s+|these\s+|those\s+|our\s+)?"
    r"(?:temporary|temp|tmp|reproduction|reproduce\w*|repro\w*|debug\w*|scratch|helper|"
    r"test\s+(?:script|file)s?|extra)\b)",
    re.IGNORECASE,
)

# A plan or outline of work still to do.
_PLAN = LazyPattern(
    r"\b(?:(?:my|our|the)\s+plan\s+(?:is|here)|here\s+is\s+(?:my|our|the)\s+plan|"
    r"(?:my|our)\s+plan\b)"
    r"|^\W*(?:plan|steps|outline|approach|ideas|next\s+steps|todo)\b\s*(?::|-|in\s+order)",
    re.IGNORECASE,
)

# A change taken back: the work it did is gone.
_REVERTED = LazyPattern(
    r"\b(?:revert(?:ed|ing)?|rolled\s+(?:\w+\s+)?back|roll\s+(?:\w+\s+)?back|backed\s+out|"
    r"undid|undone|turned\s+it\s+off\s+again|"
    r"put\s+(?:the\s+)?original\s+(?:\w+\s+)?back|"
    r"(?:is|are|was|were|it's|we're|i'm)\s+back\s+(?:to|at)\b|^\W*back\s+to\b|"
    r"restored\s+(?:it|them|the\s+original|the\s+old|the\s+previous)|reset\s+(?:the\s+\w+\s+)?to\s+head|"
    r"as\s+it\s+was\s+at\s+the\s+start)",
    re.IGNORECASE,
)
# What a revert may undo while the work itself stands: a stray, unrelated or debug change.
_INCIDENTAL = LazyPattern(
    r"\b(?:unrelated|accidental\w*|unintended|unintentional|stray|temporary|debug\w*|"
    r"by\s+mistake|did\s+not\s+intend|didn't\s+intend|not\s+part\s+of)\b",
    re.IGNORECASE,
)

# The starting state: the problem reproduced or described as it is before any fix.
_STATE = LazyPattern(
    r"\b(?:reproduced|(?:i|we)\s+(?:can|could)\s+reproduce|confirm(?:s|ed)?\s+the\s+"
    r"(?:bug|issue|problem|error|crash)|confirmed\s+(?:on|with|in)\b|at\s+the\s+moment|"
    r"right\s+now|as\s+it\s+stands|currently|before\s+(?:any|my|the)\s+(?:fix|change)\w*|"
    r"the\s+current\s+\w+\s+(?:is|are|has|uses)|^\W*current\s+[\w\s]{1,30}:)",
    re.IGNORECASE,
)
# After a starting-state cue, these say the state was then changed.
_ACTED = LazyPattern(
    r"\b(?:fixed|fix\s+(?:is|was)|modified|changed|updated|patched|added|implemented|resolved|"
    r"solved|now|after\s+(?:the|my)\s+(?:fix|change)|verified\s+the\s+fix|no\s+longer)\b",
    re.IGNORECASE,
)


# A claim that the task itself is done, naming it by reference ("the issue is fixed").
_TASK = r"(?:the|this|that)\s+(?:issue|bug|problem|task|regression|error|crash|ticket|request)"
_CLAIM = LazyPattern(
    rf"\b(?:{_TASK}\s+(?:is|has\s+been|was|should\s+now\s+be)\s+(?:now\s+)?"
    r"(?:fixed|resolved|solved|addressed|done|complete|completed|gone|handled)|"
    rf"(?:i|we)\s+(?:have\s+|'ve\s+)?(?:successfully\s+)?(?:fixed|resolved|solved|addressed|"
    rf"completed)\s+{_TASK}|"
    r"(?:the|my|our)\s+fix\s+is\s+(?:now\s+)?(?:complete|working|in\s+place|done)|"
    r"(?:i|we)\s+(?:have\s+|'ve\s+)?completed\s+the\s+(?:task|work|request)|"
    r"(?:task|work)\s+(?:is\s+)?(?:complete|completed|done)\b)",
    re.IGNORECASE,
)


def task_claim(text: str) -> str | None:
    """The words claiming that the task itself is done, by reference ("the issue is fixed").

    Real final messages name the code they changed more than the goal's words; "I have
    fixed the issue" refers to the goal as a whole.

    Example:
        >>> task_claim("Excellent! The fix is complete and working correctly.")
        'The fix is complete'
    """
    found = _CLAIM.search(text)
    return found.group(0) if found else None


def asks_for_artefact(goal: str) -> bool:
    """True when ``goal`` asks for a piece of writing, a plan or an answer ("Write ...")."""
    return _ARTEFACT_GOAL.search(goal) is not None


def delivers(phrase: str, goal: str) -> bool:
    """True unless ``phrase`` is "here is" and the goal asks for no artefact.

    For a fix, "Here is the logic for collecting parent links:" shows code; it delivers
    nothing. For "Write a haiku", "Here is a haiku:" is the work done.
    """
    return _HERE_IS.match(" ".join(phrase.split())) is None or asks_for_artefact(goal)


def status_text(message: str, goal: str = "") -> str:
    """The part of ``message`` that reports on the work, for the cue search.

    Code blocks and inline code are content, not status: they become the word ``code``.
    For a goal that asks for an artefact, the document delivered after "Here is ...:" is
    content too: only the line that introduces it is kept (the reply's "sorry it arrived
    damaged" says nothing about the task).

    Example:
        >>> status_text("Fixed: `if not x` is gone.")
        'Fixed: code is gone.'
    """
    found = _DELIVERABLE.search(message) if asks_for_artefact(goal) else None
    if found:
        message = message[: found.end()]
    message = _FENCED.sub(" code ", message)
    return _INLINE_CODE.sub("code", message)


def is_wrap_up(after: str) -> bool:
    """True when the words ``after`` an intention are a finishing touch ("submit the patch").

    Example:
        >>> is_wrap_up(" submit the final output:")
        True
        >>> is_wrap_up(" run the tests to see if it works")
        False
    """
    return _WRAP_UP.search(after) is not None


def plan_cue(text: str, goal_terms: frozenset[str]) -> str | None:
    """The words that present a plan ("Here is my plan:", "Steps:"), unless the goal is one."""
    if "plan" in goal_terms:
        return None
    for line in text.splitlines():
        found = _PLAN.search(line)
        if found:
            return found.group(0).strip()
    return None


def reverted_cue(text: str) -> str | None:
    """The words that say a change was taken back, unless what went back was incidental.

    Example:
        >>> reverted_cue("I reverted my edit; the file is back to the original.")
        'reverted'
        >>> reverted_cue("Fixed. I also reverted the unrelated change to setup.cfg.") is None
        True
    """
    for found in _REVERTED.finditer(text):
        around = text[max(0, found.start() - 40) : found.end() + 60]
        if not _INCIDENTAL.search(around):
            return found.group(0).strip()
    return None


def state_cue(text: str) -> str | None:
    """The words that describe the starting state, when nothing after them reports a change.

    Example:
        >>> state_cue("Reproduced: parse('') raises ValueError.")
        'Reproduced'
        >>> state_cue("Reproduced the bug, then fixed the parser; the test passes.") is None
        True
    """
    for found in _STATE.finditer(text):
        if not _ACTED.search(text, found.end()):
            return found.group(0).strip()
    return None
