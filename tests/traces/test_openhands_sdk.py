"""The OpenHands agent-SDK reader on runs recorded with the real SDK (tests/data/openhands-sdk).

``runs/`` was written by ``tests/data/openhands-sdk/record.py``: the SDK's own agent loop, its
terminal and file-editor tools, and a scripted model served on 127.0.0.1. Step counts here are
counted from the raw files (the SDK's ``ActionEvent`` records whose ``action`` is set, checked
against the ``ObservationEvent`` records answering them), not by the reader.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from antiloop.scan import Scanner
from antiloop.traces import UnknownFormat, detect_format, iter_paths, read_runs

DATA = Path(__file__).resolve().parents[1] / "data" / "openhands-sdk"
RUNS = DATA / "runs"
RECORDER = DATA / "record.py"

LOOP_TOOLS = [
    "terminal",
    "file_editor",
    "terminal",
    "terminal",
    "terminal",
    "file_editor",
    "terminal",
    "finish",
]
CLEAN_TOOLS = ["terminal", "file_editor", "terminal", "file_editor", "finish"]


def raw_events(path: Path) -> list[dict[str, Any]]:
    """The events of one recorded shape, decoded without the reader."""
    if path.is_dir():
        files = sorted((path / "events").glob("event-*.json"))
        return [json.loads(f.read_text(encoding="utf-8")) for f in files]
    if path.name.endswith(".events.jsonl"):
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    value: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return value


def executed_calls(events: list[dict[str, Any]]) -> int:
    """ActionEvents with an action, checked against the observations that answer them."""
    actions = [e for e in events if e["kind"] == "ActionEvent" and e.get("action") is not None]
    answered = {e["action_id"] for e in events if e["kind"] == "ObservationEvent"}
    assert {a["id"] for a in actions} == answered
    return len(actions)


def only_run(path: Path) -> Any:
    (run,) = list(read_runs(path))
    return run


SHAPES = [
    "loop",
    "clean",
    "loop.events.json",
    "clean.events.json",
    "loop.events.jsonl",
    "clean.events.jsonl",
]


@pytest.mark.parametrize("name", SHAPES)
def test_every_shape_reads_its_executed_tool_calls(name: str) -> None:
    """Conversation folder, event list and event JSONL: one step per executed tool call."""
    path = RUNS / name
    assert detect_format(path) == "openhands-sdk"
    run = only_run(path)
    assert run.format == "openhands-sdk"
    assert len(run.steps) == executed_calls(raw_events(path))
    expected = LOOP_TOOLS if name.startswith("loop") else CLEAN_TOOLS
    assert [s.tool for s in run.steps] == expected
    assert not run.problems


def test_eval_output_reads_one_run_per_record() -> None:
    """The benchmarks' eval JSONL: one run per line, counted from each record's history."""
    path = RUNS / "eval_output.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    runs = list(read_runs(path))
    assert detect_format(path) == "openhands-sdk"
    assert [r.record for r in runs] == [0, 1]
    assert [len(r.steps) for r in runs] == [executed_calls(r["history"]) for r in records]
    assert [r.meta["instance_id"] for r in runs] == ["scripted__loop", "scripted__clean"]
    assert runs[0].steps[0].session == "scripted__loop"
    assert runs[0].steps[0].goal == records[0]["instruction"]
    assert runs[0].meta["model"] == "openai/scripted-model"
    assert runs[0].total_cost_usd == pytest.approx(records[0]["metrics"]["accumulated_cost"])


def test_step_fields_of_the_loop_run() -> None:
    """Arguments as the model sent them, output, exit code, cwd, thought, finish message."""
    run = only_run(RUNS / "loop")
    first, view, test = run.steps[0], run.steps[1], run.steps[2]
    assert dict(first.args) == {"command": "ls"}
    assert (first.output, first.exit_code, first.cwd) == ("calc.py  test_calc.py", 0, "/workspace")
    assert first.message == "Let me look at the workspace and the code first."
    assert first.agent == "openhands"
    assert dict(view.args) == {"command": "view", "path": "/workspace/calc.py"}
    assert view.message is None  # the second call of a response carries no thought
    assert view.output is not None
    assert "return a - b" in view.output
    assert view.exit_code is None
    assert test.exit_code == 1
    assert test.output is not None
    assert "AssertionError: add(2, 3) gave -1" in test.output
    assert test.error is None
    assert run.steps[6].output == "ok"
    assert run.steps[7].message == "Done."
    assert run.steps[0].goal == (
        "The test in test_calc.py fails. Fix add() in calc.py so that it passes."
    )
    assert run.meta["conversation_id"] == run.steps[0].session
    assert run.meta["execution_status"] == "finished"


def test_rejected_tool_call_is_no_step_and_is_listed() -> None:
    """The call of an unknown tool (action null, then an AgentErrorEvent) is no step."""
    run = only_run(RUNS / "loop")
    (rejected,) = run.meta["rejected_calls"]
    assert rejected["tool"] == "run_tests"
    assert rejected["error"].startswith("Tool 'run_tests' not found.")


def test_usage_goes_to_the_first_step_of_each_response() -> None:
    """Tokens and cost per response (base_state metrics), on the first call of the response."""
    run = only_run(RUNS / "loop")
    state = json.loads((RUNS / "loop" / "base_state.json").read_text(encoding="utf-8"))
    metrics = state["stats"]["usage_to_metrics"]["agent"]
    usages = {u["response_id"]: u for u in metrics["token_usages"]}
    assert len(run.costs) == len(run.steps)
    assert run.costs[0].input_tokens == usages["chatcmpl-scripted-00"]["prompt_tokens"]
    assert run.costs[0].output_tokens == usages["chatcmpl-scripted-00"]["completion_tokens"]
    assert run.costs[0].cost_usd == pytest.approx(metrics["costs"][0]["cost"])
    assert run.costs[1].input_tokens is None  # the same response's second call
    assert run.costs[2].input_tokens == usages["chatcmpl-scripted-01"]["prompt_tokens"]
    assert run.total_cost_usd == pytest.approx(metrics["accumulated_cost"])


def test_the_step_stream_tap_matches_the_sdk_events() -> None:
    """The generic JSONL written live by the recorder holds the same steps the SDK reader reads."""
    for name in ("loop", "clean"):
        tapped = only_run(RUNS / f"{name}.steps.jsonl")
        read = only_run(RUNS / name)
        assert tapped.format == "jsonl"
        assert [(s.tool, dict(s.args), s.output, s.error, s.exit_code) for s in tapped.steps] == [
            (s.tool, dict(s.args), s.output, s.error, s.exit_code) for s in read.steps
        ]


def test_conversation_folder_is_one_trace(tmp_path: Path) -> None:
    """A persisted conversation is yielded once, as its folder; its files are not traces."""
    found = list(iter_paths([RUNS]))
    assert RUNS / "loop" in found
    assert not [p for p in found if "loop" in p.parts[-2:-1] or p.parent.name == "events"]
    assert list(iter_paths([RUNS / "loop"])) == [RUNS / "loop"]
    events = RUNS / "loop" / "events"
    assert detect_format(events) == "openhands-sdk"
    assert len(only_run(events).steps) == 8
    with pytest.raises(UnknownFormat, match="scan its folder"):
        list(read_runs(next(events.glob("event-*.json"))))
    with pytest.raises(UnknownFormat, match="no persisted OpenHands SDK conversation"):
        list(read_runs(tmp_path))


def test_scan_finds_the_scripted_loop_and_no_loop_in_the_clean_run() -> None:
    """The same failing test run three times (steps 2-4) is a repeat; the clean run has none."""
    scanner = Scanner()
    loop = next(r for r in scanner.scan_file(RUNS / "loop") if hasattr(r, "loops"))
    clean = next(r for r in scanner.scan_file(RUNS / "clean") if hasattr(r, "loops"))
    repeats = [(lp.step, lp.evidence) for lp in loop.loops if lp.detector == "repeat"]
    assert repeats == [(3, (2, 3, 4))]
    assert loop.waste.from_step == 3
    assert loop.waste.input_tokens is not None
    assert loop.waste.input_tokens > 0
    assert clean.loops == ()


def _events_with(kind_change: dict[str, Any]) -> list[dict[str, Any]]:
    events = copy.deepcopy(raw_events(RUNS / "loop.events.json"))
    for n, event in enumerate(events):
        if event["kind"] == "ObservationEvent" and event["tool_name"] == "terminal":
            events[n] = {**{k: event[k] for k in ("id", "timestamp", "source")}, **kind_change}
            events[n]["tool_call_id"] = event["tool_call_id"]
            if kind_change["kind"] != "AgentErrorEvent":  # that one answers by tool_call_id
                events[n]["action_id"] = event["action_id"]
            break
    return events


def test_user_rejection_and_agent_error_results(tmp_path: Path) -> None:
    """A UserRejectObservation and an AgentErrorEvent answering an action give its error."""
    rejected = _events_with(
        {
            "kind": "UserRejectObservation",
            "tool_name": "terminal",
            "rejection_reason": "not now",
            "rejection_source": "user",
        }
    )
    path = tmp_path / "rejected.json"
    path.write_text(json.dumps(rejected), encoding="utf-8")
    assert only_run(path).steps[0].error == "Action rejected: not now"
    failed = _events_with({"kind": "AgentErrorEvent", "tool_name": "terminal", "error": "boom"})
    path = tmp_path / "failed.json"
    path.write_text(json.dumps(failed), encoding="utf-8")
    step = only_run(path).steps[0]
    assert (step.error, step.output) == ("boom", None)


def test_events_without_kind_are_still_known(tmp_path: Path) -> None:
    """Events dumped without their ``kind`` are known by their fields."""
    events = raw_events(RUNS / "loop.events.json")
    bare = [{k: v for k, v in e.items() if k != "kind"} for e in events]
    path = tmp_path / "bare.json"
    path.write_text(json.dumps(bare), encoding="utf-8")
    assert detect_format(path) == "openhands-sdk"
    assert [s.tool for s in only_run(path).steps] == LOOP_TOOLS


def test_event_page_of_the_agent_server(tmp_path: Path) -> None:
    """The agent server's ``{"items": [...]}`` event page reads like the event list."""
    path = tmp_path / "page.json"
    items = raw_events(RUNS / "clean.events.json")
    path.write_text(json.dumps({"items": items, "next_page_id": None}), encoding="utf-8")
    assert [s.tool for s in only_run(path).steps] == CLEAN_TOOLS


