"""The goal check's report and negation-scope rules (antiloop.core.text.done and .negation)."""

from __future__ import annotations

import pytest

from antiloop.core import semantic
from antiloop.core.text import done, negation, target

CRON = "Remove the old cleanup cron script from every server."
BUILD = "Reduce the build time below five minutes."


def _reached(goal: str, message: str) -> bool:
    return semantic.goal_reached(0.9, semantic.goal_signals(goal, message), 0.5)


@pytest.mark.parametrize(
    "message",
    [
        "The build time is 9 minutes on the CI runners; most of it is the Docker layer cache.",
        "The old cleanup cron script runs on every server at 03:00.",
    ],
)
def test_a_state_told_in_the_goals_words_does_not_reach_it(message):
    """Coverage alone is no report: the starting state has no completion word."""
    goal = BUILD if "build" in message else CRON
    signals = semantic.goal_signals(goal, message)
    assert signals.coverage >= semantic.MIN_COVERAGE
    assert signals.completion is None
    assert not _reached(goal, message)


@pytest.mark.parametrize(
    "message",
    [
        "Removed the cleanup cron script; no server runs it any more.",
        "The cleanup cron script is gone from all 12 servers and nothing of it remains.",
        "Removed the old cleanup cron script from every server without a single error.",
        "Deleted the cron script everywhere: grep over the fleet finds no copy left.",
        "Removed the old cleanup cron script from every server (it failed every night before).",
    ],
)
def test_a_success_told_in_negative_words_reaches_the_goal(message):
    """A negation of a defect or a leftover reports success."""
    assert _reached(CRON, message)


@pytest.mark.parametrize(
    "message",
    [
        "I removed the cron entry, but the script does not get removed by the playbook.",
        "Removed the cron script on 10 servers; the other two did not let me log in.",
        "Removed the cleanup cron script from every server, but the job no longer works.",
        "The cleanup cron script still runs on two servers.",
    ],
)
def test_a_negation_of_the_work_still_blocks(message):
    """A negation of the work or of a working behaviour is not a success."""
    assert not _reached(CRON, message)


def test_the_goal_verb_in_its_past_form_is_a_report():
    """ "Enable HTTPS" is reported by "HTTPS is enabled"; irregular verbs by their forms."""
    assert done.done_form("HTTPS is enabled on staging.", "Enable HTTPS on staging.") == "enabled"
    assert done.done_form("Wrote the notes.", "Write release notes.") == "Wrote"
    assert done.done_form("Planned the trip.", "Plan a trip to Porto.") == "Planned"
    assert done.done_form("HTTPS is off on staging.", "Enable HTTPS on staging.") is None
    assert done.goal_verbs("Please back up the disk, then verify it.") == ("back", "verify")


def test_a_change_told_as_a_past_verb_is_a_report_and_a_look_is_not():
    """ "Drafted the reply" reports work; "Checked the logs" and "Reproduced:" do not."""
    assert done.acted_cue("Drafted the reply to Maria.") == "Drafted"
    assert done.acted_cue("The script is in place. I bumped the version.") == "bumped"
    assert done.acted_cue("Checked the logs: the job fails.") is None
    assert done.acted_cue("Reproduced: the job fails.") is None


def test_a_goal_that_asks_for_a_fact_is_answered_by_a_statement():
    """ "Find which host ..." is answered by the fact; "find out why ... and fix it" is not."""
    goal = "Find which host serves the metrics dashboard."
    assert done.asks_for_fact(goal)
    assert _reached(goal, "The metrics dashboard is served by host mon-02 (nginx, port 3000).")
    assert not done.asks_for_fact("Find out why the job fails and fix it.")
    assert not done.asks_for_fact("Find why the page is slow.")


def test_negations_in_an_answer_are_its_content():
    """In an answer, "X does not include Y" is a fact; "I could not find" is about the work."""
    goal = "Find out which regions offer GPU instances."
    reply = "GPU instances are offered in the us-east-1 and eu-west-1 regions; ap-south-1 does not."
    assert _reached(goal, reply)
    assert not _reached(goal, "I could not find which regions offer GPU instances.")


def test_negation_scope_directly():
    """The scope of a negation decides; with neither a defect nor the work, it stays a block."""
    assert negation.defect_negated("no client test broke", 0, 2)
    assert negation.defect_negated("without a failure", 10, 17)
    assert not negation.defect_negated("the tests do not pass", 12, 15)
    assert not negation.defect_negated("no config file was found", 0, 2)
    assert negation.preserved("the old flag is still accepted", 21)
    assert not negation.preserved("the old flag is still read", 21)
    assert negation.former_state("it passes now (it failed daily before)", 18, 24)
    assert not negation.former_state("it failed daily", 3, 9)


