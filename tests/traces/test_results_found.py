"""No reader invents a result: a step whose result is not found is unknown, never empty.

Each reader is given a run where one call has no result, and the scan must say the run is
partial (summary, ``--json``, HTML) and must not judge that step as an empty output. The
OpenHands SDK reader is also given the observation shapes of the SDK's versions: the 1.x
``content`` list (as recorded in tests/data/openhands-sdk), a ``content`` string, and the
earlier ``output`` strings of ``ExecuteBashObservation``, ``StrReplaceEditorObservation`` and
``BrowserObservation`` (with ``error`` as a boolean or a string), derived from the recorded run.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from antiloop.cli import main
from antiloop.scan import Scanner
from antiloop.traces import read_runs

SDK_RUNS = Path(__file__).resolve().parents[1] / "data" / "openhands-sdk" / "runs"


def _texts(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(c["text"] for c in content if c.get("type") == "text")


def _recorded_events() -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = json.loads(
        (SDK_RUNS / "loop.events.json").read_text(encoding="utf-8")
    )
    return events


def _earlier_sdk(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events as an earlier SDK wrote them: ``output`` strings and ``error`` flags."""
    out = copy.deepcopy(events)
    for event in out:
        if event["kind"] != "ObservationEvent":
            continue
        new = event["observation"]
        body = _texts(new.get("content", []))
        if event["tool_name"] == "terminal":
            old: dict[str, Any] = {
                "kind": "ExecuteBashObservation",
                "output": body,
                "command": new.get("command"),
                "exit_code": new.get("exit_code"),
                "error": bool(new.get("is_error")),
                "timeout": False,
                "metadata": new.get("metadata", {}),
            }
        elif event["tool_name"] == "file_editor":
            failed = bool(new.get("is_error"))
            old = {
                "kind": "StrReplaceEditorObservation",
                "command": new.get("command", "view"),
                "output": "" if failed else body,
                "error": body if failed else None,
                "path": new.get("path"),
            }
        else:
            old = {"kind": new["kind"].replace("Observation", "") + "Observation"}
        event["observation"] = old
    return out


def _eval_file(tmp_path: Path, history: list[dict[str, Any]], name: str = "output") -> Path:
    record = {"instance_id": name, "instruction": "fix the bug", "history": history}
    path = tmp_path / f"{name}.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return path


def _results(run: Any) -> list[tuple[str | None, str | None, int | None]]:
    return [(s.output, s.error, s.exit_code) for s in run.steps]


def test_earlier_sdk_output_strings_read_as_the_content_lists(tmp_path: Path) -> None:
    """``output`` strings (earlier SDKs) give the same results as ``content`` lists (1.x)."""
    events = _recorded_events()
    (new,) = read_runs(_eval_file(tmp_path, events, "new"))
    (old,) = read_runs(_eval_file(tmp_path, _earlier_sdk(events), "old"))
    assert not new.partial
    assert not old.partial
    assert [s.output for s in new.steps if s.tool == "terminal"] == [
        s.output for s in old.steps if s.tool == "terminal"
    ]
    last = len(new.steps) - 1  # the finish: its earlier observation had no text, by design
    assert _results(old)[:last] == _results(new)[:last]
    assert (old.steps[last].tool, old.steps[last].output) == ("finish", "")
    assert any(s.output for s in old.steps)  # the results are really there, not all empty


def test_content_as_a_string_is_the_text(tmp_path: Path) -> None:
    events = _recorded_events()
    for event in events:
        if event["kind"] == "ObservationEvent":
            event["observation"]["content"] = _texts(event["observation"]["content"])
    (run,) = read_runs(_eval_file(tmp_path, events))
    (recorded,) = read_runs(_eval_file(tmp_path, _recorded_events(), "recorded"))
    assert _results(run) == _results(recorded)


