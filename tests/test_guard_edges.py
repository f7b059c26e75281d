"""The guard's edges: verdict lines and fields, refusals, shadow and enforce, retries, stores
that fail, listeners and audit, people asked, the texts of each stop, events read and written.

Written through the public API where it can be (``antiloop check``'s stream, Guard.record,
fingerprints), with expectations written out literally.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from antiloop import ApprovalDenied, Guard, GuardConfig, Halt, Step
from antiloop.approval import Approvals, CallbackChannel
from antiloop.commands.check import judge_stream
from antiloop.core.detectors import (
    AllOf,
    AnyOf,
    Cycle,
    Repeat,
    calibrated_goal_threshold,
    calibrated_stagnation_threshold,
)
from antiloop.core.errors import StoreError
from antiloop.core.fingerprint import build, digest8, escape
from antiloop.core.history import key_digest
from antiloop.core.step import BadStep, FileState, step_from_dict
from antiloop.core.verdict import Action, Verdict, worst
from antiloop.stores.memory import MemoryStore

GREP = {"tool": "grep", "args": {"pattern": "x"}, "output": "a\n"}


def check(*lines: str) -> list[dict[str, Any]]:
    """``antiloop check`` on these lines, in this process: the verdict lines."""
    out = io.StringIO()
    judge_stream(io.BytesIO("\n".join(lines).encode()), out, Guard())
    return [json.loads(line) for line in out.getvalue().splitlines()]


# -- verdict lines (PROTOCOL.md section 7) ----------------------------------------------------


def test_check_prints_every_field_of_every_verdict_line() -> None:
    """Each line has exactly index, action, detector, outcome, fingerprint, reason."""
    assert check(json.dumps(GREP), "[1]", json.dumps(GREP)) == [
        {
            "index": 0,
            "action": "continue",
            "detector": None,
            "outcome": None,
            "fingerprint": None,
            "reason": "",
        },
        {
            "index": 1,
            "action": "invalid",
            "detector": None,
            "outcome": None,
            "fingerprint": None,
            "reason": "line 2: not a JSON object but list",
        },
        {
            "index": 2,
            "action": "stop",
            "detector": "repeat",
            "outcome": "loop",
            "fingerprint": "AGENT::agent::grep::x::1 match#3cd0b1f8",
            "reason": "grep 'x' ran twice in a row with the same result (1 match).",
        },
    ]


def test_verdict_constructors_keep_what_they_are_given() -> None:
    """ok, nudge and block keep their detector, reason and extra fields."""
    assert Verdict.ok() == Verdict(Action.CONTINUE, None, None, None, "")
    assert Verdict.ok("fine").reason == "fine"
    nudge = Verdict.nudge("goal", "done?", hint="say so", evidence=(1, 2))
    assert (nudge.action, nudge.detector, nudge.outcome, nudge.reason, nudge.hint) == (
        Action.NUDGE,
        "goal",
        "goal",
        "done?",
        "say so",
    )
    assert nudge.evidence == (1, 2)
    block = Verdict.block("repeat", "again")
    assert (block.action, block.detector, block.outcome, block.reason) == (
        Action.BLOCK,
        "repeat",
        "loop",
        "again",
    )


def test_worst_keeps_the_first_of_equals_and_is_ok_for_none() -> None:
    """Among verdicts of the same action and detector the first is kept; none is ok."""
    first, second = Verdict.stop("repeat", "first"), Verdict.stop("repeat", "second")
    assert worst([first, second]).reason == "first"
    assert worst([Verdict.ok("a"), Verdict.ok("b")]).reason == "a"
    assert worst([]) == Verdict.ok()


# -- fingerprint parts (PROTOCOL.md section 6) ------------------------------------------------


def test_a_part_at_its_limit_is_kept_whole() -> None:
    """A context of exactly 80 characters is not cut; 81 are cut to 79 and an ellipsis."""
    exact = "c" * 80
    assert build("a", "bash", exact, "ok", "0" * 8).split("::")[3] == exact
    assert build("a", "bash", exact + "d", "ok", "0" * 8).split("::")[3] == "c" * 79 + "…"


def test_a_cut_part_loses_its_trailing_space() -> None:
    """White space left at the cut is dropped before the ellipsis."""
    assert escape("a" * 78 + " bc", 80) == "a" * 78 + "…"


def test_an_empty_part_is_a_dash() -> None:
    """A part that escapes to nothing is written ``-``."""
    assert escape("") == "-"
    assert escape(" :: ") == "-"
    assert build("", "bash", "", "", "0" * 8) == "AGENT::-::bash::-::-#00000000"


def test_a_lone_surrogate_has_a_digest() -> None:
    """Text from JSON may hold a lone surrogate: it is digested, not an error."""
    assert digest8("\ud800") == "38da57e7"
    assert digest8("x") == "b1ba07e5"


# -- the guard: stopped procedures, ended sessions, enforce, shadow ---------------------------

READ = {"file_path": "/w/src/a.py"}
FP = "AGENT::agent::read::src/a.py::x#62d0dcbb"
REASON = "read 'src/a.py' ran twice in a row with the same result (x)."
HINT = (
    "Stop repeating read on 'src/a.py': it gave the same result (x) twice. Running it again"
    " changes nothing. Change the parameters, look somewhere else, or ask for help."
)


def guard(store: Any = None, **config: Any) -> Guard:
    return Guard(
        config=GuardConfig.from_mapping({"embedder": "ngram", **config}), store=store, audit=True
    )


def read_step(**more: Any) -> Step:
    return Step(tool="Read", args=READ, output="x", session="s1", cwd="/w", **more)


def test_a_blocked_procedure_is_refused_in_its_session_and_agent_only() -> None:
    """check() refuses the call that was blocked as a loop, with the same cwd, session, agent."""
    g = guard(repeat_action="block", escalate_to="supervisor")
    g.record(read_step())
    assert g.record(read_step()).action is Action.BLOCK
    assert g.check("Read", READ, session="s1", cwd="/w") == Verdict(
        Action.BLOCK,
        "repeat",
        "loop",
        FP,
        reason="read 'src/a.py' was stopped as a loop; it is not run again.",
        hint=f"This exact read was already stopped as a loop ({FP}). Do something different.",
        escalate_to="supervisor",
    )
    assert g.check("Read", READ, session="s1", cwd="/w", agent="AGENT").action is Action.BLOCK
    assert g.check("Read", READ, session="s1").action is Action.CONTINUE  # another path
    assert g.check("Read", READ, session="s2", cwd="/w").action is Action.CONTINUE
    assert g.check("Read", READ, session="s1", cwd="/w", agent="b").action is Action.CONTINUE


def test_a_nudged_repeat_is_not_refused_later() -> None:
    """Only a block or stop marks a procedure as stopped; a nudge lets it run again."""
    g = guard(repeat_action="nudge")
    g.record(read_step())
    assert g.record(read_step()).action is Action.NUDGE
    assert g.check("Read", READ, session="s1", cwd="/w").action is Action.CONTINUE


def test_a_stopped_session_answers_terminated_with_the_stop_it_had() -> None:
    """After a stop every step and check answers terminated, carrying the first stop."""
    g = guard()
    g.record(read_step())
    assert g.record(read_step()) == Verdict(
        Action.STOP, "repeat", "loop", FP, REASON, HINT, (0, 1), "human"
    )
    terminated = Verdict(
        Action.STOP,
        "terminated",
        "loop",
        FP,
        reason=f"The session already stopped (repeat): {REASON}",
        hint=HINT,
        escalate_to="human",
    )
    other = Step(tool="Read", args={"file_path": "/w/b.py"}, output="y", session="s1", cwd="/w")
    assert g.record(other) == terminated
    assert g.check("Read", {"file_path": "/w/c.py"}, session="s1", cwd="/w") == terminated


def test_enforce_raises_for_block_and_stop_naming_the_session() -> None:
    """enforce passes continue, nudge and an unanswered ask; block and stop raise."""
    g = Guard()
    for verdict in (Verdict.ok(), Verdict.nudge("goal", "n"), Verdict.ask("fail-streak", "a")):
        assert g.enforce(verdict, session="s") is verdict
    for verdict in (Verdict.block("repeat", "b"), Verdict.stop("repeat", "s")):
        with pytest.raises(Halt) as raised:
            g.enforce(verdict, session="s9")
        assert (raised.value.verdict, raised.value.session) == (verdict, "s9")
    refusing = Guard(approver=lambda v: False)
    assert refusing.enforce(Verdict.ok(), session="s") == Verdict.ok()
    with pytest.raises(ApprovalDenied) as denied:
        refusing.enforce(Verdict.ask("fail-streak", "a"), session="s3")
    assert denied.value.session == "s3"


def test_shadow_mode_keeps_a_nudge_and_turns_a_stop_into_continue() -> None:
    """In shadow mode a nudge is left as it is; a stop is logged as what it would have been."""
    g = Guard(config=GuardConfig.from_mapping({"embedder": "ngram", "repeat_action": "nudge"}))
    g.mode = "shadow"
    g.record(read_step())
    assert g.record(read_step()).action is Action.NUDGE
    s = Guard(config=GuardConfig.from_mapping({"embedder": "ngram"}), mode="shadow")
    s.record(read_step())
    got = s.record(read_step())
    assert (got.action, got.detector, got.reason) == (
        Action.CONTINUE,
        "repeat",
        f"[shadow: would stop] {REASON}",
    )


# -- the guard on a store that judges by compare-and-set (Redis's judge(session, fn)) ---------


class RetryingStore(MemoryStore):
    """A store with judge(): the reply of the first run is lost, so the judgement runs again
    on the state it saved (as the Redis store does); the records of both runs are kept."""

    def judge(self, session: str, fn: Any) -> Any:
        with self.transaction(session) as state:
            _, events = fn(state)
            again, more = fn(state)
            for event in (*events, *more):
                self.append_audit(event)
        return again


def test_a_judgement_run_again_counts_the_step_once() -> None:
    """A retried judgement answers the same verdict and keeps one step and one record."""
    store = RetryingStore()
    g = guard(store)
    assert g.record(read_step()) == Verdict.ok()
    assert (
        g.record(Step(tool="Grep", args={"pattern": "q"}, output="none", session="s1")).fired
        is False
    )
    assert store.peek("s1").steps == 2
    records = list(store.audit_records("s1"))
    assert [(r.kind, r.index, r.tool, r.action) for r in records] == [
        ("step", 0, "Read", "continue"),
        ("step", 1, "Grep", "continue"),
    ]


def test_a_step_delivered_twice_through_a_judging_store_is_judged_once() -> None:
    """The host's step id survives the store's retries: delivered twice, it counts once."""
    store = RetryingStore()
    g = guard(store)
    g.record(read_step(id="call_1"))
    g.record(read_step(id="call_1"))
    assert store.peek("s1").steps == 1
    stop = g.record(read_step(id="call_2"))
    assert (stop.action, stop.detector, stop.evidence) == (Action.STOP, "repeat", (0, 1))
    assert [(r.index, r.action) for r in store.audit_records("s1")] == [
        (0, "continue"),
        (1, "stop"),
    ]


class BrokenStore(MemoryStore):
    """A store whose judge() fails."""

    def judge(self, session: str, fn: Any) -> Any:
        raise StoreError("disk on fire")


def test_a_failing_store_allows_or_blocks_as_configured() -> None:
    """on_store_error=allow goes on unguarded, saying why; block refuses the call."""
    allowed = Guard(store=BrokenStore()).record(read_step())
    assert allowed == Verdict.ok("unguarded: the store failed (disk on fire)")
    blocked = Guard(store=BrokenStore(), on_store_error="block").record(read_step())
    assert (blocked.action, blocked.detector, blocked.outcome) == (Action.BLOCK, "store", "error")
    assert blocked.reason == (
        "The guard's store is unreachable (disk on fire); this call is refused, the session "
        "is not ended."
    )


def test_listeners_hear_every_step_and_its_verdict() -> None:
    """Each listener gets the step and the verdict the guard returned."""
    heard: list[tuple[str, Verdict]] = []

    class Ear:
        def on_verdict(self, step: Step, verdict: Verdict) -> None:
            heard.append((step.tool, verdict))

    g = Guard(config=GuardConfig.from_mapping({"embedder": "ngram"}), listeners=[Ear()])
    first, second = g.record(read_step()), g.record(read_step())
    assert heard == [("Read", first), ("Read", second)]
    assert second.detector == "repeat"


def test_every_recorded_step_is_audited_with_its_index_and_verdict() -> None:
    """A guard with audit on keeps one step record per step: index, tool, verdict."""
    store = MemoryStore()
    g = guard(store)
    g.record(read_step())
    g.record(read_step())
    records = list(store.audit_records("s1"))
    assert [(r.kind, r.index, r.tool, r.action, r.detector) for r in records] == [
        ("step", 0, "Read", "continue", None),
        ("step", 1, "Read", "stop", "repeat"),
    ]
    assert records[1].fingerprint == FP


def test_a_store_failure_is_logged_naming_the_session(caplog: Any) -> None:
    """The log line of an unguarded step names the store and the session."""
    with caplog.at_level("ERROR", logger="antiloop"):
        Guard(store=BrokenStore()).record(read_step())
    assert "failed for session 's1': disk on fire" in caplog.text


def test_a_risky_check_asks_a_person_about_that_call() -> None:
    """check() on a guard wired to approvals asks about the call as it was given."""
    asked: list[Any] = []
    store = MemoryStore()
    approvals = Approvals(store, channels=[CallbackChannel(lambda r: asked.append(r) or True)])
    g = Guard(config=GuardConfig(embedder="ngram"), store=store, approvals=approvals)
    verdict = g.check("Bash", {"command": "rm -rf build"}, session="s", agent="a", cwd="/w")
    assert verdict.action is Action.CONTINUE
    assert [(r.tool, dict(r.args), r.session, r.agent, r.risk) for r in asked] == [
        ("Bash", {"command": "rm -rf build"}, "s", "a", "delete")
    ]


def test_a_loop_stop_approved_by_a_person_goes_on() -> None:
    """record() escalates a loop stop to a person; an approval turns it into a nudge."""
    store = MemoryStore()
    approvals = Approvals(store, channels=[CallbackChannel(lambda r: True)])
    g = Guard(config=GuardConfig(embedder="ngram"), store=store, approvals=approvals)
    g.record(read_step())
    after = g.record(read_step())
    assert (after.action, after.detector, after.fingerprint) == (Action.NUDGE, "repeat", FP)
    assert [(r.risk, r.fingerprint) for r in approvals.ledger.list_approvals(session="s1")] == [
        ("loop", FP)
    ]


# -- failure streaks (PROTOCOL.md section 6) ----------------------------------------------------


def _failing(tool: str, i: int) -> Step:
    return Step(
        tool=tool,
        args={"command": f"make t{i}"},
        output=f"E: broke at /tmp/x{i}/a.c\nmore",
        exit_code=2,
        session="f",
    )


def test_a_failure_streak_has_a_fingerprint_of_its_tool_and_errors() -> None:
    """Three failures of one tool ask, with a fingerprint of the tool and the error lines."""
    g = Guard(config=GuardConfig(embedder="ngram"))
    verdicts = [g.record(_failing("Bash", i)) for i in range(3)]
    assert [v.action for v in verdicts] == [Action.CONTINUE, Action.CONTINUE, Action.ASK]
    assert verdicts[2] == Verdict(
        Action.ASK,
        "fail-streak",
        "failing",
        "AGENT::agent::fail-streak::build::3 failures#b6c48ea4",
        "Bash failed 3 times running.",
        "Bash has failed 3 times in a row. Change strategy: read the error, check your"
        " assumptions, or ask for help.",
        (0, 1, 2),
        "human",
    )
    fetch = Guard(config=GuardConfig(embedder="ngram"))
    for i in range(3):
        got = fetch.record(
            Step(
                tool="WebFetch",
                args={"url": f"http://x/{i}"},
                error="Error: timed out\nat",
                session="f",
            )
        )
    assert got.fingerprint == "AGENT::agent::fail-streak::fetch::3 failures#cba09c3f"
    assert got.reason == "WebFetch failed 3 times running; last error: Error: timed out"


def test_a_success_ends_the_failure_streak() -> None:
    """Two failures, a success, two failures: no ask; the third failure after it asks."""
    g = Guard(config=GuardConfig(embedder="ngram"))
    ok = Step(tool="Bash", args={"command": "ls"}, output="a.c", exit_code=0, session="f")
    got = [g.record(s) for s in (_failing("Bash", 0), _failing("Bash", 1), ok)]
    got += [g.record(_failing("Bash", i)) for i in (2, 3, 4)]
    assert [v.action for v in got] == [Action.CONTINUE] * 5 + [Action.ASK]
    assert got[-1].evidence == (3, 4, 5)


# -- the other detectors' verdicts, written out -------------------------------------------------

GOAL = "Write the release notes for version two."


def _goal_run(last: str) -> Verdict:
    g = Guard(config=GuardConfig.from_mapping({"embedder": "ngram", "min_steps": 1}))
    for i, message in enumerate(["Reading.", "Writing.", last]):
        v = g.record(
            {
                "tool": "read",
                "args": {"path": f"n{i}"},
                "output": str(i),
                "goal": GOAL,
                "message": message,
            }
        )
    return v


def test_a_goal_reached_is_a_stop_that_no_person_is_asked_about() -> None:
    """The goal's stop says how it was reached and escalates to nobody."""
    hint = "The goal is reached: give your final answer."
    assert _goal_run(GOAL) == Verdict(
        Action.STOP,
        "goal",
        "goal",
        None,
        "The agent's message reaches the goal (it is the goal itself).",
        hint,
        (2,),
        None,
    )
    assert _goal_run("I wrote the release notes for version two, they are done.") == Verdict(
        Action.STOP,
        "goal",
        "goal",
        None,
        "The agent's message reaches the goal (similarity 0.69 >= 0.12, 75% of the goal's key"
        " terms, says 'wrote').",
        hint,
        (2,),
        None,
    )


