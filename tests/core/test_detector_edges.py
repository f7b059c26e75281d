"""The detectors at their edges: allowed tools, failure-streak fingerprints, the session's goal,
results that differ by exit code or file path, windows and cycle periods, composed and opt-in
detectors, stagnation's window. All go through the public API (Guard.record and check, a
custom detector, the config); expectations are written out.
"""

from __future__ import annotations

from typing import Any

from antiloop import Guard, GuardConfig
from antiloop.core.fingerprint import digest8, parse
from antiloop.core.history import History
from antiloop.core.verdict import Action, Verdict


def guard(**config: Any) -> Guard:
    return Guard(config=GuardConfig.from_mapping({"embedder": "ngram", **config}))


def read(path: str, output: str, **more: Any) -> dict[str, Any]:
    return {"tool": "Read", "args": {"file_path": path}, "output": output, **more}


def fails(tool: str, error: str | None, n: int = 0, **more: Any) -> dict[str, Any]:
    return {"tool": tool, "args": {"n": n}, "error": error, "exit_code": 1, **more}


# -- allowed tools (section 5) -------------------------------------------------------------------


def test_with_no_allowed_tools_every_step_counts() -> None:
    """allow_repeat_tools = []: even a sleep repeats."""
    g = guard(allow_repeat_tools=[])
    step = {"tool": "Bash", "args": {"command": "sleep 5"}, "output": ""}
    assert [g.record(step).detector for _ in range(2)] == [None, "repeat"]


def test_an_allowed_tool_is_matched_by_its_own_name() -> None:
    """A tool allowed by a name that is not its operation (``poll:status`` is operation
    ``poll-status``) still repeats freely."""
    g = guard(allow_repeat_tools=["Poll:Status"])
    step = {"tool": "Poll:Status", "args": {"job": 1}, "output": "running"}
    assert [g.record(step).action for _ in range(4)] == [Action.CONTINUE] * 4


# -- the failure streak's fingerprint (section 6) -------------------------------------------------


def _streak_fp(events: list[dict[str, Any]], **config: Any) -> str:
    g = guard(**config)
    got = [g.record(e) for e in events]
    assert [v.detector for v in got] == [None] * (len(got) - 1) + ["fail-streak"], got
    return got[-1].fingerprint or ""


def test_a_streak_of_errors_read_from_the_output_differs_by_those_errors() -> None:
    """The error line a failing command printed (no ``error`` field) is in the digest."""

    def run(word: str) -> list[dict[str, Any]]:
        return [
            {
                "tool": "Bash",
                "args": {"command": f"./build {i}"},
                "output": f"step {i}\nError: {word} missing\n",
                "exit_code": 2,
            }
            for i in range(3)
        ]

    one, two = _streak_fp(run("alpha")), _streak_fp(run("beta"))
    assert one.split("::")[:4] == ["AGENT", "agent", "fail-streak", "bash"]
    assert one != two
    assert _streak_fp(run("alpha")) == one


def test_a_streak_of_an_allowed_tool_is_digested_by_the_first_line_of_its_errors() -> None:
    """An allowed tool keeps no window, yet its failures streak; the digest covers the first
    line of each error (scrubbed), not what follows it."""

    def run(first: str, rest: str) -> list[dict[str, Any]]:
        return [
            fails("wait_for_job", f"{first} after 0.5s\n{rest} {i}\nmore {i}", i) for i in range(3)
        ]

    config = {"allow_repeat_tools": ["wait_for_job"]}
    base = _streak_fp(run("Job 7 failed", "detail"), **config)
    assert base.startswith("AGENT::agent::fail-streak::wait_for_job::3 failures#")
    assert _streak_fp(run("Job 7 failed", "other detail"), **config) == base
    assert _streak_fp(run("Job 8 failed", "detail"), **config) != base
    mixed = run("Job 7 failed", "detail")[:2] + run("Job 8 failed", "detail")[2:]
    assert _streak_fp(mixed, **config) != base


