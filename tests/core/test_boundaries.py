"""Behaviour pinned at the boundaries of the protocol (docs/protocol.md), through the public API.

Each test names the rule it pins; expectations are written out, never computed with the
module under test. These are the tests a redesign of the internals must keep passing.
"""

from __future__ import annotations

from typing import Any

import pytest

from antiloop import AnyOf, Guard
from antiloop.config import GuardConfig
from antiloop.core.fingerprint import parse
from antiloop.core.verdict import Action, Verdict


def guard(**config: Any) -> Guard:
    return Guard(config=GuardConfig.from_mapping({"embedder": "ngram", **config}))


def run(events: list[dict[str, Any]], **config: Any) -> list[Verdict]:
    g = guard(**config)
    return [g.record(e) for e in events]


def first_fired(verdicts: list[Verdict]) -> tuple[int, str | None] | None:
    for i, v in enumerate(verdicts):
        if v.action is not Action.CONTINUE:
            return i, v.detector
    return None


def read(path: str, output: str, **more: Any) -> dict[str, Any]:
    return {"tool": "Read", "args": {"file_path": path}, "output": output, **more}


# -- cycle: 2 <= p <= cycle_max_period, at the maximum too -------------------------------------


def _cycle(period: int, copies: int = 2) -> list[dict[str, Any]]:
    return [read(f"f{i}.py", f"text {i}") for _ in range(copies) for i in range(period)]


@pytest.mark.parametrize("limit", [2, 3, 4, 5])
def test_a_cycle_at_the_maximum_period_is_found(limit: int) -> None:
    """A cycle whose period equals cycle_max_period stops at its last step."""
    got = run(_cycle(limit), cycle_max_period=limit)
    assert first_fired(got) == (2 * limit - 1, "cycle")
    assert parse(got[-1].fingerprint or "").result.startswith(f"period {limit}#")


@pytest.mark.parametrize("limit", [2, 3, 4])
def test_a_cycle_one_longer_than_the_maximum_is_not(limit: int) -> None:
    """Period cycle_max_period + 1 is beyond the detector: no stop."""
    assert first_fired(run(_cycle(limit + 1), cycle_max_period=limit)) is None


def test_a_cycle_one_shorter_than_the_maximum_is_found() -> None:
    """Period 3 under the default maximum of 4."""
    assert first_fired(run(_cycle(3))) == (5, "cycle")


def test_a_period_that_is_itself_a_repetition_is_a_repeat_not_a_cycle() -> None:
    """A A A A is a repeat at step 1, never a cycle of period 2 (primitive periods only)."""
    assert first_fired(run([read("a.py", "x")] * 4)) == (1, "repeat")


# -- the failure streak: tool names case-insensitive, threshold and one on each side ---------


@pytest.mark.parametrize(
    ("threshold", "fails", "fires_at"),
    [(3, 2, None), (3, 3, 2), (3, 4, 2), (2, 1, None), (2, 2, 1), (4, 3, None), (4, 4, 3)],
)
def test_the_failure_streak_fires_at_its_threshold(
    threshold: int, fails: int, fires_at: int | None
) -> None:
    """The same tool fails ``failure_streak`` times running: ask, at that step and no sooner."""
    events = [
        {"tool": "Bash", "args": {"command": f"make t{i}"}, "error": f"E{i}", "exit_code": 2}
        for i in range(fails)
    ]
    got = run(events, failure_streak=threshold)
    assert first_fired(got) == (None if fires_at is None else (fires_at, "fail-streak"))
    if fires_at is not None:
        assert got[fires_at].action is Action.ASK


def test_failure_streak_tool_names_compare_case_insensitively() -> None:
    """Bash, bash, BASH: one tool, one streak (section 5)."""
    events = [
        {"tool": name, "args": {"command": f"make t{i}"}, "error": f"E{i}", "exit_code": 2}
        for i, name in enumerate(["Bash", "bash", "BASH"])
    ]
    assert first_fired(run(events)) == (2, "fail-streak")


def test_a_success_breaks_the_streak() -> None:
    fail = {"tool": "Bash", "args": {"command": "make a"}, "error": "E", "exit_code": 2}
    ok = {"tool": "Bash", "args": {"command": "make b"}, "output": "ok", "exit_code": 0}
    events = [fail, {**fail, "args": {"command": "make c"}}, ok]
    events += [{**fail, "args": {"command": f"make d{i}"}} for i in range(2)]
    assert first_fired(run(events)) is None


# -- agents: compared case-insensitively, one stream ------------------------------------------