def test_stagnation_names_the_message_and_its_copies() -> None:
    """Four similar messages in a row stop as stalled, with the messages as evidence."""
    g = Guard(config=GuardConfig.from_mapping({"embedder": "ngram"}))
    said = "I am still checking the build log for errors."
    got = [
        g.record({"tool": "read", "args": {"path": f"m{i}"}, "output": str(i), "message": said})
        for i in range(5)
    ]
    assert [v.action for v in got] == [Action.CONTINUE] * 4 + [Action.STOP]
    assert got[-1] == Verdict(
        Action.STOP,
        "stagnation",
        "stalled",
        f"AGENT::agent::stagnation::{said}::4 similar messages#f1337982",
        "The agent is not moving: 4 similar messages in a row.",
        "You keep saying the same thing. Report what blocks you, or ask for help.",
        (1, 2, 3, 4),
        "human",
    )


def test_a_repeat_of_three_says_three_times() -> None:
    """With repeat_threshold 3 the reason and hint say 3 times, not twice."""
    g = Guard(config=GuardConfig.from_mapping({"embedder": "ngram", "repeat_threshold": 3}))
    step = {"tool": "read", "args": {"path": "a"}, "output": "x"}
    got = [g.record(step) for _ in range(3)]
    assert got[-1].reason == "read 'a' ran 3 times in a row with the same result (x)."
    assert got[-1].hint == (
        "Stop repeating read on 'a': it gave the same result (x) 3 times. Running it again"
        " changes nothing. Change the parameters, look somewhere else, or ask for help."
    )


