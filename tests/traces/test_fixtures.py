"""The trace readers on small hand-written fixtures: JSONL, Claude Code, detection, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from antiloop.core.errors import AntiloopError
from antiloop.traces import (
    FORMATS,
    Run,
    StepCost,
    UnknownFormat,
    detect_format,
    iter_paths,
    read_runs,
)
from antiloop.traces.mini_swe_agent import parse_observation
from antiloop.traces.swe_agent import parse_action, refusal

DATA = Path(__file__).resolve().parent / "data"
STEPS = DATA / "steps.jsonl"
SESSION_ID = "5f0c2a1e-7d3b-4c55-9e21-0a1b2c3d4e5f"
PROJECT = DATA / "claude" / "-home-dev-shop"
MAIN = PROJECT / f"{SESSION_ID}.jsonl"
SUBAGENT = PROJECT / SESSION_ID / "subagents" / "agent-a7c41e9.jsonl"


def only_run(path: Path, fmt: str = "auto") -> Run:
    runs = list(read_runs(path, fmt))
    assert len(runs) == 1
    return runs[0]


# --- generic JSONL ---------------------------------------------------------------------------


def test_jsonl_reads_steps_and_reports_bad_lines() -> None:
    """Blank lines are skipped, bad lines are reported by number, the rest are steps."""
    run = only_run(STEPS)
    assert run.format == "jsonl"
    assert [s.tool for s in run.steps] == ["Grep", "Read", "Bash"]
    assert run.problems == (
        "line 4: not valid JSON (Expecting value: line 1 column 1 (char 0))",
        "line 5: 'tool' is missing",
    )
    assert run.steps[0].goal == "fix the double jump"
    assert run.steps[0].message == "Looking for the jump code"
    assert run.steps[2].exit_code == 1
    assert run.steps[2].extra == {"extra_field": 7}
    assert run.costs == ()
    assert run.record is None


def test_jsonl_single_pretty_printed_event(tmp_path: Path) -> None:
    """One event written over several lines is read as one step."""
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"tool": "Read", "args": {"file_path": "a"}}, indent=2))
    assert detect_format(path) == "jsonl"
    assert [s.tool for s in only_run(path).steps] == ["Read"]


def test_jsonl_detected_after_bad_first_lines(tmp_path: Path) -> None:
    """Detection looks past lines that are no JSON to the first step event."""
    path = tmp_path / "log.txt"
    path.write_text('garbage\n{"tool": "Bash", "args": {"command": "ls"}}\n')
    assert detect_format(path) == "jsonl"
    run = only_run(path)
    assert len(run.steps) == 1
    assert run.problems[0].startswith("line 1: not valid JSON")


# --- Claude Code -----------------------------------------------------------------------------


def test_claude_code_main_transcript_steps() -> None:
    """Each tool_use is a step with the tool name and input as sent."""
    run = only_run(MAIN)
    assert run.format == "claude-code"
    assert [s.tool for s in run.steps] == [
        "Grep",
        "Read",
        "Edit",
        "Edit",
        "Bash",
        "Bash",
        "Task",
        "Bash",
    ]
    grep = run.steps[0]
    assert grep.args == {
        "pattern": "def total",
        "path": "src",
        "output_mode": "content",
        "-n": True,
    }
    assert grep.output == "src/cart.py:14:def total(items, discount):"
    assert grep.session == SESSION_ID
    assert grep.agent == "main"
    assert grep.cwd == "/home/dev/shop"
    assert grep.goal == (
        "The cart total is off by one cent for discounted items. "
        "Find the rounding bug in src/cart.py and fix it; run the tests."
    )
    read = run.steps[1]
    assert read.args == {"file_path": "/home/dev/shop/src/cart.py"}
    assert read.output is not None
    assert read.output.startswith("    14→def total(items, discount):")
    assert not read.failed


def test_claude_code_tool_error_is_error() -> None:
    """A tool_result with is_error gives error text without the tool_use_error tags."""
    failed_edit, edit = only_run(MAIN).steps[2:4]
    assert failed_edit.tool == "Edit"
    assert failed_edit.output is None
    assert failed_edit.error is not None
    assert failed_edit.error.startswith("String to replace not found in file.")
    assert "tool_use_error" not in failed_edit.error
    assert failed_edit.failed
    assert not edit.failed
    assert edit.output is not None
    assert edit.output.startswith("The file /home/dev/shop/src/cart.py has been updated.")


def test_claude_code_bash_exit_codes() -> None:
    """A Bash error 'Exit code N' gives exit_code N; a Bash success gives exit code 0."""
    steps = only_run(MAIN).steps
    tests, lint, rerun = steps[4], steps[5], steps[7]
    assert tests.args["command"] == "python -m pytest tests/test_cart.py -q"
    assert tests.exit_code == 1
    assert tests.error is None
    assert tests.output is not None
    assert tests.output.startswith("F.\n")
    assert "1 failed, 1 passed" in tests.output
    assert (lint.exit_code, lint.output) == (0, "All checks passed!")
    assert (rerun.exit_code, rerun.output) == (0, "..\n2 passed in 0.04s")


def test_claude_code_message_goes_to_the_first_call_of_a_message() -> None:
    """The assistant text before a call is its message; parallel calls do not repeat it."""
    steps = only_run(MAIN).steps
    assert steps[0].message == "I'll look for where the total is computed."
    assert steps[1].message is None
    assert steps[2].message == (
        "The rounding happens after the discount; I'll round each line instead."
    )
    assert steps[4].message == "Now run the tests and the linter."
    assert steps[5].message is None


def test_claude_code_costs_take_the_final_usage_once_per_message() -> None:
    """Usage counts once per model message, from its last entry, cached input included."""
    run = only_run(MAIN)
    assert run.costs[0] == StepCost(input_tokens=1110, output_tokens=60, cost_usd=None)
    assert run.costs[4] == StepCost(input_tokens=1110, output_tokens=120, cost_usd=None)
    assert run.costs[5] == StepCost()
    assert run.total_cost_usd is None
    assert run.meta["model"] == "claude-sonnet-4-5-20250929"
    assert run.meta["version"] == "2.1.39"


def test_claude_code_repeated_tool_use_counts_once() -> None:
    """An entry written twice (same tool_use id) is one step."""
    lines = MAIN.read_text(encoding="utf-8").splitlines()
    ids = [
        b["id"]
        for line in lines
        for b in json.loads(line).get("message", {}).get("content", [])
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    assert len(ids) == 9
    assert len(set(ids)) == 8
    assert len(only_run(MAIN).steps) == 8


def test_claude_code_subagent_transcript() -> None:
    """A subagent's steps are a stream of their own, named by agent type and id."""
    run = only_run(SUBAGENT)
    assert [s.tool for s in run.steps] == ["Grep", "Grep", "Read"]
    assert {s.agent for s in run.steps} == {"Explore-a7c41e9"}
    assert {s.session for s in run.steps} == {SESSION_ID}
    assert run.steps[0].args == {
        "pattern": "discount",
        "path": "tests",
        "output_mode": "files_with_matches",
    }
    assert run.steps[0].output == run.steps[1].output == "Found 1 file\ntests/test_cart.py"
    assert run.steps[0].goal == (
        "Find every test that checks discounted totals and report the expected values."
    )
    assert run.meta["agent_type"] == "Explore"
    assert run.meta["agent_ids"] == ["a7c41e9"]