def test_a_streak_without_error_text_has_a_fingerprint_of_empty_lines() -> None:
    """Failing by exit code alone: each step's error line is empty."""
    events = [{"tool": "wait_for_job", "args": {"n": i}, "exit_code": 1} for i in range(3)]
    fp = _streak_fp(events, allow_repeat_tools=["wait_for_job"])
    empty = digest8("")
    assert (
        parse(fp).result
        == f"3 failures#{digest8(chr(10).join(['wait_for_job', empty, empty, empty]))}"
    )


def test_a_success_after_a_failure_is_no_streak_of_one() -> None:
    """failure_streak = 1: the failure asks, the success after it goes on."""
    g = guard(failure_streak=1)
    ok = {"tool": "Bash", "args": {"command": "make"}, "output": "done", "exit_code": 0}
    got = [
        g.record(fails("Bash", "Error: x")),
        g.record(ok),
        g.record(ok | {"args": {"command": "ls"}}),
    ]
    assert [v.detector for v in got] == ["fail-streak", None, None]


# -- the goal: the first one seen in a session sets it (section 2) --------------------------------

DARK = "Add a dark mode toggle to the settings page."
UPLOAD = "Make the image upload reject files larger than 5 MB."
DONE = "Done: the dark mode toggle is added to the settings page."


def _goal_run(goals: list[str | None]) -> list[str | None]:
    g = guard(min_steps=1)
    got = []
    for i, goal in enumerate(goals):
        got.append(g.record(read(f"f{i}.py", str(i), **({"goal": goal} if goal else {}))))
    got.append(g.record(read("z.py", "z", message=DONE)))
    return [v.detector for v in got]


def test_the_first_goal_of_a_session_is_its_goal() -> None:
    """A later step's other goal does not replace it; a step without one sets nothing."""
    assert _goal_run([DARK]) == [None, "goal"]
    assert _goal_run([UPLOAD, DARK]) == [None, None, None]
    assert _goal_run([None, DARK]) == [None, None, "goal"]


# -- same result: readings (section 4) -----------------------------------------------------------


def test_another_exit_code_is_another_result_though_the_output_is_the_same() -> None:
    """exit 1 then exit 0 with the same output: the state moved, no repeat."""
    step = {"tool": "Bash", "args": {"command": "./deploy.sh"}, "output": "deploying\n"}
    g = guard()
    got = [g.record({**step, "exit_code": 1}), g.record({**step, "exit_code": 0})]
    assert [v.action for v in got] == [Action.CONTINUE, Action.CONTINUE]
    same = guard()
    got = [same.record({**step, "exit_code": 1}), same.record({**step, "exit_code": 1})]
    assert got[1].detector == "repeat"


def _no_op_edit(path: str, output: str, cwd: str | None = "/w") -> dict[str, Any]:
    edit = {
        "tool": "Edit",
        "args": {"file_path": "a.py", "old_string": "1", "new_string": "2"},
        "output": output,
        "file_states": {path: {"sha256": "ab" * 32}},
    }
    return edit if cwd is None else {**edit, "cwd": cwd}


def test_file_states_under_cwd_are_one_file_however_they_are_written() -> None:
    """Outputs differ; the file's state did not change: a repeat whether the state is keyed
    by the absolute path under cwd or the relative one, with one fingerprint (section 6)."""
    g = guard()
    got = [g.record(_no_op_edit("/w/a.py", "edited 1")), g.record(_no_op_edit("a.py", "edited 2"))]
    assert [v.detector for v in got] == [None, "repeat"]
    assert parse(got[1].fingerprint or "").result.startswith("no change#")
    other = guard()
    other.record(_no_op_edit("./a.py", "x 1"))
    again = other.record(_no_op_edit("/w/a.py", "x 2"))
    assert again.fingerprint == got[1].fingerprint
    elsewhere = guard()
    elsewhere.record(_no_op_edit("/w/a.py", "y 1", cwd="/v"))
    moved = elsewhere.record(_no_op_edit("/w/a.py", "y 2", cwd="/v"))
    assert moved.detector == "repeat"
    assert moved.fingerprint != got[1].fingerprint  # /w/a.py is not a.py outside /w