def test_the_step_budget_stop_says_what_to_do() -> None:
    """max-steps stops at the budget with its reason and hint."""
    g = Guard(config=GuardConfig.from_mapping({"embedder": "ngram", "max_steps": 2}))
    got = [g.record({"tool": "read", "args": {"path": f"a{i}"}, "output": "x"}) for i in range(2)]
    assert got[-1] == Verdict(
        Action.STOP,
        "max-steps",
        "budget",
        None,
        "The session reached its budget of 2 steps.",
        "The step budget is spent: summarise what you found and stop.",
        (),
        "human",
    )


def test_a_cycle_stop_is_written_out() -> None:
    """A-B-A-B stops at its fourth step naming both steps, with the cycle's hint."""
    g = Guard(config=GuardConfig.from_mapping({"embedder": "ngram"}))
    steps = [
        {"tool": "read", "args": {"path": "a.py"}, "output": "A"},
        {"tool": "grep", "args": {"pattern": "x"}, "output": "a.py:1:x"},
    ] * 2
    got = [g.record(s) for s in steps]
    assert [v.action for v in got] == [Action.CONTINUE] * 3 + [Action.STOP]
    assert got[-1] == EXPECTED_CYCLE


def test_a_long_window_does_not_stretch_the_cycle_period() -> None:
    """A window kept long by repeat_threshold still finds no cycle past cycle_max_period."""
    g = Guard(
        config=GuardConfig.from_mapping(
            {"embedder": "ngram", "cycle_max_period": 2, "repeat_threshold": 10}
        )
    )
    steps = [{"tool": "read", "args": {"path": f"f{i}.py"}, "output": f"t{i}"} for i in range(3)]
    assert [g.record(s).action for s in steps * 3] == [Action.CONTINUE] * 9


