"""Text rules for the semantic checks: goal cues, digit masking, counters versus measures.

Similarity alone cannot tell "the login bug is fixed" from "the login bug is still not fixed"
(all-MiniLM-L6-v2 scores them 0.97), nor "attempt 3" from "attempt 4" (docs/protocol.md section 5).
These small rules give the second signals; the decisions themselves (``goal_reached``,
``stalled``) live here too, so the detectors and ``antiloop calibrate`` judge the same way.

``Embedder`` is the protocol the semantic detectors are given an embedder by; ``antiloop.embed``
implements it. Everything else here is the standard library and pure: no embedder is called.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from antiloop.core.text import cues, done, negation, target
from antiloop.core.text.patterns import LazyPattern
from antiloop.core.text.stagnation import (
    DECAY as DECAY,  # re-exported: the detectors read them here
)
from antiloop.core.text.stagnation import FLOOR_MARGIN as FLOOR_MARGIN
from antiloop.core.text.stagnation import decayed_similarity as decayed_similarity
from antiloop.core.text.stagnation import numbers_progress as numbers_progress
from antiloop.core.text.stagnation import stalled as stalled


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit (L2-normalised) vectors of one fixed dimension.

    Example::

        vectors = get_embedder("ngram").embed(["tests pass", "all tests pass"])
    """

    @property
    def id(self) -> str:
        """The model id (``ngram-v1``, ``minilm-l6-int8``); thresholds are stored per id."""
        ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text, in order."""
        ...


_DIGITS = LazyPattern(r"\d+")
_WORD = LazyPattern(r"[a-z][a-z0-9_']*|\d+")
_SPACE = LazyPattern(r"\s+")
_CLAUSE = LazyPattern(r"(?<=[.!?;:])\s+|\n+|,\s*(?=but\b|however\b|though\b|although\b)")
_EDGE = LazyPattern(r"^[\W_]+|[\W_]+$")

_STOPWORDS = frozenset(
    """
    a about above after again all also am an and any are as at be been before being below
    between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you your yours yourself
    yourselves make makes made get gets got let lets please sure one two three using use
    """.split()  # noqa: SIM905 - a word list reads better as text
)

_SUFFIXES = ("ings", "ing", "edly", "ed", "ies", "xes", "ches", "shes", "sses", "ly", "s")

# Phrases that look negative but report success: neutralised before the cue search.
_POSITIVE_PHRASES = LazyPattern(
    r"\b(?:no\s+longer\s+(?:fails?|failing|crash(?:es)?|errors?|raises?|throws?|breaks?|"
    r"hangs?|leaks?|returns?\s+\d+|(?!(?:works?|pass(?:es)?|builds?|compiles?|runs?|loads?|"
    r"starts?|responds?|succeeds?|connects?|boots?|exists?|available|possible|supported)\b)"
    r"[a-z]+s\b)|\d{3}\s+not\s+found|no\s+(?:more\s+)?(?:errors?|failures?|warnings?|regressions?|"
    r"issues|problems|references|occurrences|remaining\s+\w+|other\s+(?:changes|issues))|"
    r"nothing\s+(?:else|left|remains|more)|not\s+only|(?:previously|formerly|originally)\s+"
    r"(?:failing|failed|broken)|(?:was|were|that\s+was|which\s+was)\s+(?:failing|broken)|"
    r"(?:0|zero|none)\s+(?:failures?|failing|failed|errors?)|without\s+(?:any\s+)?(?:errors?|"
    r"failures?|warnings?|problems)|still\s+(?:pass(?:es|ing)?|works?|green|runs?|loads?|builds?|"
    r"compiles?|succeeds?|behaves?)|"
    r"let\s+me\s+know|feel\s+free|if\s+you\s+(?:need|want)|nothing\s+else|"
    r"(?:can't|cannot)\s+be\s+\w+ed\s+any\s*more|can\s+no\s+longer\s+be)\b",
    re.IGNORECASE,
)

# Says the work is ahead: an intention, a plan, a step being taken.
_INTENTION = LazyPattern(
    r"\b(?:(?:i|we)\s+(?:will|shall|am\s+going\s+to|are\s+going\s+to|plan\s+to|intend\s+to|"
    r"need\s+to|have\s+to|must|should|want\s+to|am\s+about\s+to|are\s+about\s+to|am\s+trying|"
    r"are\s+trying|am\s+attempting|am\s+now|still\s+need|still\s+have)|i'll|we'll|i'm\s+going|"
    r"i'm\s+about|i'm\s+trying|we're\s+going|i'd\s+like\s+to|let\s+me|let's|let\s+us|"
    r"next,?\s+(?:i|we|let)|going\s+to|about\s+to|trying\s+to|attempting\s+to|todo|to\s+do:|"
    r"in\s+progress|working\s+on|first,?\s+(?:i|we)|then\s+(?:i|we)\s+(?:will|can)|"
    r"(?:i|we)\s+(?:still\s+)?need|needs\s+to\s+be|planning|plan\s+to|intend\s+to|"
    r"next[.!]?$)\b"
    r"|^\s*(?:next|now|first|then)\b(?!\s+(?:the|it|all|every|passes|works))",
    re.IGNORECASE,
)

# Restates the task instead of reporting on it.
_DESCRIPTION = LazyPattern(
    r"\b(?:(?:the|my|our|your|this)\s+(?:task|goal|job|objective|assignment|request|aim|"
    r"mission)\s+(?:is|was|here\s+is)|(?:i|we)\s+(?:was|were|am|are|have\s+been)\s+asked|"
    r"(?:you|they|he|she|the\s+user|the\s+client)\s+(?:asked|want|wants|requested|need|"
    r"needs|would\s+like)|(?:asked|told|supposed)\s+to|requested\s+(?:in|by)|"
    r"the\s+(?:issue|problem|pr|bug\s+report|ticket|request)(?:\s+description)?\s+"
    r"(?:says|mentions|asks|describes|is\s+that|requires|wants)|is\s+what\s+(?:i|we)\s+need|"
    r"(?:is|was)\s+the\s+(?:goal|task|objective|aim|request|assignment)|goal\s+of\s+this|(?:should|must|needs\s+to|has\s+to|"
    r"have\s+to|ought\s+to)\s+be\s+\w+(?:ed|en|t)|to\s+be\s+done)\b"
    r"|^\s*(?:task|goal|objective)\s*:",
    re.IGNORECASE,
)

# Says it did not work, is not done yet, or is only a guess: anywhere in the message.
_NOT_DONE = LazyPattern(
    r"\b(?:still|yet|unfortunately|unable|cannot|can't|couldn't|failed\s+to|fails\s+to|"
    r"did\s+not\s+(?:work|help|fix|pass|succeed)|didn't\s+(?:work|help|fix|pass|succeed)|"
    r"not\s+(?:yet|done|fixed|finished|working|complete|resolved)|so\s+far|partially|partly|"
    r"stuck|blocked|unsuccessful|it\s+seems|it\s+appears|seems\s+to|appears\s+to|probably|"
    r"perhaps|maybe|might|likely|i\s+think|i\s+suspect|i\s+guess|not\s+sure|no\s+idea|"
    r"mysterious|unclear|timed\s+out|times\s+out|to\s+understand|to\s+find\s+out|"
    r"to\s+figure\s+out|to\s+see\s+(?:if|whether|what|how|why|where|which)|but\s+only|"
    r"(?:this|that|it|which)\s+should\s+(?:now\s+)?(?:fix|allow|work|resolve|solve|handle|"
    r"make|prevent|correct)|"
    r"(?:i|we)(?:\s+am|'m|\s+are|'re)\s+\w+ing)\b"
    r"|^\s*(?:searching|looking|checking|examining|exploring|investigating|reading|inspecting|"
    r"analy[sz]ing|reviewing|bisecting|debugging|profiling|trying|attempting|waiting|"
    r"working|running)\b",
    re.IGNORECASE,
)

# Negation and failure words: they count in a clause that names the goal or claims success.
_NEGATIVE = LazyPattern(
    r"\b(?:not|no|never|isn't|aren't|wasn't|weren't|doesn't|don't|didn't|won't|haven't|"
    r"hasn't|hadn't|fail|fails|failed|failing|failure|failures|broken|breaks|incomplete|red|"
    r"crash|crashes|crashed|broke|rejected|denied|deadlocks?|deadlocked|stalls|stalled|"
    r"freezes|froze|(?:took|takes|brought|brings)\s+(?:\w+\s+){0,3}down|"
    r"half|remaining|remains|left\s+to|left\s+out|omitted|some\s+of|except|wrong|missing|"
    r"(?:is|are|was|were|stays|remains)\s+empty)\b",
    re.IGNORECASE,
)
# Failure words: they count in any clause (a repaired "broken link" aside).
_FAILURE = LazyPattern(
    r"\b(?:fail|fails|failed|failing|failure|failures|broken|breaks|broke|crash|crashes|"
    r"crashed|incomplete|rejected|denied|deadlocks?|deadlocked|stalls|stalled|freezes|froze|"
    r"(?:took|takes|brought|brings)\s+(?:\w+\s+){0,3}down)\b",
    re.IGNORECASE,
)
_CONDITION = LazyPattern(
    r"\b(?:when|whenever|if|unless|in\s+case|otherwise|or|so\s+that|so\s+(?:the|it|they))\b"
    r"|\b(?:a|an|any|every|each)\s+\w+\s+(?:that|which)\b",  # "a file that fails is reported"
    re.IGNORECASE,
)
# After a failure word: an object, then a condition ("CI fails the build if it grows").
_GATE = LazyPattern(r"\s+(?:the|any|a|every)\s+\w+\s+(?:if|when|whenever|unless|once)\b", re.I)
# Negations in the past tense: after a clause reporting success they explain the cause.
_PAST_NEGATIVE = frozenset(
    {"was not", "were not", "wasn't", "weren't", "had not", "hadn't", "never", "did not", "didn't"}
)
_CORE_NEGATION = frozenset({"not", "no", "never"})
_NEGATORS = frozenset({"not", "no", "never", "without", "don't", "doesn't", "avoid"})
# Where an explanation starts: the words after it describe the cause, not the outcome.
_EXPLANATION = LazyPattern(
    r"\b(?:because|caused\s+by|due\s+to|the\s+cause|the\s+reason|root\s+cause|since|"
    r"the\s+(?:bug|leak|problem|issue|culprit|race|crash|regression|duplicates?)\s+"
    r"(?:was|were|came\s+from))\b",
    re.IGNORECASE,
)
_REPAIRED = LazyPattern(
    r"\b(?:fixed|repaired|removed|deleted|replaced|resolved|cleaned\s+up|handled|skipped|"
    r"added|adds|restored|"
    r"fix|fixes|remove|removes|replace|handle|handles)\s+(?:the\s+|all\s+|every\s+|any\s+|"
    r"two\s+|three\s+|\d+\s+)?(?:\w+\s+)?$",
    re.IGNORECASE,
)
_CONTRAST = LazyPattern(r"^\W*(?:but|however|though|although|yet)\b", re.IGNORECASE)
_PART_OF = LazyPattern(r"\b(\d+)\s+(?:out\s+)?of\s+(?:the\s+|all\s+)?(\d+)\b", re.IGNORECASE)

# Reports a finished piece of work.
_COMPLETION = LazyPattern(
    r"\b(?:done|fixed|resolved|solved|completed?|finished|implemented|added|created|wrote|"
    r"written|updated|renamed|removed|deleted|migrated|upgraded|configured|set\s+up|built|"
    r"(?<!\d\s)(?<!two\s)(?<!the\s)(?<!both\s)builds|installed|deployed|merged|committed|saved|translated|refactored|replaced|"
    r"converted|passes|pass|passed|passing|works|working|green|succeeds|succeeded|found|"
    r"identified|located|confirmed|verified|here\s+is|here's|here\s+are|successfully|"
    r"now|(?:is|are)\s+in\s+place|points?\s+to|because|the\s+cause|caused\s+by|"
    r"lives\s+in|defined\s+in|listed\s+in|is\s+in|summary|answer|result|results|redirects|"
    r"recovered|reduced|ported|rotated|is\s+live|are\s+live|is\s+ready|are\s+ready|"
    r"(?:is|are)\s+complete|down\s+to|(?:we|i)\s+(?:have|got)\s+the|"
    r"cleaned\s+up|(?:is|are)\s+(?:now\s+)?gone|no\s+longer|no\s+more|in\s+place|all\s+(?:\d+\s+)?(?:\w+\s+)?(?:are|were|have\s+been)\s+(?:now\s+)?\w+ed|(?:can't|cannot)\s+be\s+\w+ed\s+any\s*more|(?:under|below)\s+the\s+(?:[\w.]+\s+){0,2}(?:target|limit))\b"
    r"|\d[\d.,]*\s*[a-z%]{0,3}\s*(?:->|\u2192)\s*\d",
    re.IGNORECASE,
)


def mask_digits(text: str) -> str:
    """Replace every run of digits with ``0``, so numbers alone never make texts differ."""
    return _DIGITS.sub("0", text)


def is_blank(message: str) -> bool:
    """A message with nothing in it but white space."""
    return not message.strip()


def normalise(text: str) -> str:
    """Lower-cased, white space collapsed, outer punctuation dropped: for equality tests."""
    return _EDGE.sub("", _SPACE.sub(" ", text.lower()).strip())


def stem(word: str) -> str:
    """A crude stem: a common suffix dropped, then a final ``e``, then at most six letters.

    The final ``e`` goes so that a verb and its forms meet ("rotate", "rotated" -> "rotat";
    "fixing" -> "fix").
    """
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            keep = 2 if suffix.endswith("es") and suffix != "ies" else 0
            word = word[: len(word) - len(suffix) + keep]
            break
    if len(word) > 4 and word.endswith("e"):
        word = word[:-1]
    return word[:6]


@functools.lru_cache(maxsize=512)
def key_terms(text: str) -> frozenset[str]:
    """The stems of the content words of ``text`` (stop words and numbers left out).

    Example:
        >>> sorted(key_terms("Fix the failing login tests"))
        ['fail', 'fix', 'login', 'test']
    """
    words = (w.strip("'") for w in _WORD.findall(text.lower()))
    return frozenset(
        stem(w) for w in words if len(w) >= 3 and w not in _STOPWORDS and not w.isdigit()
    )


def coverage(goal_terms: frozenset[str], message: str) -> float:
    """The share of the goal's key terms that ``message`` mentions (1.0 for a goal with none)."""
    if not goal_terms:
        return 1.0
    return len(goal_terms & key_terms(message)) / len(goal_terms)