def test_the_goal_stated_as_the_first_sentence_claims_it():
    """A message that opens with the goal's own statement claims it, unless a blocker follows."""
    goal = "The export bug is fixed."
    assert _reached(goal, "The export bug is fixed: empty rows are written as blanks.")
    assert not _reached(goal, "The export bug is fixed: no, wait, it still fails.")


LEAK = "The import job fails on files with a BOM."


def test_a_failure_after_but_blocks_even_in_the_goals_own_words():
    """ "but `test_x` fails" brings a new problem, though the goal says "fails" too."""
    assert _reached(LEAK, "The import job reads files with a BOM now; the import tests pass.")
    assert not _reached(LEAK, "The import job reads files with a BOM now, but test_bom fails.")


@pytest.mark.parametrize(
    "message",
    [
        "Added the index; the report query that timed out after 60 s now takes 80 ms.",
        "Added the index and the report query hasn't timed out since.",
        "Added the index concurrently so the table isn't locked; the report query takes 80 ms.",
        "Index in place: the report query takes 80 ms and never times out any more.",
        "Report queries no longer time out: the index is used. Other queries still run as before.",
    ],
)
def test_a_defect_told_as_gone_or_as_the_state_before_does_not_block(message):
    """Failure phrases negated, told before the change, or in a purpose clause do not block."""
    assert _reached("Add an index so the report query stops timing out.", message)


def test_a_failure_phrase_of_the_present_still_blocks():
    """Without a negation or the change after it, "timed out" is the present state."""
    goal = "Add an index so the report query stops timing out."
    assert not _reached(goal, "Added the index, but the report query timed out again at 60 s.")
    assert not _reached(goal, "Added the index; the report query still times out for now.")


def test_a_participle_dated_in_the_past_or_done_by_the_system_is_the_state():
    """ "committed in 2023", "served by the app itself" describe the state, not the work."""
    goal = "Move the session store out of the app and serve sessions from Redis."
    assert not _reached(goal, "The session store is part of the app process, committed in 2019.")
    assert not _reached(goal, "Sessions are kept in memory and served by the app process.")
    assert _reached(goal, "Sessions are served from Redis now; the app keeps none in memory.")


def test_a_past_negation_before_the_change_is_the_cause():
    """ "X never read the option. I pass it now" tells the cause, then the fix."""
    goal = "The `--quiet` flag is ignored by the `push` subcommand."
    fixed = "The push runner never read the global quiet option. I pass it in now; tests pass."
    assert _reached(goal, fixed)
    assert not _reached(goal, "The push runner never read the global quiet option.")


def test_a_prevented_action_reports_the_change_and_new_failure_words_block():
    """ "can't be submitted any more" is a change; "now deadlocks" is a new failure."""
    goal = "Make the order form reject duplicate submissions."
    assert _reached(goal, "Duplicate orders can't be submitted any more, with no second request.")
    assert not _reached(goal, "Duplicate orders are rejected, but the form now deadlocks.")


def test_a_measure_on_the_wrong_side_of_the_goals_bound_blocks():
    """ "Down to 9 s" does not reach "below 5 seconds"; "9 s -> 4 s" does."""
    goal = "Cut the cold start of the service below 5 s."
    assert not _reached(goal, "Cut the cold start: down to 9 s after trimming the imports.")
    assert _reached(goal, "Cut the cold start of the service: 9 s -> 4 s after trimming imports.")
    assert target.missed("Raise coverage to 90 or more.", "Coverage is now 84%.") is None
    assert target.missed("Raise coverage to 90% or more.", "Coverage is now 84%.") == "84%"


def test_gates_bounds_references_and_counts_read_as_the_work_done():
    """A gate on a condition, a bound not crossed, "no code references" and "all 9 are ..."."""
    goal = "Remove the unused cache tables from the reporting database."
    assert _reached(
        goal, "Removed the 4 cache tables after checking that no job or view refers to them."
    )
    assert _reached(goal, "The unused cache tables are gone: all 4 are dropped from reporting.")
    limit = "Keep the worker's memory below 500 MB under load."
    assert _reached(limit, "Capped the cache; under load the worker never went above 320 MB.")
    assert _reached(
        limit, "Capped the worker cache at 300 MB; CI now fails the job if memory grows past it."
    )
    assert not _reached(limit, "Capped the cache, but the change took the worker down twice.")