class _Named:
    def __init__(self, ident: str, **thresholds: float) -> None:
        self.id = ident
        self.__dict__.update(thresholds)


def test_calibrated_thresholds_by_embedder() -> None:
    """The embedder's own thresholds, else its family's, else the defaults."""
    cases = {
        "ngram-v1": (0.12, 0.64),
        "ngram-v9": (0.12, 0.64),
        "minilm-l6-int8": (0.19, 0.84),
        "other": (0.5, 0.95),
    }
    for ident, want in cases.items():
        embedder: Any = _Named(ident)
        got = (calibrated_goal_threshold(embedder), calibrated_stagnation_threshold(embedder))
        assert got == want, ident
    own: Any = _Named("x", goal_threshold=0.3, stagnation_threshold=0.7)
    assert (calibrated_goal_threshold(own), calibrated_stagnation_threshold(own)) == (0.3, 0.7)


EXPECTED_CYCLE = Verdict(
    Action.STOP,
    "cycle",
    "loop",
    "AGENT::agent::cycle::read>grep::period 2#52f103c7",
    "The same 2 steps ran twice in a row with the same results: read a.py > grep x.",
    "You are going round in a circle (read>grep, twice, same results). Step back and try a"
    " different approach, or ask for help.",
    (0, 1, 2, 3),
    "human",
)