def test_agent_names_compare_case_insensitively() -> None:
    """Explorer and explorer are one agent: the second step is a repeat (section 2)."""
    a = {"tool": "Grep", "args": {"pattern": "x"}, "output": "a.py:1:x", "agent": "Explorer"}
    got = run([a, {**a, "agent": "explorer"}])
    assert first_fired(got) == (1, "repeat")
    assert (got[1].fingerprint or "").startswith("AGENT::explorer::grep::")


# -- repeat_threshold: its value, one below, one above ------------------------------------------


@pytest.mark.parametrize(("threshold", "fires_at"), [(2, 1), (3, 2), (4, 3)])
def test_the_repeat_fires_at_its_threshold(threshold: int, fires_at: int) -> None:
    step = read("a.py", "same")
    got = run([step] * (threshold + 1), repeat_threshold=threshold)
    assert first_fired(got) == (fires_at, "repeat")
    assert first_fired(got[:fires_at]) is None  # one below: nothing


# -- max steps: its value, one below, one above ------------------------------------------------


@pytest.mark.parametrize(("limit", "fires_at"), [(1, 0), (3, 2), (10, 9)])
def test_max_steps_fires_at_the_budget(limit: int, fires_at: int) -> None:
    events = [read(f"f{i}.py", str(i)) for i in range(limit + 1)]
    got = run(events, max_steps=limit)
    assert first_fired(got) == (fires_at, "max-steps")
    assert got[fires_at].action is Action.STOP


@pytest.mark.parametrize(("task", "budget"), [("simple", 25), ("research", 100), ("coding", 250)])
def test_budgets_by_task_type(task: str, budget: int) -> None:
    events = [read(f"f{i}.py", str(i)) for i in range(budget)]
    assert first_fired(run(events, task_type=task)) == (budget - 1, "max-steps")


# -- precedence: among stops at one step, repeat > cycle > goal > stagnation > max-steps ---------


def test_repeat_beats_max_steps_at_the_same_step() -> None:
    got = run([read("a.py", "x")] * 2, max_steps=2)
    assert first_fired(got) == (1, "repeat")


def test_cycle_beats_max_steps_at_the_same_step() -> None:
    got = run(_cycle(2), max_steps=4)
    assert first_fired(got) == (3, "cycle")


PRECEDENCE = ["repeat", "cycle", "goal", "stagnation", "max-steps"]
PAIRS = [(a, b) for i, a in enumerate(PRECEDENCE) for b in PRECEDENCE[i + 1 :]]


def _fires(detector: str) -> Any:
    def fire(history: Any) -> Verdict:
        return Verdict.stop(detector, f"{detector} fired")

    return fire


@pytest.mark.parametrize(("first", "second"), PAIRS)
def test_every_precedence_pair_among_stops(first: str, second: str) -> None:
    """Two stops at one step: the verdict names the earlier of repeat, cycle, goal,
    stagnation, max-steps, whatever order the policy lists them in (section 5)."""
    for parts in ([_fires(first), _fires(second)], [_fires(second), _fires(first)]):
        g = Guard(detector=AnyOf(parts))
        assert g.record(read("a.py", "x")).detector == first


def test_stop_beats_ask_at_the_same_step() -> None:
    """A step that ends a failure streak and repeats the step before it: the repeat's stop."""
    fail = {"tool": "Bash", "args": {"command": "make"}, "error": "Error: x", "exit_code": 2}
    got = run([{**fail, "args": {"command": "make a"}}, fail, fail])
    assert first_fired(got) == (2, "repeat")
    assert got[2].action is Action.STOP


def test_repeat_beats_goal_and_stagnation() -> None:
    """The fifth message is both stagnant and a repeat: the verdict names the repeat."""
    g = guard(min_steps=1)
    msg = "Still looking at a.py."
    got = [g.record(read(f"f{i}.py", str(i), message=msg)) for i in range(3)]
    got.append(g.record(read("f2.py", "2", message=msg)))
    assert first_fired(got) == (3, "repeat")


# -- failing-test counts: every runner, counts of 0, 1, 2 digits and more ------------------------

