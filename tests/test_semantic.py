"""The text rules of the semantic checks (antiloop.semantic): pure, no embedder."""

from __future__ import annotations

import pytest

from antiloop import semantic

LOGIN = "The login bug is fixed."


@pytest.mark.parametrize(
    "message",
    [
        "The login bug is still not fixed.",
        "I will look at the login handler next.",
        "Failed to fix the login bug: the fixture cannot reach the database.",
        "The task is to fix the login bug.",
        "Let me check the login handler.",
        "Is the login bug fixed?",
        "Fixed 2 of the 3 login bugs.",
        "It seems the login bug is fixed.",
        "Searching for the login bug.",
    ],
)
def test_not_reached_cues_block_the_goal(message):
    """Negations, failures, intentions, restatements, questions and part counts block the goal."""
    assert semantic.not_reached_cue(message, LOGIN) is not None


@pytest.mark.parametrize(
    "message",
    [
        "The login bug is fixed: expired sessions now redirect to the sign-in page.",
        "Fixed the login bug; the login tests no longer fail.",
        "Fixed the broken login redirect.",
        "Done. No errors in the login tests. Let me know if you need anything else.",
        "Fixed: sessions expire correctly now. The cookie was not being refreshed.",
        "Found it: the login bug was caused by a cookie that is never refreshed.",
    ],
)
def test_success_in_negative_words_is_no_blocker(message):
    """ "No longer fail", a repaired "broken" thing and an explained cause do not block."""
    assert semantic.not_reached_cue(message, LOGIN) is None


def test_goal_words_are_not_cues():
    """A failure word the goal itself uses ("the failing test") does not block."""
    goal = "Fix the failing login test."
    assert semantic.not_reached_cue("The failing login test passes now.", goal) is None
    assert semantic.not_reached_cue("The login test is still failing.", goal) == "still"


def test_key_terms_and_coverage():
    """Key terms are stems of content words; coverage is the share the message names."""
    terms = semantic.key_terms("Fix the failing login tests")
    assert terms == {"fix", "fail", "login", "test"}
    assert semantic.coverage(terms, "fixed the login test") == 0.75
    assert semantic.coverage(frozenset(), "anything") == 1.0


def test_goal_reached_needs_similarity_no_blocker_and_coverage_or_cue():
    """Similarity is necessary, not sufficient; a message equal to the goal always reaches it."""
    goal = "Fix the failing login test."
    ok = semantic.goal_signals(goal, "Fixed: the login test passes now.")
    assert semantic.goal_reached(0.6, ok, 0.5)
    assert not semantic.goal_reached(0.4, ok, 0.5)
    negated = semantic.goal_signals(goal, "The login test is still failing.")
    assert not semantic.goal_reached(0.99, negated, 0.5)
    unrelated = semantic.goal_signals(goal, "Here is the chart you wanted.")
    assert not semantic.goal_reached(0.9, unrelated, 0.5)
    equal = semantic.goal_signals(goal, "  fix the failing LOGIN test ")
    assert equal.equal
    assert semantic.goal_reached(0.0, equal, 0.99)


def test_mask_digits_and_blank():
    """Digits are masked to 0; white space only is blank."""
    assert semantic.mask_digits("attempt 12 of 30") == "attempt 0 of 0"
    assert semantic.is_blank(" \n\t")
    assert not semantic.is_blank(".")


@pytest.mark.parametrize(
    ("before", "after", "progress"),
    [
        ("12 tests failing", "2 tests failing", True),
        ("error at line 42", "error at line 57", True),
        ("attempt 3: same error", "attempt 4: same error", False),
        ("Checked 3 times so far.", "Checked 4 times so far.", False),
        ("Retry 4 of 10: no answer.", "Retry 5 of 10: no answer.", False),
        ("Coverage is 61%.", "Coverage is 61%.", False),
        ("no numbers", "one number: 7", True),
    ],
)
def test_counter_versus_measure(before, after, progress):
    """A changed measure is progress; a changed counter (attempt, retry, N times) is not."""
    assert semantic.numbers_progress(before, after) is progress


def test_decayed_similarity_weighs_recent_messages_more():
    """The most recent message weighs most: an old resemblance counts less than a new one."""
    assert semantic.decayed_similarity([1.0, 0.5]) > semantic.decayed_similarity([0.5, 1.0])
    assert semantic.decayed_similarity([]) == 0.0
    assert semantic.decayed_similarity([0.9, 0.9, 0.9]) == pytest.approx(0.9)


def test_stalled_needs_no_progress_a_high_mean_and_a_floor():
    """Stalled: no number moved, decayed mean >= threshold, no similarity far below it."""
    assert semantic.stalled([0.97, 0.96, 0.95], [False] * 3, 0.95)
    assert not semantic.stalled([0.97, 0.96, 0.95], [False, True, False], 0.95)
    assert not semantic.stalled([1.0, 1.0, 0.5], [False] * 3, 0.9)
    assert not semantic.stalled([0.9, 0.9, 0.9], [False] * 3, 0.95)