def test_composed_detectors_show_what_they_are_made_of() -> None:
    """`a | b` and `a & b` print their parts in order, a plain function on the left too."""

    def never(history: Any) -> None:
        return None

    assert repr(AllOf((Repeat(2), Cycle(3)))) == "(Repeat(threshold=2) & Cycle(max_period=3))"
    assert repr(AnyOf((Repeat(2), Cycle(3)))) == "Repeat(threshold=2) | Cycle(max_period=3)"
    both = never & Repeat(2)
    assert isinstance(both, AllOf)
    assert both.detectors == (never, Repeat(2))


def test_procedure_keys_are_stored_as_digests() -> None:
    """Stored states hold every procedure key as 16 hex digits (a short key could hold a
    secret: ``mysql -phunter2``), the same in every process."""
    key = "k" * 48
    assert key_digest(key) == "8d5e450b8dae1ee1"
    assert key_digest(key + "x") == "75028df646fea799"
    assert key_digest("\ud800" * 49) == "804c1701b80952b0"


# -- events (PROTOCOL.md section 2) -------------------------------------------------------------


def test_an_event_reads_and_writes_back_field_by_field() -> None:
    """Non-text outputs are dumped as sorted JSON; counts, cost and states are kept; the event
    written back has every field under its own name."""
    step = step_from_dict(
        {
            "tool": "t",
            "args": {"a": 1},
            "output": {"b": "é", "a": [1]},
            "error": [1],
            "exit_code": True,
            "tokens_in": 0,
            "tokens_out": 2.0,
            "cost_usd": 0,
            "session": "s",
            "agent": "A",
            "paths": ["x"],
            "file_states": {"x": {"sha256": "ab", "mtime": 1.5}, "y": {"sha256": "cd"}},
            "id": "",
        }
    )
    assert (step.output, step.error, step.exit_code, step.id) == (
        '{"a": [1], "b": "é"}',
        "[1]",
        None,
        None,
    )
    assert (step.tokens_in, step.tokens_out, step.cost_usd) == (0, 2, 0.0)
    assert step.to_dict() == {
        "session": "s",
        "agent": "A",
        "tool": "t",
        "args": {"a": 1},
        "paths": ["x"],
        "output": '{"a": [1], "b": "é"}',
        "error": "[1]",
        "tokens_in": 0,
        "tokens_out": 2,
        "cost_usd": 0.0,
        "file_states": {"x": {"sha256": "ab", "mtime": 1.5}, "y": {"sha256": "cd"}},
    }


