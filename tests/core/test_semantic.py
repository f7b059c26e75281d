"""The text rules of the semantic checks (antiloop.core.semantic): pure, no embedder."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from antiloop.core import semantic
from antiloop.core.text import cues

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


def _progress_as_first_written(before: str, after: str) -> bool:
    """numbers_progress as first written: the words around every number read, then compared."""
    import re

    from antiloop.core.text.stagnation import _COUNTER_WORDS

    def numbers(text: str) -> list[tuple[str, str, str]]:
        out = []
        for m in re.finditer(r"\d+(?:\.\d+)?", text):
            lead = re.compile(r"([a-z]+)\W{0,3}$", re.I).search(
                text, max(0, m.start() - 24), m.start()
            )
            tail = re.search(r"^\W{0,2}([a-z]+)", text[m.end() : m.end() + 24], re.I)
            out.append(
                (
                    m.group(0),
                    lead.group(1).lower() if lead else "",
                    tail.group(1).lower() if tail else "",
                )
            )
        return out

    a, b = numbers(before), numbers(after)
    if len(a) != len(b):
        return True
    return any(
        x[0] != y[0] and x[1] not in _COUNTER_WORDS and x[2] not in _COUNTER_WORDS
        for x, y in zip(a, b, strict=True)
    )


_MESSAGE = st.lists(
    st.sampled_from(
        [
            "attempt",
            "Retry",
            "tests",
            "failing",
            "times",
            "line",
            " ",
            ": ",
            "-",
            "3",
            "4",
            "10",
            "2.5",
            "x",
        ]
    ),
    max_size=12,
).map("".join)


@given(_MESSAGE, _MESSAGE)
def test_counter_versus_measure_is_the_rule_as_first_written(before: str, after: str) -> None:
    """Reading only the changed numbers' words decides as reading every number's words did."""
    assert semantic.numbers_progress(before, after) is _progress_as_first_written(before, after)


@pytest.mark.parametrize(
    ("before", "after", "progress"),
    [
        ("attempt 3: 5 failing", "attempt 4: 5 failing", False),
        ("attempt 3: 5 failing", "attempt 4: 4 failing", True),
        ("5 failing, attempt 3", "4 failing, attempt 4", True),
        ("ran 3 times, 7 left", "ran 4 times, 7 left", False),
    ],
)
def test_every_changed_number_is_judged(before: str, after: str, progress: bool) -> None:
    """A counter changing beside a measure that changes too is progress; alone, it is not."""
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


# The signals for real agents' final messages (antiloop.core.text.cues and their use here).

FIX = "Fix: delete() on models without any dependencies doesn't clear the primary key."


@pytest.mark.parametrize(
    "message",
    [
        "Fixed: delete() clears the primary key now. Now let me submit the final output:",
        "The primary key is cleared after delete(). I will submit it.",
        "The pk is cleared on delete. I'll remove the reproduction scripts before submitting.",
        "delete() clears the key now. Let me create the patch file.",
        "Fixed: the key is cleared. Let me verify the diff once more and then submit.",
    ],
)
def test_a_finishing_touch_is_no_intention(message):
    """ "Now let me submit", "I'll remove the reproduction scripts": the work itself is done."""
    assert semantic.not_reached_cue(message, FIX) is None


def test_an_intention_to_do_more_work_still_blocks():
    """An intention whose object is the work (run, check, edit) blocks as before."""
    cue = semantic.not_reached_cue("Added the check. Next, I will run the script to verify.", FIX)
    assert cue is not None
    assert semantic.not_reached_cue("Let me run the delete tests.", FIX) == "Let me"
    assert cues.is_wrap_up(" submit the final output:")
    assert not cues.is_wrap_up(" remove the password logging next")


def test_a_plan_blocks_unless_the_goal_is_a_plan():
    """ "Here is my plan:" and "Steps:" present work to do; for "Plan a trip" a plan is the work."""
    plan = "Here is my plan:\n1. Reproduce the bug.\n2. Clear the pk in the fast path."
    assert semantic.not_reached_cue(plan, FIX) is not None
    assert cues.plan_cue("Steps: request a cert, upload it, swap it.", frozenset()) == "Steps:"
    trip = "Plan a three-day trip to Lisbon."
    assert cues.plan_cue("Here is my plan: day 1 Alfama.", semantic.key_terms(trip)) is None


@pytest.mark.parametrize(
    "message",
    [
        "I reverted my edit to deletion.py; the diff is empty again.",
        "It broke 4 tests, so I rolled the change back. The pk is not cleared.",
        "I backed out the hasattr check; the code is as it was at the start.",
        "Provisioned concurrency helped, but I turned it off again; we're back at 2.9 s.",
        "My edit replaced line 4, so I undid it; the file is back to the original.",
    ],
)
def test_a_reverted_change_blocks(message):
    """A change taken back leaves the goal where it was."""
    assert semantic.not_reached_cue(message, FIX) is not None


def test_an_incidental_revert_does_not_block():
    """Reverting a stray or unrelated change is part of finishing the work."""
    message = "Fixed: delete() clears the pk. I reverted the unrelated change to setup.cfg."
    assert cues.reverted_cue(message) is None
    assert semantic.not_reached_cue(message, FIX) is None


@pytest.mark.parametrize(
    "message",
    [
        "Reproduced with 0.9.5: iam.physical(aoi=100, n=1) returns nan, while 0.9.4 returned 0.",
        "At the moment `convert docs/` exits with IsADirectoryError.",
        "Running reproduce.py confirms the bug: obj.pk is 1 after delete().",
        "Current cold start: 2.9 s p50 over 20 invocations.",
    ],
)
def test_the_starting_state_blocks(message):
    """A description of the problem as it stands is not a report of work done."""
    assert cues.state_cue(message) is not None
    assert semantic.not_reached_cue(message, FIX) is not None


def test_the_starting_state_then_a_change_does_not_block():
    """ "Reproduced ..., then fixed ..." reports the work: the state cue needs nothing after it."""
    message = "1. Reproduced the issue with reproduce.py. 2. Modified deletion.py. 3. Verified it."
    assert cues.state_cue(message) is None


def test_code_and_a_delivered_document_are_not_searched():
    """Inline code, code blocks and (for a writing goal) the document delivered are content."""
    assert cues.status_text("Done: `if not x` is gone.") == "Done: code is gone."
    assert "not" not in cues.status_text("Fixed:\n```\nif not x:\n```\nAll good.")
    reply = "Here is the reply:\n\nHi Maria, sorry the lamp arrived broken. We can refund it."
    goal = "Reply to the customer who asked for a refund."
    assert semantic.not_reached_cue(reply, goal) is None
    # For a fix, what follows "Here is ...:" is a status report and stays searched.
    assert "still" in cues.status_text("Here is what I found:\nThe test still fails.", FIX)


def test_here_is_delivers_only_for_a_goal_that_asks_for_an_artefact():
    """For a fix, "Here is the logic for ...:" shows code; it is no completion cue."""
    shown = "Here is the logic for collecting parent links:"
    assert semantic.completion_cue(shown, FIX) is None
    assert semantic.completion_cue("Here is a haiku:", "Write a haiku about autumn.") is not None


def test_a_completion_word_the_goal_uses_does_not_count():
    """In "release notes from the merged pull requests", "merged" names the input."""
    goal = "Write release notes from the merged pull requests."
    assert semantic.completion_cue("There are 14 merged pull requests.", goal) is None
    assert semantic.completion_cue("Merged the notes into CHANGELOG.md.", "Fix the bug.")


@pytest.mark.parametrize(
    ("goal", "message"),
    [
        (
            "Upgrade the cluster to 1.29.",
            "The cluster runs 1.29.4 now: all deployments are available, no pod is in "
            "CrashLoopBackOff.",
        ),
        (
            "Translate the onboarding strings into German.",
            "Translated: 23/23 strings. Longest label 29 characters, no truncation on the "
            "onboarding screens.",
        ),
        (
            "Find out why the daily active users dropped.",
            "Cause found: the SDK stopped sending the event. The drop in daily active users is "
            "iOS users going uncounted, not users leaving.",
        ),
        (FIX, "Deleting a model with no dependencies now clears its pk."),
        ("Return 404 for unknown users.", "Unknown users now get a 404 Not Found response."),
        (
            "Make convert accept a directory.",
            "convert accepts a directory now: a file that fails is reported and the others "
            "still run.",
        ),
        ("Fix the SyntaxError so the script runs.", "Added the missing colon; the script runs."),
    ],
)
def test_negative_words_that_detail_a_success_do_not_block(goal, message):
    """After a success claim "no X" details it, ", not <noun>" corrects a reading; "no X"
    echoes a goal's "without X"; a repaired "missing" thing and "still run" report success."""
    assert semantic.not_reached_cue(message, goal) is None