def _clauses(message: str) -> list[str]:
    return [c for c in _CLAUSE.split(message) if c and c.strip()]


def not_reached_cue(message: str, goal: str = "") -> str | None:
    """The words of ``message`` that say the goal is not reached yet, or ``None``.

    Looks for an intention ("I will", "let me", "next") other than a finishing touch ("now
    let me submit"), a restatement of the task ("the task is"), a plan, a change taken back
    ("I reverted ..."), the starting state with no change after it ("Reproduced: ..."), a
    question about the goal, a part count ("2 of 5"), and a negation or failure ("still",
    "not", "failed to") in a clause that names one of the goal's key terms or claims
    success. Code and a delivered document are not searched (:func:`cues.status_text`).
    Phrases that report success in negative words ("no longer fails", "no errors", "no
    truncation" after a success) do not count, and neither do words the goal itself uses.

    Example:
        >>> not_reached_cue("The login bug is still not fixed.", "The login bug is fixed.")
        'still'
    """
    text = _cut_explanations(
        _POSITIVE_PHRASES.sub(f" {negation.GONE} ", cues.status_text(message, goal))
    )
    if done.asks_for_content(goal):
        text = _PARENTHESES.sub(" ", text)  # an answer's definitions and details: content
    goal_words_text = " ".join(_WORD.findall(goal.lower()))
    terms = key_terms(goal)
    cue = _phrase_cue(text, goal_words_text, terms) or target.missed(goal, text)
    if cue is not None:
        return cue
    for m in _PART_OF.finditer(text):
        if int(m.group(1)) < int(m.group(2)) and not _in_parentheses(text, m.start()):
            return m.group(0)
    tokens = _WORD.findall(goal.lower())
    negated = {b for a, b in itertools.pairwise(tokens) if a in _NEGATORS}
    goal_words = frozenset(tokens) - _CORE_NEGATION - negated  # "without breaking": not exempt
    # Words the goal itself puts after a negation ("models without any dependencies"): a
    # message that says "no dependencies" echoes the goal's condition, not a failure.
    echoed = frozenset(
        stem(b)
        for i, a in enumerate(tokens)
        if a in _NEGATORS
        for b in tokens[i + 1 : i + 3]
        if b not in _STOPWORDS
    )
    clauses = _clauses(text)
    success_before = False
    reported = [_reports(c) for c in clauses]
    for at, clause in enumerate(clauses):
        relevant = (
            len(clauses) == 1
            or _CONTRAST.search(clause) is not None
            or bool(terms & key_terms(clause))
            or _COMPLETION.search(clause) is not None
        )
        past_ok = success_before and _CONTRAST.search(clause) is None
        # A past negation before a later report of the change tells the cause: "it never
        # read the option. I pass it now".
        cause_ok = _CONTRAST.search(clause) is None and any(reported[at + 1 :])
        pattern = _NEGATIVE if relevant and not done.content_clause(goal, clause) else _FAILURE
        cue = _negative_in(
            pattern, clause, goal_words, goal_words_text, past_ok, echoed, cause_ok=cause_ok
        )
        if cue is None and relevant and clause.rstrip().endswith("?"):
            cue = "?"
        if cue is not None:
            return cue
        success_before = success_before or reported[at]
    return None