def test_claude_code_subagent_without_meta_file(tmp_path: Path) -> None:
    """Without the meta file a subagent is named agent-<id>."""
    path = tmp_path / "agent-a7c41e9.jsonl"
    path.write_text(SUBAGENT.read_text(encoding="utf-8"), encoding="utf-8")
    assert {s.agent for s in only_run(path).steps} == {"agent-a7c41e9"}


def test_claude_code_call_without_result(tmp_path: Path) -> None:
    """A call whose result was never written is a step with no result."""
    path = tmp_path / "s.jsonl"
    entry = {
        "type": "assistant",
        "sessionId": "s",
        "message": {
            "id": "m",
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "ls"}}
            ],
        },
    }
    path.write_text(json.dumps(entry) + "\nnot json\n")
    run = only_run(path)
    assert (run.steps[0].output, run.steps[0].exit_code, run.steps[0].error) == (None, None, None)
    assert run.problems[0].startswith("line 2: not valid JSON")


# --- detection and errors --------------------------------------------------------------------


def test_fixture_formats_are_detected() -> None:
    """The fixtures' formats are detected from their content."""
    assert detect_format(STEPS) == "jsonl"
    assert detect_format(MAIN) == "claude-code"
    assert detect_format(SUBAGENT) == "claude-code"