RUNNERS: dict[str, tuple[str, Any]] = {
    # runner: (command, summary of n failing) -> the count the summary says
    "pytest": (
        "pytest -q",
        lambda n: (
            f"===== {n} failed, 3 passed in 0.52s =====" if n else "===== 3 passed in 0.52s ====="
        ),
    ),
    "pytest errors": (
        "pytest -q",
        lambda n: (
            f"===== {n} failed, 2 errors in 1.5s =====" if n else "===== 2 errors in 1.5s ====="
        ),
    ),
    "unittest": (
        "python -m unittest",
        lambda n: (
            f"Ran 7 tests in 0.003s\n\nFAILED (failures={n}, errors=1)"
            if n
            else "Ran 7 tests in 0.003s\n\nFAILED (errors=1)"
        ),
    ),
    "jest": (
        "npx jest",
        lambda n: (
            f"Test Suites: 9 failed, 9 total\nTests:       {n} failed, 5 passed, {n + 5} total"
        ),
    ),
    "vitest": (
        "npx vitest run",
        lambda n: f" Test Files  1 failed (1)\n      Tests  {n} failed | 5 passed ({n + 5})",
    ),
    "mocha": ("npx mocha", lambda n: f"  5 passing (12ms)\n  {n} failing\n"),
    "go": (
        "go test ./...",
        lambda n: (
            "".join(f"--- FAIL: TestCase{i} (0.00s)\n" for i in range(n)) + "FAIL\tgame/app\t0.012s"
        ),
    ),
    "cargo": (
        "cargo test",
        lambda n: (
            f"test result: FAILED. 3 passed; {n} failed; 0 ignored; 0 measured\n\n"
            "test result: ok. 2 passed; 0 failed; 0 ignored"
        ),
    ),
    "maven": ("mvn test", lambda n: f"[ERROR] Tests run: 10, Failures: {n}, Errors: 1, Skipped: 0"),
    "rspec": ("rspec", lambda n: f"Finished in 0.5 seconds\n10 examples, {n} failures"),
}
EXTRA = {"pytest errors": 2, "unittest": 1, "maven": 1}  # errors counted with the failures


@pytest.mark.parametrize("runner", sorted(RUNNERS))
@pytest.mark.parametrize("n", [0, 1, 12, 345])
def test_every_runner_summary_reads_its_failing_count(runner: str, n: int) -> None:
    """The same summary twice is a repeat named by the count; one more failing is progress."""
    command, summary = RUNNERS[runner]
    if runner == "go" and n == 345:
        n = 23  # 345 "--- FAIL" lines are more than the tail the reader looks at
    step = {"tool": "Bash", "args": {"command": command}, "exit_code": 1}
    same = run(
        [{**step, "output": f"run 1\n{summary(n)}"}, {**step, "output": f"run 2\n{summary(n)}"}]
    )
    want = n + EXTRA.get(runner, 0)
    assert same[1].detector == "repeat", (runner, n, same[1].reason)
    assert parse(same[1].fingerprint or "").result.startswith(f"{want} failing#"), same[
        1
    ].fingerprint
    moved = run([{**step, "output": summary(n)}, {**step, "output": summary(n + 1)}])
    assert moved[1].action is Action.CONTINUE, (runner, n, moved[1].reason)


# -- error lines ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("error[E0425]: cannot find value `x` in this scope", "error[E0425]: cannot find value"),
        ("src/a.ts(3,5): error TS2304: Cannot find name 'y'.", "error TS2304: Cannot find name"),
        ("npm error code ELIFECYCLE", "npm error code ELIFECYCLE"),
        ("KeyError: 'x'", "KeyError: 'x'"),
        ("FAILED tests/test_a.py::test_jump - AssertionError", "FAILED tests/test_a.py::test_jump"),
        ("fatal: not a git repository", "fatal: not a git repository"),
        (
            'Traceback (most recent call last):\n  File "a.py", line 1\nValueError: bad',
            "ValueError: bad",
        ),
    ],
)
def test_the_same_error_line_is_the_same_result(line: str, named: str) -> None:
    """Output around it differs; the error line is the same: a repeat named by that line."""
    step = {"tool": "Bash", "args": {"command": "./build.sh"}, "exit_code": 1}
    got = run(
        [{**step, "output": f"step 1 of 9\n{line}\n"}, {**step, "output": f"step 2 of 9\n{line}\n"}]
    )
    assert got[1].detector == "repeat", got[1].reason
    assert named in (got[1].fingerprint or "") or named in got[1].reason, got[1].fingerprint


@pytest.mark.parametrize(
    "line",
    [
        "0 error(s), 0 warning(s)",
        "Error: (none)",
        "0 errors",
        "no errors found",
        "errors: 0",
        "Errors: 0",
    ],
)
def test_a_line_that_says_no_error_is_no_error_line(line: str) -> None:
    """Two builds that differ, both saying there is no error: not the same result."""
    step = {"tool": "Bash", "args": {"command": "msbuild"}, "exit_code": 0}
    got = run(
        [
            {**step, "output": f"Compiled 12 files.\n{line}\n"},
            {**step, "output": f"Compiled 13 files.\n{line}\n"},
        ]
    )
    assert got[1].action is Action.CONTINUE, got[1].reason