def _report_before(clause: str, at: int) -> bool:
    """Whether the clause reports finished work before position ``at`` ("Fixed, no ...")."""
    return _reports(clause[:at]) and not _CONTRAST.search(clause)


def _reports(clause: str) -> bool:
    """Whether a clause reports finished work (a completion word, or a defect told as gone)."""
    return _COMPLETION.search(clause) is not None or negation.GONE in clause


def _phrase_cue(text: str, goal_words_text: str, terms: frozenset[str]) -> str | None:
    """An intention, restatement, not-done phrase, plan, revert or starting state."""
    for pattern in (_INTENTION, _DESCRIPTION, _NOT_DONE):
        for found in pattern.finditer(text):
            if _in_goal(found.group(0), goal_words_text):
                continue
            if pattern is _INTENTION and cues.is_wrap_up(text[found.end() : found.end() + 80]):
                continue  # a finishing touch: "now let me submit the patch"
            if found.group(0).lower() == "still" and negation.preserved(text, found.end()):
                continue  # a behaviour kept: "the old name is still accepted"
            if pattern is _NOT_DONE and _defect_gone(text, found.start(), found.end()):
                continue  # "hasn't timed out since", "the query that timed out now takes 40 ms"
            return found.group(0).strip()
    for cue in (
        cues.plan_cue(text, terms),
        cues.reverted_cue(text),
        cues.state_cue(text),
    ):
        if cue is not None and not _in_goal(cue, goal_words_text):
            return cue
    return None


