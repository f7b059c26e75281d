"""The protocol v1.1 (docs/protocol.md), beyond the conformance cases: allowed chains (5),
timeouts (4), fingerprints that hold across processes, machines and hours (6), and step ids (2).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from antiloop import Guard, Step
from antiloop.config import GuardConfig
from antiloop.core.step import step_from_dict
from antiloop.core.verdict import Action

CAT = {"tool": "Bash", "args": {"command": "cat out.txt"}, "output": "ready\n", "exit_code": 0}


def bash(command: str, output: str = "", **more: Any) -> dict[str, Any]:
    return {"tool": "Bash", "args": {"command": command}, "output": output, **more}


def verdicts(events: list[dict[str, Any]], **config: Any) -> list[Any]:
    guard = Guard(config=GuardConfig.from_mapping(config)) if config else Guard()
    return [guard.record(e) for e in events]


# -- 5: a shell command is exempt only when the rest of it only reads ---------------------------


@pytest.mark.parametrize(
    "command",
    [
        "sleep 5",
        "sleep 5 && tail -n 5 build.log",
        "sleep 2; cat out.txt | grep -c ready",
        "sleep 1 && ls logs/ && head -3 logs/a.log",
        "cd /w && sleep 3 && head -1 out.txt | grep -c 3",  # cd is no part; head, grep read
        "sleep 1; wait",  # two allowed programs
        "timeout 30 sleep 5",  # a wrapper is looked through
    ],
)
def test_an_allowed_chain_that_only_reads_is_invisible(command: str) -> None:
    """The allowed step neither counts nor breaks the run: the reads around it are a repeat."""
    got = verdicts([CAT, bash(command), CAT], allow_repeat_tools=["sleep", "wait"])
    assert [v.action for v in got] == [Action.CONTINUE, Action.CONTINUE, Action.STOP]
    assert got[2].detector == "repeat"


@pytest.mark.parametrize(
    "command",
    [
        "python serve.py > out.txt & sleep 5; kill %1",  # p35: runs and writes
        "sleep 5 && rm -f out.txt",
        "sleep 5 && echo done",  # echo is no read
        "sleep 5 && tail -n 5 build.log > copy.log",  # a redirection writes
        "sleep 5; pytest -q",
        "sleep 5 && sed -i s/a/b/ out.txt",
    ],
)
def test_an_allowed_chain_that_does_more_counts(command: str) -> None:
    """A step that also runs or writes something counts and breaks the run of reads."""
    got = verdicts([CAT, bash(command), CAT], allow_repeat_tools=["sleep", "wait"])
    assert all(v.action is Action.CONTINUE for v in got)


def test_an_allowed_tool_or_operation_stays_exempt() -> None:
    """The tool name and the operation still match (a polling tool, a whole operation)."""
    poll = {"tool": "poll_status", "args": {"job": 1}, "output": "running"}
    got = verdicts([poll, poll, poll], allow_repeat_tools=["poll_status"])
    assert all(v.action is Action.CONTINUE for v in got)
    got = verdicts([CAT, CAT], allow_repeat_tools=["read"])
    assert all(v.action is Action.CONTINUE for v in got)


def test_a_chain_of_reads_only_without_an_allowed_program_counts() -> None:
    """Reading alone is no exemption: ``tail x && cat y`` twice is a repeat."""
    step = bash("tail -n 5 build.log && cat out.txt", "ok\n", exit_code=0)
    got = verdicts([step, step], allow_repeat_tools=["sleep"])
    assert got[1].detector == "repeat"


# -- 4: a line that says the command timed out is an error line ----------------------------------

TIMEOUTS = [
    ("Command timed out after 120000ms", "Command timed out after 95000ms"),  # Claude Code Bash
    (
        "subprocess.TimeoutExpired: Command '['make']' timed out after 30 seconds",
        "subprocess.TimeoutExpired: Command '['make']' timed out after 31 seconds",
    ),
    (
        "EXECUTION TIMED OUT BECAUSE NO OUTPUT WAS PRODUCED FOR MORE THAN 25.0 SECONDS.",
        "EXECUTION TIMED OUT BECAUSE NO OUTPUT WAS PRODUCED FOR MORE THAN 26.5 SECONDS.",
    ),  # SWE-agent
    (
        "The last command <command>pytest -x</command> timed out and has been killed.",
        "The last command <command>pytest -x</command> timed out and has been killed.",
    ),  # mini-swe-agent
    (
        "[The command timed out after 120 seconds. You may wait longer to see more output.]",
        "[The command timed out after 180 seconds. You may wait longer to see more output.]",
    ),  # OpenHands
    ("+++++++++++ Timeout +++++++++++", "+++++++++++ Timeout +++++++++++"),  # pytest-timeout
    ("panic: test timed out after 10m0s", "panic: test timed out after 5m0s"),  # go test
    (
        'thrown: "Exceeded timeout of 5000 ms for a test."',
        'thrown: "Exceeded timeout of 6000 ms for a test."',
    ),  # jest
]


@pytest.mark.parametrize(("first", "second"), TIMEOUTS)
def test_the_same_timeout_twice_is_a_repeat(first: str, second: str) -> None:
    """Output around the timeout line differs (progress printed, durations): still a repeat."""
    a = bash("make check", f"building 1\n{first}\n", exit_code=124)
    b = bash("make check", f"building 2 of 9\n{second}\n", exit_code=124)
    got = verdicts([a, b])
    assert (got[1].action, got[1].detector) == (Action.STOP, "repeat"), got[1].reason
    assert "building" not in got[1].reason  # the result is named by the timeout line


@pytest.mark.parametrize(
    "text",
    [
        "plugins: timeout-2.3.1, xdist-3.6.1\ncollected 3 items",  # a plugin name
        "requests.get(url, timeout=None)",  # a setting
        "Timeout: Commands have a soft timeout of 120 seconds",  # wait: see below
        "--timeout 30 given",
    ],
)
def test_a_timeout_setting_is_no_timeout(text: str) -> None:
    """Words about timeouts that are not a timeout give no error line (only the last one does:
    a line that starts ``Timeout:`` reads as one, as ``Error:`` does)."""
    from antiloop.core.result import read_result

    line = read_result("bash", True, text, None, 0, {}).error_line
    if text.startswith("Timeout:"):
        assert line is not None
    else:
        assert line is None, line


def test_another_timeout_is_another_result() -> None:
    """A timeout and then another error line: the state moved."""
    a = bash("make check", "Command timed out after 2s\n", exit_code=124)
    b = bash("make check", "make: *** [check] Error 2\n", exit_code=124)
    assert verdicts([a, b])[1].action is Action.CONTINUE


# -- 6: one loop, one fingerprint, in any process, on any machine, at any hour ------------------


def _no_op_edit(session: str, root: str, mtime: float) -> dict[str, Any]:
    return {
        "session": session,
        "agent": "Code-Writer",
        "tool": "Edit",
        "cwd": root,
        "args": {"file_path": f"{root}/game/config.py", "old_string": "A", "new_string": "B"},
        "output": "The file has been updated.",
        "file_states": {f"{root}/game/config.py": {"sha256": "ab" * 32, "mtime": mtime}},
    }


def _streak(session: str, error: str, pid: int) -> list[dict[str, Any]]:
    return [
        {
            "session": session,
            "tool": "Bash",
            "args": {"command": f"python job.py --try {i}"},
            "error": f"{error} (pid {pid + i}) at 0x7f3a9c2e1b{i}0 after 0.{i}2s",
            "exit_code": 1,
        }
        for i in range(3)
    ]


def _check_in_process(events: list[dict[str, Any]], env: dict[str, str]) -> list[dict[str, Any]]:
    stream = "".join(json.dumps(e) + "\n" for e in events)
    proc = subprocess.run(
        [sys.executable, "-m", "antiloop", "check", "-"],
        input=stream,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=False,
    )
    assert proc.returncode in (0, 3), proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_fingerprints_hold_across_processes_machines_and_hours(tmp_path: Path) -> None:
    """Two processes (other hash seeds, time zones, roots, clocks, pids): the same fingerprints."""
    one = [
        _no_op_edit("a", "/home/ann/proj", 1764000000.0),
        _no_op_edit("a", "/home/ann/proj", 1764000000.0),
        *_streak("b", "ModuleNotFoundError: No module named 'numpy'", 4000),
    ]
    two = [
        _no_op_edit("x", "/srv/ci/build-77", 1764555555.5),
        _no_op_edit("x", "/srv/ci/build-77", 1764555555.5),
        *_streak("y", "ModuleNotFoundError: No module named 'numpy'", 91000),
    ]
    first = _check_in_process(one, {"PYTHONHASHSEED": "1", "TZ": "UTC"})
    second = _check_in_process(two, {"PYTHONHASHSEED": "4242", "TZ": "Asia/Tokyo"})
    edits = (first[1]["fingerprint"], second[1]["fingerprint"])
    streaks = (first[4]["fingerprint"], second[4]["fingerprint"])
    assert edits[0] == edits[1]
    assert edits[0].startswith("AGENT::code-writer::edit::game/config.py::no change#")
    assert streaks[0] == streaks[1]
    assert streaks[0].startswith("AGENT::agent::fail-streak::bash::3 failures#")


def test_failure_streaks_of_other_errors_differ_and_of_one_error_agree() -> None:
    """The streak digest covers the scrubbed error lines: other errors, other fingerprints."""
    guard = Guard()
    numpy = [guard.record(e) for e in _streak("a", "ModuleNotFoundError: numpy", 1)]
    again = [guard.record(e) for e in _streak("b", "ModuleNotFoundError: numpy", 500)]
    other = [guard.record(e) for e in _streak("c", "PermissionError: /data", 1)]
    assert numpy[2].detector == again[2].detector == other[2].detector == "fail-streak"
    assert numpy[2].fingerprint == again[2].fingerprint
    assert numpy[2].fingerprint != other[2].fingerprint


def test_a_no_op_edit_without_hashes_is_named_by_its_paths() -> None:
    """Only mtimes known: the digest covers the paths, so two hours give one fingerprint."""

    def edit(session: str, mtime: float) -> dict[str, Any]:
        step = _no_op_edit(session, "/w", mtime)
        step["file_states"] = {"/w/game/config.py": {"mtime": mtime}}
        return step

    guard = Guard()
    a = [guard.record(edit("a", 100.0)) for _ in range(2)]
    b = [guard.record(edit("b", 7300.0)) for _ in range(2)]
    assert a[1].fingerprint == b[1].fingerprint
    assert "no change#" in (a[1].fingerprint or "")


# -- 2: step ids, tokens and cost --------------------------------------------------------------


def test_a_retried_step_repeats_its_first_verdict_in_check() -> None:
    """``check``: a retry's line repeats the first verdict and counts nothing (p39 and more)."""
    grep = {"tool": "Grep", "args": {"pattern": "x"}, "output": "a.py:1:x\n"}
    out = _check_in_process(
        [
            {**grep, "id": 7},
            {**grep, "id": 7},  # a retry: continue again, not a repeat
            {**grep, "id": "7b"},  # the repeat
            {**grep, "id": "7b"},  # the stop's retry: the same stop, not 'terminated'
            {**grep, "id": "8"},  # after the stop: terminated
        ],
        {},
    )
    assert [(v["action"], v["detector"]) for v in out] == [
        ("continue", None),
        ("continue", None),
        ("stop", "repeat"),
        ("stop", "repeat"),
        ("stop", "terminated"),
    ]
    assert out[2]["fingerprint"] == out[3]["fingerprint"]


