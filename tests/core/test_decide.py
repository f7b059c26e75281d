"""The pure core: observe, decide, sameness in one place, and readings made only where needed."""

from __future__ import annotations

import gc
import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from antiloop import Action, Guard, GuardConfig, Step
from antiloop.commands.check import judge_stream, wire_text
from antiloop.core import decide
from antiloop.core.deferred import BUDGET, Deferred, exact_digest, fallback, is_fallback
from antiloop.core.history import SessionState
from antiloop.core.result import read_result
from antiloop.core.step import parse_line
from antiloop.defaults import policy_of

PYTEST = "Bash"  # the tool of the test runs below


def _test_run(duration: str, session: str = "default") -> Step:
    return Step(
        session=session,
        tool=PYTEST,
        args={"command": "pytest tests/test_a.py -q"},
        output=f"=== 2 failed, 10 passed in {duration} ===\n",
        exit_code=1,
    )


@pytest.fixture
def small_budget():
    """A text budget of 2 KiB: a few small texts push the oldest out."""
    limit = BUDGET.limit
    BUDGET.clear()
    BUDGET.limit = 2048
    yield BUDGET
    BUDGET.clear()
    BUDGET.limit = limit


def test_a_step_whose_procedure_matches_no_recent_one_is_not_read():
    """Readings are made only when a step of the same procedure compares with it."""
    state = SessionState()
    policy = policy_of(GuardConfig(), Guard().detector)
    first = decide.observe(state, _test_run("0.5s"), policy).record
    assert first is not None
    assert first.made is None
    other = Step(tool="grep", args={"pattern": "x"}, output="a.py:1: x")
    assert decide.observe(state, other, policy).record.made is None  # type: ignore[union-attr]
    again = decide.observe(state, _test_run("0.7s"), policy).record
    assert again is not None
    assert again.made is not None
    assert first.made is not None
    assert again.same_as[1] is not None
    assert again.same_as[1].label == "2 failing"


def test_results_that_differ_only_by_a_duration_are_the_same_while_the_text_is_kept():
    """With the first result's text kept, two test runs that differ in their duration repeat."""
    guard = Guard()
    guard.record(_test_run("0.52s"))
    assert guard.record(_test_run("0.61s")).detector == "repeat"


def _noise(guard: Guard, name: str) -> None:
    for i in range(40):
        guard.record(Step(tool="noise", args={"i": i}, output="n" * 40, session=f"{name}{i}"))


def test_an_evicted_text_falls_back_to_the_exact_digest(small_budget):
    """Once a text is pushed out of the budget, only an exactly equal result still repeats."""
    guard = Guard()
    guard.record(_test_run("0.52s"))
    _noise(guard, "a")
    assert guard.record(_test_run("0.61s")).action is Action.CONTINUE  # missed, never false
    guard.record(_test_run("0.52s", "s2"))
    _noise(guard, "b")
    assert guard.record(_test_run("0.52s", "s2")).detector == "repeat"


def test_fallback_readings_say_so_and_carry_the_exact_digest():
    """A dropped text's readings are fallback ones: its exact digest, exit code and files."""
    kept = Deferred("test", True, "out", "err", 1, {})
    made = read_result("test", True, "out", "err", 1, {})
    assert exact_digest("out", "err") == made.exact
    assert not is_fallback(kept.readings())
    assert kept.readings() == made
    assert is_fallback(fallback(made.exact, 1, ()))
    gone = Deferred("test", True, "out", "err", 1, {})
    gone.drop()
    assert is_fallback(gone.readings())
    assert gone.readings().exit_code == 1


def test_a_text_too_big_for_the_budget_is_read_at_once(small_budget):
    """A text over a sixteenth of the budget is never held: its readings are made at once."""
    big = Deferred("read", False, "z" * 70_000, None, None, {})
    assert big.made is not None
    assert not big.kept
    assert len(small_budget) == 0


def test_a_forgotten_session_lets_its_texts_go():
    """Texts live only as long as their steps' records: forgetting a session frees them."""
    BUDGET.clear()
    guard = Guard()
    for i in range(5):
        guard.record(Step(tool="grep", args={"pattern": f"p{i}"}, output="a\n", session="s"))
    assert len(BUDGET) > 0
    guard.forget("s")
    gc.collect()
    assert len(BUDGET) == 0