def _defect_gone(text: str, start: int, end: int) -> bool:
    """Whether the failure phrase at ``text[start:end]`` is negated or told as the state before."""
    return negation.defect_negated(text, start, end) or negation.former_state(text, start, end)


_PARENTHESES = LazyPattern(r"\([^()]*\)")


def _in_parentheses(text: str, at: int) -> bool:
    """Whether position ``at`` of ``text`` lies inside parentheses: "(11 of 14)" is a statistic."""
    before = text[:at]
    return before.count("(") > before.count(")")


_FIRST_SENTENCE = LazyPattern(r"^(.+?)(?:[.!:;](?:\s|$)|\n)")


def _states_goal(goal: str, message: str) -> str | None:
    """The message's first sentence when it is the goal itself ("The login bug is fixed: ...")."""
    found = _FIRST_SENTENCE.match(message.strip())
    if found and normalise(found.group(1)) == normalise(goal):
        return found.group(1)
    return None


_SENTENCE_END = LazyPattern(r"[.!?;](?:\s|$)|,\s+(?:and|so)\s+(?:i|we|it)\b", re.IGNORECASE)


def _cut_explanations(text: str) -> str:
    """``text`` without its explanations: from "because" (etc.) to the end of that sentence."""
    out = []
    pos = 0
    while (found := _EXPLANATION.search(text, pos)) is not None:
        out.append(text[pos : found.start()])
        end = _SENTENCE_END.search(text, found.end())
        pos = end.start() if end else len(text)
        if pos <= found.start():
            break
    out.append(text[pos:])
    return "".join(out)