# -- windows ------------------------------------------------------------------------------------


def test_a_cycle_of_period_17_is_found_when_the_maximum_allows_it() -> None:
    """Periods beyond the 16 the guard prepares for work the same (cycle_max_period 17)."""
    steps = [read(f"f{i}.py", f"text {i}") for _ in range(2) for i in range(17)]
    g = guard(cycle_max_period=17, max_steps=1000)
    got = [g.record(s) for s in steps]
    assert [i for i, v in enumerate(got) if v.action is not Action.CONTINUE] == [33]
    assert parse(got[33].fingerprint or "").result.startswith("period 17#")


def test_three_in_a_row_are_needed_for_a_repeat_threshold_of_three() -> None:
    """A, B, B: two in a row after another step is no run of three."""
    a, b = read("a.py", "A"), read("b.py", "B")
    g = guard(repeat_threshold=3)
    assert [g.record(s).action for s in (a, b, b)] == [Action.CONTINUE] * 3
    assert g.record(b).detector == "repeat"


def test_a_custom_detector_sees_the_lower_cased_tool_names_of_its_window() -> None:
    """History.stream.window holds each step's tool name, lower-cased (history.StepRecord)."""
    seen: list[list[str]] = []

    def spy(history: History) -> Verdict | None:
        seen.append([r.tool for r in history.stream.window])
        return None

    g = Guard(detector=spy)
    g.record(read("a.py", "A"))
    g.record({"tool": "GREP", "args": {"pattern": "x"}, "output": ""})
    assert seen == [["read"], ["read", "grep"]]


# -- check: the call's paths and cwd name the procedure -------------------------------------------


def test_check_refuses_a_stopped_call_named_by_its_paths_or_cwd() -> None:
    """A procedure blocked as a loop is refused again when check gets the same paths and
    the same cwd; other paths are another call."""
    g = guard(repeat_action="block")
    step = {"tool": "mcp_lint", "args": {}, "paths": ["src/a.py"], "output": "1 issue"}
    assert [g.record(step).action for _ in range(2)] == [Action.CONTINUE, Action.BLOCK]
    assert g.check("mcp_lint", {}, paths=["src/a.py"]).action is Action.BLOCK
    assert g.check("mcp_lint", {}, paths=["src/b.py"]).action is Action.CONTINUE
    g2 = guard(repeat_action="block")
    rd = {"tool": "Read", "args": {"file_path": "/w/src/a.py"}, "cwd": "/w", "output": "A"}
    assert [g2.record(rd).action for _ in range(2)] == [Action.CONTINUE, Action.BLOCK]
    assert g2.check("Read", {"file_path": "src/a.py"}, cwd="/w").action is Action.BLOCK
    assert g2.check("Read", {"file_path": "src/a.py"}).action is Action.BLOCK
    assert g2.check("Read", {"file_path": "/w/src/a.py"}, cwd="/w").action is Action.BLOCK


def test_a_nudged_repeat_followed_by_an_allowed_step_goes_on() -> None:
    """repeat_action = "nudge": the run stays at two; an allowed step after it is no repeat."""
    g = guard(repeat_action="nudge", allow_repeat_tools=["sleep"])
    a = read("a.py", "A")
    got = [g.record(a), g.record(a), g.record({"tool": "Bash", "args": {"command": "sleep 1"}})]
    assert [v.action for v in got] == [Action.CONTINUE, Action.NUDGE, Action.CONTINUE]