def test_no_tool_call_gives_no_steps_and_says_why(tmp_path: Path) -> None:
    """A conversation that never called a tool reads as no steps, with what it held instead."""
    events = [e for e in raw_events(RUNS / "clean.events.json") if e["kind"] != "ActionEvent"]
    events = [e for e in events if e["kind"] != "ObservationEvent"]
    path = tmp_path / "talk.json"
    path.write_text(json.dumps(events), encoding="utf-8")
    run = only_run(path)
    assert run.steps == ()
    assert run.problems == (
        "no executed tool call in 2 events (MessageEvent 1, SystemPromptEvent 1)",
    )


# --- a fresh recording with the real SDK ----------------------------------------------------


def _sdk_python() -> str | None:
    """An interpreter with openhands-sdk: this one, or OPENHANDS_SDK_PYTHON."""
    if importlib.util.find_spec("openhands") and importlib.util.find_spec("openhands.sdk"):
        return sys.executable
    other = os.environ.get("OPENHANDS_SDK_PYTHON")
    return other if other and Path(other).exists() else None


@pytest.mark.timeout(180)
def test_a_fresh_recording_with_the_real_sdk_reads_the_same(tmp_path: Path) -> None:
    """Record both scripted runs again with the installed SDK; they read as the committed ones."""
    python = _sdk_python()
    if python is None:
        pytest.skip(
            "openhands-sdk is not installed (pip install 'antiloop[openhands]', Python >= 3.12; "
            "or set OPENHANDS_SDK_PYTHON to an interpreter that has it)"
        )
    if shutil.which("tmux") is None and sys.platform != "win32":
        pytest.skip("the SDK's terminal tool needs tmux or its subprocess fallback")
    done = subprocess.run(
        [python, str(RECORDER), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for name, tools in (("loop", LOOP_TOOLS), ("clean", CLEAN_TOOLS)):
        fresh = only_run(tmp_path / name)
        assert len(fresh.steps) == executed_calls(raw_events(tmp_path / name))
        assert [s.tool for s in fresh.steps] == tools
        committed = only_run(RUNS / name)
        assert [(s.tool, dict(s.args), s.exit_code) for s in fresh.steps] == [
            (s.tool, dict(s.args), s.exit_code) for s in committed.steps
        ]


def test_files_inside_a_conversation_folder_are_not_traces(tmp_path: Path) -> None:
    """A conversation's saved outputs and state are part of it; files beside it stay traces."""
    conversation = tmp_path / "conversations" / "abc"
    shutil.copytree(RUNS / "loop", conversation)
    (conversation / "observations").mkdir()
    (conversation / "observations" / "terminal_1.txt").write_text("long output\n")
    bare = tmp_path / "bare" / "events"
    shutil.copytree(RUNS / "clean" / "events", bare)
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    assert list(iter_paths([tmp_path])) == [bare, conversation, notes]
    assert [len(only_run(p).steps) for p in (bare, conversation)] == [5, 8]
    assert only_run(bare).file == str(bare)


def test_event_kinds_of_a_later_sdk_are_tolerated(tmp_path: Path) -> None:
    """An event kind this reader does not know is no step; when nothing else is, it is named."""
    events = raw_events(RUNS / "clean.events.json")
    future = {"id": "f-1", "timestamp": "2027-01-01T00:00:00", "source": "agent"}
    future["kind"] = "PlanningEvent"
    path = tmp_path / "later.json"
    path.write_text(json.dumps([future, *events]), encoding="utf-8")
    assert [s.tool for s in only_run(path).steps] == CLEAN_TOOLS
    path.write_text(json.dumps([future, events[1]]), encoding="utf-8")
    run = only_run(path)
    assert run.steps == ()
    assert run.problems == (
        "no executed tool call in 2 events (MessageEvent 1, PlanningEvent 1); "
        "kinds not read as steps: PlanningEvent",
    )