def _in_goal(phrase: str, goal_text: str) -> bool:
    words = " ".join(_WORD.findall(phrase.lower()))
    return bool(words) and f" {words} " in f" {goal_text} "


def _negative_in(
    pattern: LazyPattern,
    clause: str,
    goal_words: frozenset[str],
    goal_text: str,
    past_ok: bool,
    echoed: frozenset[str] = frozenset(),
    *,
    cause_ok: bool = False,
) -> str | None:
    goal_stems = frozenset(stem(w) for w in goal_words)
    contrast = _CONTRAST.search(clause) is not None  # "but ...": a new problem, not the goal's
    for found in pattern.finditer(clause):
        word = found.group(0).lower()
        if (word in goal_words or stem(word) in goal_stems) and not contrast:
            continue  # the goal's own word
        following = _WORD.findall(clause[found.start() :].lower())[:2]
        if len(following) == 2 and not contrast and _in_goal(" ".join(following), goal_text):
            continue  # the goal's own words: "investigate why the job did not run"
        if _REPAIRED.search(clause[: found.start()]):
            continue  # the object of a repair: "fixed the broken links"
        if _CONDITION.search(clause[: found.start()].rsplit(",", 1)[-1]):
            continue  # a condition: "returns 503 when the query fails"
        if _GATE.match(clause, found.end()):
            continue  # a rule that fails something on a condition: "fails the build if ..."
        if (past_ok or _report_before(clause, found.start())) and _after_success_ok(
            clause, found, word
        ):
            continue
        if cause_ok and _past_negation(clause, found, word):
            continue
        if word in _NEGATORS and _next_word_stem(clause, found) in echoed:
            continue  # the goal's own condition: "no dependencies" for "without dependencies"
        if negation.defect_negated(clause, found.start(), found.end()):
            continue  # a defect or a leftover negated: "no test broke", "nothing remains"
        if negation.former_state(clause, found.start(), found.end()):
            continue  # the state before the change: "(it failed 1 run in 30 before)"
        return found.group(0)
    return None