# -- scrubbing: volatile values are no difference --------------------------------------------------


@pytest.mark.parametrize(
    ("one", "two"),
    [
        ("/dev/shm/tmp8f3a2b/out.bin", "/dev/shm/tmpq9z1xk/out.bin"),
        ("/tmp/pytest-of-ann/pytest-7/x", "/tmp/pytest-of-ann/pytest-8/x"),
        ("/var/tmp/build.1234/log", "/var/tmp/build.9876/log"),
        ("/var/folders/zz/abc123/T/tmpx", "/var/folders/zz/def456/T/tmpy"),
        ("/private/var/folders/zz/abc/T/x", "/private/var/folders/zz/qrs/T/y"),
        ("took 0.52s", "took 3.1s"),
        ("at 2026-12-01 08:15:03", "at 2026-12-02 09:16:04"),
        ("object at 0x7f3a9c2e1b40", "object at 0x55d0c0ffee00"),
        ("started pid 4242", "started pid 977"),
    ],
)
def test_volatile_values_are_scrubbed(one: str, two: str) -> None:
    """The same output but for a temporary path, a duration, a date, an address, a pid."""
    step = {"tool": "Bash", "args": {"command": "python run.py"}, "exit_code": 0}
    got = run([{**step, "output": f"done: {one}\n"}, {**step, "output": f"done: {two}\n"}])
    assert got[1].detector == "repeat", got[1].reason


def test_an_action_prints_as_its_name() -> None:
    """print(verdict.action) shows ``stop``, not ``4``; the order and the numbers stay."""
    assert (str(Action.STOP), f"{Action.CONTINUE}", f"{Action.ASK:>5}") == (
        "stop",
        "continue",
        "  ask",
    )
    assert int(Action.STOP) == 4
    assert Action.STOP > Action.BLOCK > Action.ASK > Action.NUDGE > Action.CONTINUE


# -- min_steps, stagnation_window, max_sessions: the value, one below, one above ----------------

GOAL = "Add a dark mode toggle to the settings page."
DONE = "The dark mode toggle is added to the settings page."


@pytest.mark.parametrize("min_steps", [2, 3, 4])
def test_the_goal_is_checked_from_the_min_steps_th_step(min_steps: int) -> None:
    """The same finished message at every step: the goal stops at step min_steps (1-based),
    not one before; messages before it are remembered, not judged."""
    events = [read(f"f{i}.py", str(i), goal=GOAL, message=DONE) for i in range(min_steps + 1)]
    assert first_fired(run(events, min_steps=min_steps)) == (min_steps - 1, "goal")


@pytest.mark.parametrize("window", [2, 3, 4])
def test_stagnation_needs_window_plus_one_similar_messages(window: int) -> None:
    """stagnation_window w: the (w+1)-th same message stops, the w-th does not."""
    said = "I am still checking the build log for errors."
    events = [read(f"f{i}.py", str(i), message=said) for i in range(window + 2)]
    assert first_fired(run(events, min_steps=1, stagnation_window=window)) == (
        window,
        "stagnation",
    )


@pytest.mark.parametrize(
    ("limit", "others", "forgotten"), [(2, 1, False), (2, 2, True), (3, 2, False)]
)
def test_check_forgets_the_least_recent_session_past_max_sessions(
    limit: int, others: int, forgotten: bool
) -> None:
    """antiloop check keeps max_sessions sessions: a session pushed out by newer ones starts
    afresh when it comes back (its second step is no repeat); one still kept repeats."""
    import io
    import json

    from antiloop.commands.check import guard_for, judge_stream

    step = read("a.py", "A")
    lines = [{**step, "session": "s0"}]
    lines += [{**step, "session": f"s{i + 1}"} for i in range(others)]
    lines.append({**step, "session": "s0"})
    out = io.StringIO()
    data = "".join(json.dumps(e) + "\n" for e in lines).encode()
    config = GuardConfig.from_mapping({"embedder": "ngram", "max_sessions": limit})
    judge_stream(io.BytesIO(data), out, guard_for(config))
    last = json.loads(out.getvalue().splitlines()[-1])
    assert (last["action"], last["detector"]) == (
        ("continue", None) if forgotten else ("stop", "repeat")
    )