def test_opt_in_detectors_named_in_the_config_run() -> None:
    """detectors = [..., "hidden-repeat"]: the same step 3 times with no-op edits between."""
    g = guard(detectors=["repeat", "hidden-repeat"])
    run_ = {"tool": "Bash", "args": {"command": "pytest -q"}, "output": "1 failed", "exit_code": 1}
    edit = {
        "tool": "Edit",
        "args": {"file_path": "a.py", "old_string": "x", "new_string": "x"},
        "output": "ok",
        "file_states": {"a.py": {"sha256": "cd" * 32}},
    }
    got = [g.record(s) for s in (run_, edit, run_, {**edit, "output": "ok 2"}, run_)]
    assert [v.detector for v in got][-1] == "hidden-repeat", got


# -- composed detectors ----------------------------------------------------------------------


def test_composed_detectors_answer_none_when_none_fires_and_print_their_parts() -> None:
    """AnyOf of quiet detectors answers None; ``fn & detector`` is an AllOf of both."""
    from antiloop.core.detectors import AnyOf, Cycle, Repeat

    def quiet(history: History) -> Verdict | None:
        return None

    seen: list[Verdict | None] = []
    inner = AnyOf([quiet, quiet])

    def outer(history: History) -> Verdict | None:
        seen.append(inner(history))
        return seen[-1]

    Guard(detector=outer).record(read("a.py", "A"))
    assert seen == [None]
    both = Repeat(2) & Cycle(3)
    assert repr(both) == "(Repeat(threshold=2) & Cycle(max_period=3))"
    either = quiet & Repeat(2)
    assert repr(either).endswith(" & Repeat(threshold=2))")
    assert repr(either).startswith("(<function ")
    g = Guard(detector=either)
    assert [g.record(read("a.py", "A")).action for _ in range(2)] == [Action.CONTINUE] * 2


# -- cycle -------------------------------------------------------------------------------------


def test_a_cycle_after_other_steps_is_found_at_its_end() -> None:
    """X Y Z then A B A B: the cycle of period 2 stops at its last step (index 6)."""
    steps = [read(n, n.upper()) for n in ("x", "y", "z")] + [read("a", "A"), read("b", "B")] * 2
    g = guard()
    got = [g.record(s) for s in steps]
    assert [(i, v.detector) for i, v in enumerate(got) if v.detector] == [(6, "cycle")]


def test_a_long_window_finds_no_cycle_beyond_the_maximum_period() -> None:
    """repeat_threshold 6 keeps 6 steps, cycle_max_period 2: a cycle of period 3 is no stop."""
    steps = [read(f"f{i}.py", str(i)) for i in range(3)] * 2
    g = guard(cycle_max_period=2, repeat_threshold=6)
    assert [g.record(s).action for s in steps] == [Action.CONTINUE] * 6


# -- stagnation -----------------------------------------------------------------------------------


def _messages(*texts: str) -> list[Verdict]:
    g = guard(min_steps=1)
    return [g.record(read(f"f{i}.py", str(i), message=t)) for i, t in enumerate(texts)]


def test_three_blank_messages_after_a_message_stagnate_naming_those_three() -> None:
    got = _messages("Reading the config.", "", " ", "")
    assert [v.detector for v in got] == [None, None, None, "stagnation"]
    assert got[3].reason == "The agent is not moving: 3 blank messages in a row."
    assert got[3].evidence == (1, 2, 3)
    assert parse(got[3].fingerprint or "").result.startswith("3 blank messages#")


SAME = "I am still checking the build log for errors."


def test_stagnation_looks_at_the_last_window_of_messages_only() -> None:
    """Another message, then four the same: a stop at the fifth, its evidence the four."""
    got = _messages("Something else entirely about cats.", SAME, SAME, SAME, SAME)
    assert [v.detector for v in got] == [None, None, None, None, "stagnation"]
    assert got[4].reason == "The agent is not moving: 4 similar messages in a row."
    assert got[4].evidence == (1, 2, 3, 4)


def test_one_other_message_among_the_window_is_no_stagnation() -> None:
    """S, other, S, S: the window of three before the last holds the other one."""
    got = _messages(SAME, "Something else entirely about cats.", SAME, SAME)
    assert [v.action for v in got] == [Action.CONTINUE] * 4