# Words after "not" that make it negate a state ("not fixed"), not contrast a noun.
_STATE_WORDS = frozenset(
    """
    yet done all every working complete enough there ready possible sure able clear correct
    right quite really fully entirely only always the a an it this that
    """.split()  # noqa: SIM905 - a word list reads better as text
)


def _next_word_stem(clause: str, found: re.Match[str]) -> str:
    after = _WORD.findall(clause[found.end() :].lower())[:1]
    return stem(after[0]) if after else ""


def _past_negation(clause: str, found: re.Match[str], word: str) -> bool:
    """Whether the negation is in the past tense ("was not", "never", "didn't")."""
    before = clause[: found.start()].lower().split()[-1:]
    return word in _PAST_NEGATIVE or (bool(before) and f"{before[0]} {word}" in _PAST_NEGATIVE)


def _after_success_ok(clause: str, found: re.Match[str], word: str) -> bool:
    """After a clause that reports success, a negation that explains or details it.

    A past negation explains the cause ("the cookie was not refreshed"); "no" before a word
    details the result ("no pod in CrashLoopBackOff", "no truncation");
    ", not" before a noun corrects a reading ("iOS users going uncounted, not users leaving").
    """
    if _past_negation(clause, found, word):
        return True
    after = _WORD.findall(clause[found.end() :].lower())[:1]
    nxt = after[0] if after else ""
    if word == "no":
        return bool(nxt)
    if word == "not" and clause[: found.start()].rstrip().endswith(","):
        return bool(nxt) and nxt not in _STATE_WORDS and not nxt.endswith(("ed", "en", "ing", "ly"))
    return False