@pytest.mark.parametrize(
    ("message", "cue"),
    [
        ("Directories work, but only the top level.", "but only"),
        ("The draft is written but I left out the store-credit option.", "left out"),
        ("Switching to argparse broke two tests.", "broke"),
        ("The code has been updated. This should fix the crash.", "This should fix"),
        (
            "The German file loads, because de is listed, and I can't change the build config.",
            "can't",
        ),
    ],
)
def test_partial_work_and_guesses_block(message, cue):
    """Partial work, a break, an untested expectation; an explanation ends with its sentence."""
    assert semantic.not_reached_cue(message, "Translate the onboarding screens.") == cue


def test_a_measure_moving_under_the_target_is_a_completion():
    """Summaries with numbers: "2.9 s -> 0.62 s", "down to 0.62 s", "under the 1 s target"."""
    assert semantic.completion_cue("Cold start: 2.9 s -> 0.62 s p50.") is not None
    assert semantic.completion_cue("Cold start is down to 0.62 s.") == "down to"
    assert semantic.completion_cue("Both numbers are under the 1 s target.") is not None


def test_a_claim_about_the_task_itself_stands_in_for_the_goals_words():
    """ "The fix is complete", "I have fixed the issue": the goal named by reference."""
    assert cues.task_claim("Excellent! The fix is complete and working correctly.")
    assert cues.task_claim("I have fixed the issue where bytes became a string.")
    assert cues.task_claim("The bug is not fixed.") is None
    claim = semantic.goal_signals(FIX, "All tests pass. The fix is complete. Now let me submit.")
    assert claim.claim is not None
    assert claim.coverage < semantic.MIN_COVERAGE_CUED
    assert semantic.goal_reached(0.3, claim, 0.2)
    vague = semantic.goal_signals(FIX, "All tests pass. Now let me submit.")
    assert not semantic.goal_reached(0.3, vague, 0.2)