# -- goal reasons -------------------------------------------------------------------------------


def test_a_goal_reason_names_the_completion_word_only_when_there_is_one() -> None:
    goal = "Add a dark mode toggle to the settings page."

    def reason(message: str) -> str:
        g = guard(min_steps=1)
        v = g.record(read("a.py", "A", goal=goal, message=message))
        assert v.detector == "goal"
        return v.reason

    said = reason("The dark mode toggle is added to the settings page.")
    assert said.startswith("The agent's message reaches the goal (similarity ")
    assert said.endswith(", 100% of the goal's key terms, says 'added').")
    plain = reason("Add a dark mode toggle to the settings page: it sits under Appearance.")
    assert plain.endswith(", 100% of the goal's key terms).")
    g = guard(min_steps=1)  # the goal's words alone, no report of work: not reached
    v = g.record(read("a.py", "A", goal=goal, message="Dark mode toggle settings page."))
    assert v.detector != "goal"
    assert reason(goal) == "The agent's message reaches the goal (it is the goal itself)."


# -- events (section 2) -----------------------------------------------------------------------


def test_event_fields_of_the_wrong_kind_are_left_out() -> None:
    """An exit code that is no number and a goal that is no string are no exit code or goal;
    a line given as bytes reads as the same step."""
    from antiloop.core.step import parse_line, step_from_dict

    odd = step_from_dict({"tool": "t", "exit_code": "X5", "goal": 5})
    assert (odd.exit_code, odd.goal) == (None, None)
    assert step_from_dict({"tool": "t", "exit_code": " -3 "}).exit_code == -3
    raw = b'{"tool": "Read", "args": {"file_path": "a.py", "n": [1]}}'
    assert parse_line(raw) == parse_line(raw.decode())


def test_a_streak_longer_than_16_names_every_failing_step() -> None:
    """failure_streak = 20: the evidence is the 20 failing steps."""
    g = guard(failure_streak=20)
    got = [g.record(fails("Bash", f"E{i}", i)) for i in range(20)]
    assert got[-1].detector == "fail-streak"
    assert got[-1].evidence == tuple(range(20))


def test_a_cycle_detector_looks_no_further_than_its_own_maximum() -> None:
    """Guard(detector=Cycle(2)) under a config that keeps 4 steps back: A B A A B A (period 3,
    its last step a copy of the one 2 back too) is no stop."""
    from antiloop.core.detectors import Cycle

    a, b = read("a.py", "A"), read("b.py", "B")
    steps = [a, b, a] * 2
    g = Guard(detector=Cycle(2))
    assert [g.record(s).action for s in steps] == [Action.CONTINUE] * 6


def test_a_stagnation_detector_compares_its_own_window_of_messages() -> None:
    """Stagnation(window=2) under a config that keeps 4 messages: other, S, S, S stops at the
    fourth (the two before it are the same), not later."""
    from antiloop.core.detectors import Stagnation
    from antiloop.embed import get_embedder

    g = Guard(detector=Stagnation(get_embedder("ngram"), window=2, min_steps=1))
    texts = ["Something else entirely about cats.", SAME, SAME, SAME]
    got = [g.record(read(f"f{i}.py", str(i), message=t)) for i, t in enumerate(texts)]
    assert [v.detector for v in got] == [None, None, None, "stagnation"]
    assert got[3].evidence == (1, 2, 3)  # its window of 2 and the message itself


def test_a_full_window_drops_its_oldest_step() -> None:
    """A grep, then a read cycle of period 4: the cycle's fingerprint names its own four
    operations, not the grep that fell out of the 8-step window."""
    grep = {"tool": "Grep", "args": {"pattern": "x"}, "output": "a.py:1:x"}
    steps = [grep] + [read(f"f{i}.py", str(i)) for i in range(4)] * 2
    g = guard()
    got = [g.record(s) for s in steps]
    assert got[-1].detector == "cycle"
    assert parse(got[-1].fingerprint or "").context == "read>read>read>read"