def completion_cue(message: str, goal: str = "") -> str | None:
    """The word of ``message`` that reports finished work ("fixed", "done", "here is"), or None.

    A word the goal itself uses in that form does not count: in "list the merged pull
    requests", "merged" names the input, not the work done.
    """
    goal_words = frozenset(_WORD.findall(goal.lower()))
    for found in _COMPLETION.finditer(message):
        if done.history_after(message, found.end()):
            continue  # "both committed in 2023": the state's history, not the work
        if found.group(0).lower() not in goal_words and cues.delivers(found.group(0), goal):
            return found.group(0)
    status = cues.status_text(message, goal)
    return done.done_form(status, goal) or done.acted_cue(status)


@dataclass(frozen=True, slots=True)
class GoalSignals:
    """What the text rules say about a message against the goal.

    Attributes:
        equal: the message is the goal itself (after normalising case and spaces).
        blocker: the words saying the goal is not reached, or ``None``.
        coverage: the share of the goal's key terms the message mentions.
        completion: the word reporting finished work, or ``None``.
        claim: the words claiming the task itself is done ("the issue is fixed"), or ``None``.
        fact: the goal asks for a fact ("Find where ..."): a statement of it is the answer.
    """

    equal: bool
    blocker: str | None
    coverage: float
    completion: str | None
    claim: str | None = None
    fact: bool = False


def goal_signals(goal: str, message: str, terms: frozenset[str] | None = None) -> GoalSignals:
    """The second signals of ``message`` against ``goal`` (``terms``: the goal's, if known)."""
    if normalise(goal) == normalise(message):
        return GoalSignals(True, None, 1.0, None)
    terms = key_terms(goal) if terms is None else terms
    status = cues.status_text(message, goal)
    return GoalSignals(
        False,
        not_reached_cue(message, goal),
        coverage(terms, message),
        completion_cue(message, goal),
        cues.task_claim(status) or _states_goal(goal, message),
        done.asks_for_fact(goal),
    )


#: For a goal that asks for a fact, a statement that mentions this share of its key terms.
MIN_COVERAGE = 0.5
#: Even with a completion cue, a message must mention this share of the goal's key terms.
MIN_COVERAGE_CUED = 0.15


def goal_reached(similarity: float, signals: GoalSignals, threshold: float) -> bool:
    """The goal decision: the message equals the goal, or all of the following hold.

    * similarity to the goal is at least ``threshold`` (necessary, never sufficient);
    * no blocker: no negation, failure, intention or restatement of the task;
    * the message reports finished work (a completion cue, a goal verb told as done) and
      mentions at least ``MIN_COVERAGE_CUED`` of the goal's key terms, or claims that the
      task itself is done ("I have fixed the issue"), or, for a goal that asks for a fact,
      states it (``MIN_COVERAGE`` of the terms).

    Coverage alone reaches no other goal: the starting state told in the goal's words ("the
    backup job has failed every night since Monday") mentions its terms but reports no work.
    """
    if signals.equal:
        return True
    if similarity < threshold or signals.blocker is not None:
        return False
    if signals.coverage >= MIN_COVERAGE and signals.fact:
        return True
    if signals.completion is not None and signals.coverage >= MIN_COVERAGE_CUED:
        return True
    return signals.claim is not None