def _browse(call: str, url: str) -> list[dict[str, Any]]:
    action = {
        "id": f"a-{call}",
        "timestamp": "2025-10-01T00:00:00",
        "source": "agent",
        "kind": "ActionEvent",
        "tool_name": "browser_navigate",
        "tool_call_id": call,
        "llm_response_id": f"r-{call}",
        "tool_call": {"name": "browser_navigate", "arguments": json.dumps({"url": url})},
        "action": {"kind": "BrowserNavigateAction", "url": url},
        "thought": [],
    }
    return [action]


def _browser_result(call: str, output: str, error: str | None = None) -> dict[str, Any]:
    return {
        "id": f"o-{call}",
        "timestamp": "2025-10-01T00:00:01",
        "source": "environment",
        "kind": "ObservationEvent",
        "tool_name": "browser_navigate",
        "tool_call_id": call,
        "action_id": f"a-{call}",
        "observation": {
            "kind": "BrowserObservation",
            "output": output,
            "error": error,
            "screenshot_data": None,
        },
    }


def _browser_run(outputs: list[str]) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for n, output in enumerate(outputs):
        history += _browse(f"c{n}", "http://localhost:8080/")
        history.append(_browser_result(f"c{n}", output))
    return history


def test_browser_pages_that_differ_are_no_loop(tmp_path: Path) -> None:
    """Two visits of one URL showing other pages are two results (read as empty, a false stop)."""
    path = _eval_file(tmp_path, _browser_run(["Page: login form", "Page: dashboard, 3 items"]))
    (run,) = read_runs(path)
    assert [s.output for s in run.steps] == ["Page: login form", "Page: dashboard, 3 items"]
    (scan,) = Scanner().scan_paths([path])
    assert not scan.loops  # type: ignore[union-attr]


def test_browser_pages_that_are_the_same_are_a_loop(tmp_path: Path) -> None:
    path = _eval_file(tmp_path, _browser_run(["Page: login form"] * 2))
    (scan,) = Scanner().scan_paths([path])
    assert [loop.detector for loop in scan.loops] == ["repeat"]  # type: ignore[union-attr]


def test_browser_error_string_is_the_error(tmp_path: Path) -> None:
    history = [
        *_browse("c0", "http://localhost:9/"),
        _browser_result("c0", "", error="net::ERR_CONNECTION_REFUSED"),
    ]
    (run,) = read_runs(_eval_file(tmp_path, history))
    assert (run.steps[0].output, run.steps[0].error) == (None, "net::ERR_CONNECTION_REFUSED")


# --- a result not found, reader by reader ----------------------------------------------------


def _sdk_unanswered(tmp_path: Path) -> tuple[Path, int]:
    events = _recorded_events()
    observations = [i for i, e in enumerate(events) if e["kind"] == "ObservationEvent"]
    del events[observations[2]]  # the third call's result is lost
    return _eval_file(tmp_path, events), 2


def _sdk_unknown_shape(tmp_path: Path) -> tuple[Path, int]:
    events = _recorded_events()
    observations = [i for i, e in enumerate(events) if e["kind"] == "ObservationEvent"]
    events[observations[1]]["observation"] = {"kind": "TerminalObservation", "blob": "x"}
    return _eval_file(tmp_path, events), 1


def _openhands(tmp_path: Path) -> tuple[Path, int]:
    events = [
        {"id": 1, "source": "user", "action": "message", "args": {"content": "fix it"}},
        {"id": 2, "source": "agent", "action": "run", "args": {"command": "ls"}},
        {"id": 3, "cause": 2, "observation": "run", "content": "a.py", "extras": {}},
        {"id": 4, "source": "agent", "action": "run", "args": {"command": "ls"}},
        {"id": 5, "source": "agent", "action": "finish", "args": {}},
    ]
    path = tmp_path / "history.json"
    path.write_text(json.dumps(events), encoding="utf-8")
    return path, 1


