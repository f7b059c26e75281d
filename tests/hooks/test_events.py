"""The normaliser: every event and built-in tool of the reference, in all three dialects."""

from __future__ import annotations

import json

import pytest
from tests.hooks.payloads import CLAUDE_EVENTS, CLAUDE_TOOLS, CODEX_EVENTS, GEMINI_EVENTS, common

from antiloop.hooks.events import BadPayload, normalize, parse_payload, response_text

KINDS = {
    "SessionStart": "start",
    "UserPromptSubmit": "prompt",
    "PreToolUse": "pre",
    "PostToolUse": "post",
    "PostToolUseFailure": "post",
    "Stop": "stop",
    "SubagentStop": "stop",
    "SessionEnd": "end",
    "Notification": "other",
}


@pytest.mark.parametrize("name", sorted(CLAUDE_EVENTS))
def test_claude_code_events_have_their_kind(name: str) -> None:
    """Each Claude Code event maps onto the kind the handler acts on."""
    event = normalize("claude-code", CLAUDE_EVENTS[name])
    assert (event.kind, event.name, event.session) == (KINDS[name], name, "s-ev")


@pytest.mark.parametrize("tool", sorted(CLAUDE_TOOLS))
def test_every_built_in_tool_gives_a_step(tool: str) -> None:
    """Every built-in tool's PostToolUse gives its tool, args and a result text."""
    args, response = CLAUDE_TOOLS[tool]
    payload = common("s", "PostToolUse", tool_name=tool, tool_input=args, tool_response=response)
    event = normalize("claude-code", payload)
    assert event.kind == "post"
    assert event.tool == tool
    assert dict(event.args) == args
    assert event.output
    assert event.error is None


@pytest.mark.parametrize("tool", sorted(CLAUDE_TOOLS))
def test_results_leave_out_what_varies_per_run(tool: str) -> None:
    """Durations and token counts do not reach the result text."""
    _, response = CLAUDE_TOOLS[tool]
    text = response_text(tool, response) or ""
    for volatile in ("durationMs", "totalDurationMs", "durationSeconds", "812", "5321"):
        assert volatile not in text


def test_result_texts_are_what_the_model_reads() -> None:
    """Bash gives stdout, Read the file content, Glob the names, Agent its text."""
    assert response_text("Bash", CLAUDE_TOOLS["Bash"][1]) == "Tests: 12 passed, 12 total\n"
    assert response_text("Read", CLAUDE_TOOLS["Read"][1]) == "export class Player {}\n"
    assert response_text("Glob", CLAUDE_TOOLS["Glob"][1]) == "/home/dev/game/src/app/app.ts"
    assert response_text("Agent", CLAUDE_TOOLS["Agent"][1]) == "Jumping is in src/app/app.ts."
    assert response_text("WebFetch", CLAUDE_TOOLS["WebFetch"][1]) == "The height is 3."


def test_bash_stdout_and_stderr_are_joined() -> None:
    """Both streams are kept, as the model sees both."""
    text = response_text("Bash", {"stdout": "out", "stderr": "warn", "interrupted": False})
    assert text == "out\nwarn"


def test_a_successful_bash_call_has_exit_code_zero() -> None:
    """Claude Code reports every non-zero exit as a failure, so a PostToolUse Bash exited 0."""
    event = normalize("claude-code", CLAUDE_EVENTS["PostToolUse"] | {"tool_name": "Bash"})
    assert event.exit_code == 0


def test_a_failed_bash_call_gives_its_exit_code_and_output() -> None:
    """``Exit code N`` at the head of the error becomes the exit code; the rest the output."""
    event = normalize("claude-code", CLAUDE_EVENTS["PostToolUseFailure"])
    assert (event.exit_code, event.output, event.error) == (
        1,
        "Tests: 3 failed, 9 passed",
        None,
    )


def test_another_tool_failure_is_an_error() -> None:
    """A failing Edit keeps its message (tool_use_error tags removed) as the error."""
    payload = common(
        "s",
        "PostToolUseFailure",
        tool_name="Edit",
        tool_input=CLAUDE_TOOLS["Edit"][0],
        error="<tool_use_error>String to replace not found in file.</tool_use_error>",
    )
    event = normalize("claude-code", payload)
    assert event.error == "String to replace not found in file."
    assert event.files == ("/home/dev/game/src/app/app.ts",)