def test_exit_codes_counts_and_costs_take_only_what_they_mean() -> None:
    """Whole floats are integers; negatives, booleans, infinity and fractions are none."""

    def read(**fields: Any) -> Step:
        return step_from_dict({"tool": "t", **fields})

    assert [read(exit_code=v).exit_code for v in (2.0, 2.5, " -3 ", None, False, 0)] == [
        2,
        None,
        -3,
        None,
        None,
        0,
    ]
    assert [read(tokens_in=v).tokens_in for v in (0, 0.0, 1, -1, 1.5, True)] == [
        0,
        0,
        1,
        None,
        None,
        None,
    ]
    costs = (0, 0.0, 0.25, -0.1, float("inf"), True)
    assert [read(cost_usd=v).cost_usd for v in costs] == [0.0, 0.0, 0.25, None, None, None]
    assert [read(id=v).id for v in ("", "c1", 7, True)] == [None, "c1", "7", None]


def test_a_bad_event_is_refused_saying_what_is_wrong() -> None:
    """Each malformed event gets its own one-line reason."""
    bad = [
        ({}, "'tool' is missing"),
        ({"tool": None}, "'tool' is null"),
        ({"tool": 3}, "'tool' must be a string, not int"),
        ({"tool": " "}, "'tool' is empty"),
        ({"tool": "t", "args": []}, "'args' must be an object, not list"),
        ({"tool": "t", "session": 1}, "'session' must be a string, not int"),
        ({"tool": "t", "agent": []}, "'agent' must be a string, not list"),
    ]
    for event, reason in bad:
        with pytest.raises(BadStep) as raised:
            step_from_dict(event)
        assert str(raised.value) == reason