def test_a_retry_does_not_count_toward_the_budget() -> None:
    """Max steps counts steps, not deliveries."""
    guard = Guard(config=GuardConfig.from_mapping({"max_steps": 3}))
    for i in range(3):
        step = {"tool": "Read", "args": {"path": f"f{i}"}, "output": str(i), "id": f"c{i}"}
        guard.record(step)
        last = guard.record(step)  # each delivered twice
    assert (last.action, last.detector) == (Action.STOP, "max-steps")
    assert guard.store.peek("default").steps == 3


def test_the_ids_kept_are_bounded() -> None:
    """A session remembers its last 32 step ids, not every one."""
    guard = Guard()
    for i in range(100):
        guard.record({"tool": "Read", "args": {"path": f"f{i}"}, "output": str(i), "id": i})
    seen = guard.store.peek("default").seen
    assert len(seen) == 32
    assert "99" in seen
    assert "0" not in seen


def test_ids_usage_and_cost_are_read_and_kept() -> None:
    """id (string or integer), tokens and cost are known fields; nonsense values read as none."""
    step = step_from_dict(
        {"tool": "x", "id": 12, "tokens_in": 1200, "tokens_out": 80.0, "cost_usd": 0.0042}
    )
    assert (step.id, step.tokens_in, step.tokens_out, step.cost_usd) == ("12", 1200, 80, 0.0042)
    assert step.extra == {}
    assert step.to_dict()["id"] == "12"
    odd = step_from_dict(
        {"tool": "x", "id": True, "tokens_in": -1, "tokens_out": "9", "cost_usd": float("nan")}
    )
    assert (odd.id, odd.tokens_in, odd.tokens_out, odd.cost_usd) == (None, None, None, None)
    assert Step(tool="x").id is None