@pytest.mark.parametrize(
    ("tool", "path"),
    [
        ("Edit", "/home/dev/game/src/app/app.ts"),
        ("MultiEdit", "/home/dev/game/src/app/app.ts"),
        ("Write", "/home/dev/game/src/app/new.ts"),
        ("NotebookEdit", "/home/dev/game/nb.ipynb"),
    ],
)
def test_file_writing_tools_name_their_file(tool: str, path: str) -> None:
    """Edit, MultiEdit, Write and NotebookEdit name the file whose state is read after them."""
    args, response = CLAUDE_TOOLS[tool]
    payload = common("s", "PostToolUse", tool_name=tool, tool_input=args, tool_response=response)
    assert normalize("claude-code", payload).files == (path,)


def test_an_interrupted_call_is_marked() -> None:
    """A call the person interrupted is marked so that it is not judged."""
    payload = CLAUDE_EVENTS["PostToolUseFailure"] | {"is_interrupt": True}
    assert normalize("claude-code", payload).interrupted


def test_subagents_are_agents_of_their_own() -> None:
    """agent_type and agent_id name the subagent's stream; the main conversation is main."""
    sub = normalize("claude-code", CLAUDE_EVENTS["SubagentStop"])
    main = normalize("claude-code", CLAUDE_EVENTS["Stop"])
    assert (sub.agent, main.agent) == ("explorer-a1b2", "main")
    assert sub.message == "Found it."


def test_stop_carries_the_last_message_and_the_flag() -> None:
    """Stop gives last_assistant_message and stop_hook_active."""
    event = normalize("claude-code", CLAUDE_EVENTS["Stop"] | {"stop_hook_active": True})
    assert (event.message, event.stop_hook_active) == ("The jump is fixed.", True)


def test_session_events_keep_their_details() -> None:
    """SessionStart keeps source and model; SessionEnd its reason."""
    start = normalize("claude-code", CLAUDE_EVENTS["SessionStart"])
    end = normalize("claude-code", CLAUDE_EVENTS["SessionEnd"])
    assert start.detail["source"] == "startup"
    assert start.detail["model"] == "claude-opus-4"
    assert end.detail["reason"] == "prompt_input_exit"


def test_gemini_events() -> None:
    """BeforeTool, AfterTool, BeforeAgent and AfterAgent map onto pre, post, prompt and stop."""
    kinds = {n: normalize("gemini", p).kind for n, p in GEMINI_EVENTS.items()}
    assert kinds == {
        "BeforeTool": "pre",
        "AfterTool": "post",
        "BeforeAgent": "prompt",
        "AfterAgent": "stop",
    }
    after = normalize("gemini", GEMINI_EVENTS["AfterTool"])
    assert after.exit_code == 1
    assert after.output is not None
    assert "PGID" not in after.output  # a process id would make every run look new
    assert normalize("gemini", GEMINI_EVENTS["AfterAgent"]).message == "Done."


def test_codex_events() -> None:
    """Codex's argv shell command becomes the script; apply_patch names its files."""
    pre = normalize("codex", CODEX_EVENTS["PreToolUse"])
    assert pre.args["command"] == "rg doubleJump src"
    post = normalize("codex", CODEX_EVENTS["PostToolUse"])
    assert post.output == "src/app/app.ts:12:  doubleJump(): void {\n"
    patch = normalize("codex", CODEX_EVENTS["apply_patch"])
    assert patch.files == ("src/app/app.ts",)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "empty"),
        (b"   \n", "empty"),
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "not an object"),
        (b"\xff\xfe", "not valid JSON"),
    ],
)
def test_unreadable_input_is_named(data: bytes, problem: str) -> None:
    """Empty, non-JSON, non-object or non-UTF-8 input raises BadPayload saying which."""
    with pytest.raises(BadPayload, match=problem):
        parse_payload(data)


@pytest.mark.parametrize("missing", ["hook_event_name", "session_id", "tool_name"])
def test_missing_fields_are_named(missing: str) -> None:
    """An input without its event name, session or tool is refused naming the field."""
    payload = dict(CLAUDE_EVENTS["PreToolUse"])
    del payload[missing]
    with pytest.raises(BadPayload, match=missing):
        normalize("claude-code", payload)


def test_tool_input_as_a_json_string_is_decoded() -> None:
    """A tool_input sent as a JSON string is read as the object it holds."""
    payload = CLAUDE_EVENTS["PreToolUse"] | {"tool_input": json.dumps({"pattern": "x"})}
    assert dict(normalize("claude-code", payload).args) == {"pattern": "x"}