def test_optional_event_fields_keep_only_what_is_usable() -> None:
    """paths keep strings (one string is one path); unknown fields are kept aside; file states
    keep a non-empty sha256 and a numeric mtime; an empty cwd is none."""
    step = step_from_dict(
        {
            "tool": "t",
            "paths": ["a", 1, "b"],
            "cwd": "/w",
            "x-extra": 1,
            "message": {"m": 1},
            "file_states": {
                "p": "bad",
                "q": {"sha256": "", "mtime": True},
                "r": {"sha256": 5, "mtime": 2},
                "s": {"sha256": "ff"},
            },
        }
    )
    assert (step.paths, step.cwd, step.extra, step.message, step.agent) == (
        ("a", "b"),
        "/w",
        {"x-extra": 1},
        '{"m": 1}',
        "agent",
    )
    assert step.file_states == {
        "q": FileState(None, None),
        "r": FileState(None, 2.0),
        "s": FileState("ff", None),
    }
    lone = step_from_dict({"tool": "t", "paths": "one", "cwd": ""})
    assert (lone.paths, lone.cwd) == (("one",), None)


def test_detectors_left_out_of_the_config_never_fire() -> None:
    """detectors = ["repeat"]: no cycle and no failure streak, whatever their settings."""
    g = Guard(config=GuardConfig.from_mapping({"embedder": "ngram", "detectors": ["repeat"]}))
    steps = [
        {"tool": "read", "args": {"path": "a.py"}, "output": "A"},
        {"tool": "grep", "args": {"pattern": "x"}, "output": "a.py:1:x"},
    ] * 2
    assert [g.record(s).action for s in steps] == [Action.CONTINUE] * 4
    assert [g.record(_failing("Bash", i)).action for i in range(4)] == [Action.CONTINUE] * 4