def _swe_agent(tmp_path: Path) -> tuple[Path, int]:
    doc = {
        "environment": "swe_main",
        "trajectory": [
            {"action": "ls", "observation": "a.py\n", "thought": "look", "state": "{}"},
            {"action": "ls", "observation": None, "thought": "look again", "state": "{}"},
        ],
        "history": [{"role": "user", "content": "fix it", "agent": "primary"}],
        "info": {"exit_status": "exit_cost"},
    }
    path = tmp_path / "run.traj"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path, 1


def _mini_v1(tmp_path: Path) -> tuple[Path, int]:
    doc = {
        "trajectory_format": "mini-swe-agent-1",
        "info": {"mini_version": "1.15.0"},
        "messages": [
            {"role": "system", "content": "you are"},
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": "THOUGHT: look\n```bash\nls\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"},
            {"role": "assistant", "content": "THOUGHT: again\n```bash\nls\n```"},
        ],
    }
    path = tmp_path / "v1.traj.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path, 1


def _mini_v2(tmp_path: Path) -> tuple[Path, int]:
    def call(n: int) -> dict[str, Any]:
        args = json.dumps({"command": "ls"})
        return {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": args}}

    doc = {
        "trajectory_format": "mini-swe-agent-1.1",
        "info": {"mini_version": "2.2.7"},
        "messages": [
            {"role": "system", "content": "you are"},
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": "look", "tool_calls": [call(0)]},
            {"role": "tool", "tool_call_id": "c0", "content": "<returncode>0</returncode>"},
            {"role": "assistant", "content": "again", "tool_calls": [call(1)]},
        ],
    }
    path = tmp_path / "v2.traj.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path, 1


def _claude_code(tmp_path: Path) -> tuple[Path, int]:
    def entry(kind: str, content: list[dict[str, Any]], n: int) -> dict[str, Any]:
        message: dict[str, Any] = {"role": kind, "content": content}
        if kind == "assistant":
            message["id"] = f"m{n}"
        return {"type": kind, "sessionId": "s1", "uuid": f"u{n}", "message": message}

    def use(n: int) -> dict[str, Any]:
        return {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": "ls"}}

    lines = [
        entry("user", [{"type": "text", "text": "fix it"}], 0),
        entry("assistant", [use(1)], 1),
        entry("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}], 2),
        entry("assistant", [use(3)], 3),
    ]
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path, 1


CASES = {
    "openhands-sdk unanswered": _sdk_unanswered,
    "openhands-sdk unknown observation": _sdk_unknown_shape,
    "openhands": _openhands,
    "swe-agent": _swe_agent,
    "mini-swe-agent-1": _mini_v1,
    "mini-swe-agent-2": _mini_v2,
    "claude-code": _claude_code,
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_result_not_found_makes_a_partial_run(case: str, tmp_path: Path) -> None:
    path, index = CASES[case](tmp_path)
    (run,) = read_runs(path)
    assert run.missing_results == (index,)
    assert run.partial_reason
    assert f"({index})" in run.partial_reason
    step = run.steps[index]
    assert (step.output, step.error, step.exit_code) == (None, None, None)
    (scan,) = Scanner().scan_paths([path])
    assert scan.partial
    assert scan.missing_results == (index,)
    assert scan.to_json()["partial"] == {  # type: ignore[union-attr]
        "missing_results": [index],
        "reason": run.partial_reason,
    }


@pytest.mark.parametrize("case", ["openhands", "swe-agent", "mini-swe-agent-1", "claude-code"])
def test_a_step_with_no_result_is_never_the_same_result(case: str, tmp_path: Path) -> None:
    """``ls`` then ``ls`` with its result lost: no repeat (an empty output would not say so)."""
    path, _index = CASES[case](tmp_path)
    (scan,) = Scanner().scan_paths([path])
    assert not scan.loops  # type: ignore[union-attr]


def test_two_steps_with_no_result_in_a_row_are_no_loop(tmp_path: Path) -> None:
    doc = {
        "environment": "swe_main",
        "trajectory": [{"action": "ls", "observation": None, "state": "{}"}] * 3,
        "history": [{"role": "user", "content": "fix it", "agent": "primary"}],
    }
    path = tmp_path / "run.traj"
    path.write_text(json.dumps(doc), encoding="utf-8")
    (scan,) = Scanner().scan_paths([path])
    assert scan.missing_results == (0, 1, 2)  # type: ignore[union-attr]
    assert not scan.loops  # type: ignore[union-attr]
    doc["trajectory"] = [{"action": "ls", "observation": "", "state": "{}"}] * 3
    path.write_text(json.dumps(doc), encoding="utf-8")
    (scan,) = Scanner().scan_paths([path])  # a recorded empty output is a result: a loop
    assert [loop.detector for loop in scan.loops] == ["repeat"]  # type: ignore[union-attr]


def test_the_cli_reports_partial_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Summary text, ``--json`` summary, stderr note and HTML all name the partial run."""
    path, _ = _swe_agent(tmp_path)
    main(["scan", str(path)])
    captured = capsys.readouterr()
    assert "1 partial" in captured.out
    assert "Partial runs" in captured.out
    assert "no result found for 1 step (1)" in captured.out
    assert "partial: no result found" in captured.err
    main(["scan", str(path), "--json"])
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[0]["partial"]["missing_results"] == [1]
    assert lines[-1]["summary"]["partial"] == [
        {"run": str(path), "reason": lines[0]["partial"]["reason"]}
    ]
    report = tmp_path / "report.html"
    main(["scan", str(path), "--html", str(report)])
    page = report.read_text(encoding="utf-8")
    assert "Partial runs (1)" in page
    assert "no result found" in page
    assert "<span class='s o-list n' data-i='1'" in page  # step 1 marked: no result


# --- Claude Code's stream-json output (`claude -p --output-format stream-json --verbose`) -----


def _stream_entry(kind: str, content: list[dict[str, Any]], n: int, parent: str | None) -> str:
    message: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        message.update(id=f"m{n}", type="message", model="claude-x")
    entry = {
        "type": kind,
        "message": message,
        "parent_tool_use_id": parent,
        "session_id": "s-1",
        "uuid": f"u{n}",
    }
    return json.dumps(entry)


def _stream_json(tmp_path: Path) -> Path:
    """A main agent's Task call, whose subagent runs ``ls`` once, then the main agent ``ls``."""

    def use(ident: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"type": "tool_use", "id": ident, "name": name, "input": args}

    def result(ident: str, text: str) -> dict[str, Any]:
        return {"type": "tool_result", "tool_use_id": ident, "content": text, "is_error": False}

    init = {"type": "system", "subtype": "init", "session_id": "s-1", "uuid": "u0"}
    lines = [
        json.dumps(init),
        _stream_entry("assistant", [use("t1", "Task", {"prompt": "list the files"})], 1, None),
        _stream_entry("assistant", [use("t2", "Bash", {"command": "ls"})], 2, "t1"),
        _stream_entry("user", [result("t2", "a.py")], 3, "t1"),
        _stream_entry("user", [result("t1", "a.py")], 4, None),
        _stream_entry("assistant", [use("t3", "Bash", {"command": "ls"})], 5, None),
        _stream_entry("user", [result("t3", "a.py")], 6, None),
        json.dumps({"type": "result", "subtype": "success", "session_id": "s-1", "uuid": "u7"}),
    ]
    path = tmp_path / "stream.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_claude_code_stream_json_reads_with_its_subagents_apart(tmp_path: Path) -> None:
    """The subagent's ``ls`` and the main agent's ``ls`` are two streams: no repeat."""
    path = _stream_json(tmp_path)
    (run,) = read_runs(path)
    assert run.format == "claude-code"
    assert [(s.tool, s.agent, s.output) for s in run.steps] == [
        ("Task", "main", "a.py"),
        ("Bash", "task-t1", "a.py"),
        ("Bash", "main", "a.py"),
    ]
    assert not run.partial
    (scan,) = Scanner().scan_paths([path])
    assert not scan.loops  # type: ignore[union-attr]