def test_non_trace_file_is_unknown_format(tmp_path: Path) -> None:
    """A file no reader fits raises UnknownFormat naming the file and what it is."""
    path = tmp_path / "notes.md"
    path.write_text("# Notes\n\nNothing to see.\n")
    assert detect_format(path) is None
    with pytest.raises(UnknownFormat, match=r"notes\.md: no known trace format fits") as caught:
        read_runs(path)
    assert "neither JSON nor JSON lines" in str(caught.value)
    assert isinstance(caught.value, AntiloopError)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("", "the file is empty"),
        ('{"name": "x", "version": 1}', "a JSON object with keys: name, version"),
        ("[1, 2, 3]", "a JSON array of 3 items"),
        ("42", "a bare JSON int"),
    ],
)
def test_unknown_format_says_what_the_file_is(tmp_path: Path, content: str, says: str) -> None:
    """The UnknownFormat message says what the file holds instead of a trace."""
    path = tmp_path / "thing.json"
    path.write_text(content)
    with pytest.raises(UnknownFormat, match="no known trace format fits") as caught:
        read_runs(path)
    assert says in str(caught.value)


def test_binary_file_is_unknown_format(tmp_path: Path) -> None:
    """A file that is not UTF-8 text is no trace."""
    path = tmp_path / "blob.bin"
    path.write_bytes(b"\xff\xfe\x00\x81garbage")
    assert detect_format(path) is None
    with pytest.raises(UnknownFormat, match="not UTF-8 text"):
        read_runs(path)


def test_unknown_format_name_is_refused() -> None:
    """Asking for a format that does not exist names the known ones."""
    with pytest.raises(UnknownFormat, match="unknown trace format 'langsmith'; known: auto, jsonl"):
        read_runs(STEPS, "langsmith")


@pytest.mark.parametrize("fmt", ["swe-agent", "mini-swe-agent-1", "mini-swe-agent-2", "openhands"])
def test_explicit_format_that_does_not_fit(fmt: str) -> None:
    """Reading a JSONL step file as another format raises UnknownFormat."""
    with pytest.raises(UnknownFormat, match=r"steps\.jsonl: not a"):
        list(read_runs(STEPS, fmt))


def test_explicit_claude_format_on_step_events() -> None:
    """Reading step events as a Claude Code transcript raises UnknownFormat."""
    with pytest.raises(UnknownFormat, match="not a Claude Code transcript"):
        list(read_runs(STEPS, "claude-code"))


def test_formats_are_the_documented_names() -> None:
    """FORMATS lists the seven format names of the API."""
    assert FORMATS == (
        "jsonl",
        "swe-agent",
        "mini-swe-agent-1",
        "mini-swe-agent-2",
        "openhands",
        "openhands-sdk",
        "claude-code",
    )


def test_openhands_jsonl_bad_line_is_an_empty_run(tmp_path: Path) -> None:
    """A broken line of an OpenHands JSONL file is reported as an empty run, others still read."""
    good = {"instance_id": "i", "history": [{"id": 1, "source": "agent", "action": "run"}]}
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(good) + "\n{broken\n")
    runs = list(read_runs(path))
    assert [(r.record, len(r.steps)) for r in runs] == [(0, 1), (1, 0)]
    assert runs[1].problems[0].startswith("line 2: not valid JSON")
    assert runs[0].steps[0].tool == "run"


# --- iter_paths ------------------------------------------------------------------------------