def test_a_failure_streak_of_one_asks_at_the_first_failure() -> None:
    """failure_streak = 1 asks at every failure."""
    g = Guard(config=GuardConfig.from_mapping({"embedder": "ngram", "failure_streak": 1}))
    assert g.record(_failing("Bash", 0)).detector == "fail-streak"


def test_configured_goal_and_stagnation_thresholds_are_used() -> None:
    """A goal_threshold above the message's similarity reaches no goal; a stagnation_threshold
    above the messages' similarity finds no stagnation."""
    g = Guard(
        config=GuardConfig.from_mapping(
            {"embedder": "ngram", "min_steps": 1, "goal_threshold": 0.99}
        )
    )
    last = "I wrote the release notes for version two, they are done."
    got = [
        g.record(
            {
                "tool": "read",
                "args": {"path": f"n{i}"},
                "output": str(i),
                "goal": GOAL,
                "message": m,
            }
        )
        for i, m in enumerate(["Reading.", "Writing.", last])
    ]
    assert got[-1].action is Action.CONTINUE
    s = Guard(config=GuardConfig.from_mapping({"embedder": "ngram", "stagnation_threshold": 1.0}))
    said = "I am still checking the build log for errors."
    messages = [
        {"tool": "read", "args": {"path": f"m{i}"}, "output": str(i), "message": said}
        for i in range(5)
    ]
    assert [s.record(m).action for m in messages] == [Action.CONTINUE] * 5


def test_a_blocked_cycle_is_refused_when_tried_again() -> None:
    """A detector that blocks cycles marks the cycle's last call as stopped."""
    g = Guard(detector=Cycle(2).with_action(Action.BLOCK))
    steps = [
        {"tool": "read", "args": {"path": "a.py"}, "output": "A"},
        {"tool": "grep", "args": {"pattern": "x"}, "output": "a.py:1:x"},
    ] * 2
    assert [g.record(s).action for s in steps][-1] is Action.BLOCK
    assert g.check("grep", {"pattern": "x"}).action is Action.BLOCK


def test_the_guard_remembers_the_last_64_stopped_procedures() -> None:
    """Past 64 blocked procedures the oldest is forgotten, the next oldest is not."""
    g = Guard(
        config=GuardConfig.from_mapping(
            {"embedder": "ngram", "repeat_action": "block", "max_steps": 1000}
        )
    )
    for i in range(65):
        step = {"tool": "read", "args": {"path": f"p{i}"}, "output": "x"}
        g.record(step)
        assert g.record(step).action is Action.BLOCK
    assert g.check("read", {"path": "p0"}).action is Action.CONTINUE
    assert g.check("read", {"path": "p1"}).action is Action.BLOCK
    assert g.check("read", {"path": "p64"}).action is Action.BLOCK


def test_file_states_are_compared_by_their_canonical_path() -> None:
    """The same file given absolutely under cwd and relatively has one state: a repeat."""
    g = Guard(config=GuardConfig.from_mapping({"embedder": "ngram"}))
    edit = {
        "tool": "Edit",
        "args": {"file_path": "a.py", "old_string": "1", "new_string": "2"},
        "output": "ok",
        "cwd": "/w",
    }
    first = g.record({**edit, "file_states": {"/w/a.py": {"sha256": "ab" * 32}}})
    again = g.record({**edit, "file_states": {"a.py": {"sha256": "ab" * 32}}})
    assert (first.action, again.action, again.detector) == (Action.CONTINUE, Action.STOP, "repeat")