def test_a_step_beyond_the_longest_cycle_lets_its_text_go():
    """No later step compares with a step more than ``lookback`` back: its text is dropped."""
    state = SessionState()
    policy = policy_of(GuardConfig(cycle_max_period=2), Guard().detector)
    records = [
        decide.observe(state, Step(tool="grep", args={"pattern": f"p{i}"}, output="a"), policy)
        for i in range(4)
    ]
    kept = [h.record.read for h in records]  # type: ignore[union-attr]
    assert kept == [False, False, True, True]


def test_an_allowed_tool_is_invisible_and_an_ended_session_is_refused():
    """An allowed tool never counts; ``refuse`` answers any call of an ended session."""
    guard = Guard(config=GuardConfig(allow_repeat_tools=("sleep",)))
    for _ in range(3):
        assert guard.record(Step(tool="sleep", args={"s": 1})).action is Action.CONTINUE
    state = guard.store.peek("default")
    assert decide.refuse(state, "sleep", {"s": 1}, "agent", (), None, guard.policy).detector is None
    step = Step(tool="grep", args={"pattern": "x"}, output="a")
    guard.record(step)
    assert guard.record(step).detector == "repeat"
    refused = decide.refuse(state, "ls", {}, "agent", (), None, guard.policy)
    assert (refused.action, refused.detector) == (Action.STOP, "terminated")


def test_the_policy_follows_the_guards_mode_and_detector():
    """Setting ``mode`` or ``detector`` on a Guard changes what the core decides."""
    guard = Guard()
    guard.mode = "shadow"
    step = Step(tool="grep", args={"pattern": "x"}, output="a")
    guard.record(step)
    assert guard.record(step).action is Action.CONTINUE
    guard.detector = lambda history: None
    assert guard.policy.mode == "shadow"
    assert guard.record(step).detector is None


@settings(max_examples=300)
@given(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from(["continue", "ask", "stop", "invalid"]),
    st.one_of(st.none(), st.text()),
    st.one_of(st.none(), st.text()),
    st.one_of(st.none(), st.text()),
    st.text(),
)
def test_a_verdict_line_is_what_json_dumps_writes(index, action, detector, outcome, fp, reason):
    """``antiloop check`` writes each verdict line as ``json.dumps`` would, to the byte."""
    line = {
        "index": index,
        "action": action,
        "detector": detector,
        "outcome": outcome,
        "fingerprint": fp,
        "reason": reason,
    }
    assert wire_text(line) == json.dumps(line, ensure_ascii=False) + "\n"
    assert wire_text({**line, "more": 1}) == json.dumps({**line, "more": 1}, ensure_ascii=False) + (
        "\n"
    )


@pytest.mark.parametrize(
    "args",
    [
        '{"n": 123456789012345678901234567890}',
        '{"n": NaN}',
        '{"n": 1e400}',
        '{"s": "\\ud800"}',
        '{"n": 1, "n": 2}',
        '{"f": 0.1, "g": -0.0, "e": 1E-7}',
    ],
)
def test_a_line_reads_as_the_stdlib_reads_it(args):
    """The fast JSON path gives the stdlib's values, also where orjson would differ (a lone
    surrogate then gets the Unicode rule of steps: U+FFFD)."""
    from antiloop.core.step import valid_unicode

    raw = f'{{"tool": "t", "args": {args}}}'
    got = parse_line(raw.encode()).args
    want = valid_unicode(json.loads(raw)["args"])
    assert repr(got) == repr(want)
    assert all(type(got[k]) is type(want[k]) for k in want)


def test_a_valid_step_is_kept_when_its_names_were_seen_before():
    """A step whose session name was seen before (another copy of it) is not rebuilt."""
    from antiloop.core.redact import redact_name
    from antiloop.core.step import valid_step

    first, second = ("-".join(["sqlfluff", "sqlfluff", str(n)]) for n in (1625, 1625))
    assert first == second
    assert first is not second
    redact_name(first)
    step = Step(tool="bash", args={"command": "ls"}, session=second)
    assert valid_step(step) is step


def test_check_reads_and_writes_the_stream_as_before():
    """A stream through ``judge_stream`` gives the verdict lines the stdlib would write."""
    source = io.BytesIO(b'{"tool": "grep", "args": {"q": "\xc3\xa9"}, "output": "a"}\n' * 2)
    out = io.StringIO()
    assert judge_stream(source, out, Guard()) == 3
    lines = out.getvalue().splitlines()
    assert json.loads(lines[1])["detector"] == "repeat"
    assert lines[1] == json.dumps(json.loads(lines[1]), ensure_ascii=False)