def test_iter_paths_expands_directories_sorted(tmp_path: Path) -> None:
    """Directories expand recursively into their files, sorted; files pass through."""
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "z.jsonl").write_text("")
    (tmp_path / "a.json").write_text("")
    (tmp_path / "b" / "c").mkdir()
    (tmp_path / "b" / "c" / "y.json").write_text("")
    found = list(iter_paths([STEPS, tmp_path]))
    assert found == [
        STEPS,
        tmp_path / "a.json",
        tmp_path / "b" / "c" / "y.json",
        tmp_path / "b" / "z.jsonl",
    ]


def test_iter_paths_missing_path_raises(tmp_path: Path) -> None:
    """A path that does not exist is an error, not silently skipped."""
    with pytest.raises(FileNotFoundError, match="no such file or directory"):
        list(iter_paths([tmp_path / "missing"]))


# --- parsing helpers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("<returncode>0</returncode>\n<output>\nok\n</output>", ("ok", None, 0)),
        ("<returncode>2</returncode>\n<output>\n</output>", ("", None, 2)),
        ("diff --git a/x b/x\n", ("diff --git a/x b/x\n", None, None)),
        (
            "<returncode>0</returncode>\n<warning>\nlong\n</warning><output_head>\nHEAD\n"
            "</output_head>\n<elided_chars>\n12 characters elided\n</elided_chars>\n"
            "<output_tail>\nTAIL\n</output_tail>",
            ("HEAD\n[12 characters elided]\nTAIL", None, 0),
        ),
        (
            "<exception>boom</exception>\n<returncode>-1</returncode>\n<output>\npart\n</output>",
            ("part", "boom", -1),
        ),
        (
            "The last command <command>sleep 99</command> timed out and has been killed.\n"
            "The output of the command was:\n <output>\nzz\n</output>\nPlease try another command.",
            (
                "zz",
                "The last command <command>sleep 99</command> timed out and has been killed.",
                None,
            ),
        ),
        (None, (None, None, None)),
    ],
)
def test_mini_swe_agent_observation(
    body: str | None, expected: tuple[str | None, str | None, int | None]
) -> None:
    """A mini-swe-agent result text splits into output, error and exit code."""
    assert parse_observation(body) == expected


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("ls -la\n", ("bash", {"command": "ls -la"})),
        ("python reproduce.py", ("bash", {"command": "python reproduce.py"})),
        ("open src/a.py 120", ("open", {"path": "src/a.py", "line_number": 120})),
        ("goto 40", ("goto", {"line_number": 40})),
        ("scroll_down", ("scroll_down", {})),
        ('search_dir "def foo" src', ("search_dir", {"search_term": "def foo", "dir": "src"})),
        ("search_file needle", ("search_file", {"search_term": "needle"})),
        ("find_file setup.py", ("find_file", {"file_name": "setup.py"})),
        ("create x.py", ("create", {"filename": "x.py"})),
        (
            "edit 3:5\n    return 1\nend_of_edit",
            ("edit", {"start_line": 3, "end_line": 5, "replacement_text": "    return 1"}),
        ),
        ("submit", ("submit", {})),
        ("connect_sendline hello there", ("connect_sendline", {"arguments": ["hello", "there"]})),
        ("", ("bash", {"command": ""})),
    ],
)
def test_swe_agent_action_parsing(action: str, expected: tuple[str, dict[str, object]]) -> None:
    """A SWE-agent action maps to its command tool with named args, or to a bash command."""
    assert parse_action(action) == expected


@pytest.mark.parametrize(
    ("observation", "expected"),
    [
        (
            "Your proposed edit has introduced new syntax error(s). Please read this.\n\n"
            "ERRORS:\n- E999 IndentationError: unexpected indent\n- F821 undefined name 'x'\n",
            "edit not applied: E999 IndentationError: unexpected indent; F821 undefined name 'x'",
        ),
        ("Wrong flag!", "Wrong flag!"),
        ("Usage: open <file> [<line_number>]", "Usage: open <file> [<line_number>]"),
        ("File x.py not found", "File x.py not found"),
        ("Traceback (most recent call last):\n  ...", None),
        ("", None),
        (None, None),
    ],
)
def test_swe_agent_refusals(observation: str | None, expected: str | None) -> None:
    """Only the SWE-agent tools' own refusals read as errors."""
    assert refusal(observation) == expected
