"""Hook payloads as the agents send them, written from reference integrations.md 1.3, 2.1, 2.3.

``CLAUDE_EVENTS`` has one payload per Claude Code event the hook handles (and one it ignores);
``CLAUDE_TOOLS`` one PreToolUse input and one PostToolUse ``tool_response`` per built-in tool.
``ClaudeSession`` builds the payloads of one scripted session.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

TRANSCRIPT = "/home/dev/.claude/projects/-home-dev-game/{session}.jsonl"

#: tool -> (tool_input, tool_response) as Claude Code sends them to PreToolUse / PostToolUse
CLAUDE_TOOLS: dict[str, tuple[dict[str, Any], Any]] = {
    "Bash": (
        {"command": "npm test", "description": "Run the tests", "timeout": 120000},
        {
            "stdout": "Tests: 12 passed, 12 total\n",
            "stderr": "",
            "interrupted": False,
            "isImage": False,
        },
    ),
    "PowerShell": (
        {"command": "Get-ChildItem src"},
        {"stdout": "app.ts\n", "stderr": "", "interrupted": False, "isImage": False},
    ),
    "Read": (
        {"file_path": "/home/dev/game/src/app/app.ts", "offset": 1, "limit": 200},
        {
            "type": "text",
            "file": {
                "filePath": "/home/dev/game/src/app/app.ts",
                "content": "export class Player {}\n",
                "numLines": 1,
                "startLine": 1,
                "totalLines": 1,
            },
        },
    ),
    "Write": (
        {"file_path": "/home/dev/game/src/app/new.ts", "content": "export const x = 1;\n"},
        {
            "type": "create",
            "filePath": "/home/dev/game/src/app/new.ts",
            "content": "export const x = 1;\n",
            "structuredPatch": [],
            "success": True,
        },
    ),
    "Edit": (
        {
            "file_path": "/home/dev/game/src/app/app.ts",
            "old_string": "return 1;",
            "new_string": "return 2;",
            "replace_all": False,
        },
        {
            "filePath": "/home/dev/game/src/app/app.ts",
            "oldString": "return 1;",
            "newString": "return 2;",
            "originalFile": "return 1;\n",
            "structuredPatch": [],
            "userModified": False,
            "replaceAll": False,
        },
    ),
    "MultiEdit": (
        {
            "file_path": "/home/dev/game/src/app/app.ts",
            "edits": [{"old_string": "a", "new_string": "b"}],
        },
        {
            "filePath": "/home/dev/game/src/app/app.ts",
            "edits": [],
            "structuredPatch": [],
            "originalFileContents": "a\n",
        },
    ),
    "NotebookEdit": (
        {
            "notebook_path": "/home/dev/game/nb.ipynb",
            "cell_id": "c1",
            "new_source": "x = 1",
            "edit_mode": "replace",
        },
        {
            "new_source": "x = 1",
            "cell_id": "c1",
            "cell_type": "code",
            "language": "python",
            "edit_mode": "replace",
        },
    ),
    "Glob": (
        {"pattern": "**/*.ts", "path": "/home/dev/game/src"},
        {
            "filenames": ["/home/dev/game/src/app/app.ts"],
            "durationMs": 12,
            "numFiles": 1,
            "truncated": False,
        },
    ),
    "Grep": (
        {"pattern": "doubleJump", "path": "src", "output_mode": "content", "-n": True},
        {
            "mode": "content",
            "numFiles": 1,
            "filenames": [],
            "content": "src/app/app.ts:12:  doubleJump(): void {",
            "numLines": 1,
        },
    ),
    "WebFetch": (
        {"url": "https://example.com/docs", "prompt": "What is the jump height?"},
        {
            "bytes": 1024,
            "code": 200,
            "codeText": "OK",
            "result": "The height is 3.",
            "durationMs": 812,
            "url": "https://example.com/docs",
        },
    ),
    "WebSearch": (
        {"query": "phaser double jump"},
        {
            "query": "phaser double jump",
            "results": [{"title": "Jumping", "url": "https://x"}],
            "durationSeconds": 1.4,
        },
    ),
    "Agent": (
        {
            "description": "Find the jump code",
            "prompt": "Find where jumping is handled.",
            "subagent_type": "explorer",
        },
        {
            "content": [{"type": "text", "text": "Jumping is in src/app/app.ts."}],
            "totalDurationMs": 5321,
            "totalTokens": 1200,
            "totalToolUseCount": 3,
            "usage": {"input_tokens": 10},
        },
    ),
    "TodoWrite": (
        {"todos": [{"content": "Fix jump", "status": "in_progress", "activeForm": "Fixing"}]},
        {"oldTodos": [], "newTodos": [{"content": "Fix jump", "status": "in_progress"}]},
    ),
    "AskUserQuestion": (
        {"questions": [{"question": "Which level?", "options": [{"label": "1"}]}]},
        {"answers": {"Which level?": "1"}},
    ),
    "ExitPlanMode": ({"plan": "1. Fix the jump"}, {"plan": "1. Fix the jump", "isAgent": False}),
    "mcp__github__search_issues": (
        {"query": "double jump"},
        [{"type": "text", "text": "#12 Double jump broken"}],
    ),
}


def common(session: str, event: str, cwd: str = "/home/dev/game", **extra: Any) -> dict[str, Any]:
    """The fields every Claude Code hook input has."""
    return {
        "session_id": session,
        "transcript_path": TRANSCRIPT.format(session=session),
        "cwd": cwd,
        "permission_mode": "default",
        "hook_event_name": event,
        **extra,
    }


CLAUDE_EVENTS: dict[str, dict[str, Any]] = {
    "SessionStart": common("s-ev", "SessionStart", source="startup", model="claude-opus-4"),
    "UserPromptSubmit": common("s-ev", "UserPromptSubmit", prompt="Fix the double jump."),
    "PreToolUse": common(
        "s-ev",
        "PreToolUse",
        tool_name="Grep",
        tool_input=CLAUDE_TOOLS["Grep"][0],
        tool_use_id="toolu_01",
    ),
    "PostToolUse": common(
        "s-ev",
        "PostToolUse",
        tool_name="Grep",
        tool_input=CLAUDE_TOOLS["Grep"][0],
        tool_response=CLAUDE_TOOLS["Grep"][1],
        tool_use_id="toolu_01",
        duration_ms=40,
    ),
    "PostToolUseFailure": common(
        "s-ev",
        "PostToolUseFailure",
        tool_name="Bash",
        tool_input={"command": "npm test"},
        tool_use_id="toolu_02",
        error="Exit code 1\nTests: 3 failed, 9 passed",
        is_interrupt=False,
    ),
    "Stop": common(
        "s-ev",
        "Stop",
        stop_hook_active=False,
        last_assistant_message="The jump is fixed.",
        background_tasks=[],
        session_crons=[],
    ),
    "SubagentStop": common(
        "s-ev",
        "SubagentStop",
        stop_hook_active=False,
        agent_id="a1b2",
        agent_type="explorer",
        agent_transcript_path="/tmp/a1b2.jsonl",
        last_assistant_message="Found it.",
        background_tasks=[],
        session_crons=[],
    ),
    "SessionEnd": common("s-ev", "SessionEnd", reason="prompt_input_exit"),
    "Notification": common(
        "s-ev",
        "Notification",
        message="Claude needs your permission",
        notification_type="permission_prompt",
    ),
}

GEMINI_EVENTS: dict[str, dict[str, Any]] = {
    "BeforeTool": {
        "session_id": "g1",
        "transcript_path": "/tmp/g1.json",
        "cwd": "/home/dev/game",
        "hook_event_name": "BeforeTool",
        "timestamp": "2026-01-01T00:00:00Z",
        "tool_name": "run_shell_command",
        "tool_input": {"command": "npm test"},
    },
    "AfterTool": {
        "session_id": "g1",
        "transcript_path": "/tmp/g1.json",
        "cwd": "/home/dev/game",
        "hook_event_name": "AfterTool",
        "timestamp": "2026-01-01T00:00:01Z",
        "tool_name": "run_shell_command",
        "tool_input": {"command": "npm test"},
        "tool_response": {
            "llmContent": "Command: npm test\nDirectory: (root)\nOutput: 3 failed\nError: (none)\n"
            "Exit Code: 1\nSignal: (none)\nBackground PIDs: (none)\nProcess Group PGID: 4242\n",
            "returnDisplay": "3 failed",
        },
    },
    "BeforeAgent": {
        "session_id": "g1",
        "transcript_path": "/tmp/g1.json",
        "cwd": "/home/dev/game",
        "hook_event_name": "BeforeAgent",
        "timestamp": "2026-01-01T00:00:00Z",
        "prompt": "Fix the double jump.",
    },
    "AfterAgent": {
        "session_id": "g1",
        "transcript_path": "/tmp/g1.json",
        "cwd": "/home/dev/game",
        "hook_event_name": "AfterAgent",
        "timestamp": "2026-01-01T00:00:00Z",
        "prompt": "Fix the double jump.",
        "prompt_response": "Done.",
        "stop_hook_active": False,
    },
}

CODEX_EVENTS: dict[str, dict[str, Any]] = {
    "PreToolUse": {
        "session_id": "c1",
        "turn_id": "t1",
        "transcript_path": None,
        "cwd": "/home/dev/game",
        "hook_event_name": "PreToolUse",
        "model": "gpt-5-codex",
        "permission_mode": "default",
        "tool_name": "Bash",
        "tool_input": {"command": ["bash", "-lc", "rg doubleJump src"]},
        "tool_use_id": "call_1",
    },
    "PostToolUse": {
        "session_id": "c1",
        "turn_id": "t1",
        "transcript_path": None,
        "cwd": "/home/dev/game",
        "hook_event_name": "PostToolUse",
        "model": "gpt-5-codex",
        "permission_mode": "default",
        "tool_name": "Bash",
        "tool_input": {"command": ["bash", "-lc", "rg doubleJump src"]},
        "tool_response": "src/app/app.ts:12:  doubleJump(): void {\n",
        "tool_use_id": "call_1",
    },
    "apply_patch": {
        "session_id": "c1",
        "turn_id": "t2",
        "transcript_path": None,
        "cwd": "/home/dev/game",
        "hook_event_name": "PostToolUse",
        "model": "gpt-5-codex",
        "permission_mode": "default",
        "tool_name": "apply_patch",
        "tool_input": {
            "command": "*** Begin Patch\n*** Update File: src/app/app.ts\n@@\n-a\n+b\n"
            "*** End Patch\n"
        },
        "tool_response": "Success. Updated the following files:\nM src/app/app.ts\n",
        "tool_use_id": "call_2",
    },
}


_IDS = itertools.count(1)


@dataclass
class ClaudeSession:
    """Builds the hook inputs of one Claude Code session (a subagent with ``agent_id``)."""

    session: str
    cwd: str = "/home/dev/game"
    agent_id: str | None = None
    agent_type: str | None = None
    mode: str = "default"
    _uses: list[int] = field(default_factory=lambda: [0])

    def _base(self, event: str, **extra: Any) -> dict[str, Any]:
        payload = common(self.session, event, self.cwd, **extra)
        payload["permission_mode"] = self.mode
        if self.agent_id is not None:
            payload["agent_id"] = self.agent_id
            payload["agent_type"] = self.agent_type or "general-purpose"
        return payload

    def _use_id(self) -> str:
        # unique across sessions and agents, as Claude Code's ids are (an id seen again in a
        # session is the same call delivered twice)
        self._uses[0] += 1
        return f"toolu_{self.session}_{self.agent_id or 'main'}_{self._uses[0]:04d}_{next(_IDS)}"

    def pre(self, tool: str, tool_input: dict[str, Any]) -> dict[str, Any]:
        """PreToolUse."""
        return self._base(
            "PreToolUse", tool_name=tool, tool_input=tool_input, tool_use_id=self._use_id()
        )

    def post(self, tool: str, tool_input: dict[str, Any], response: Any) -> dict[str, Any]:
        """PostToolUse."""
        return self._base(
            "PostToolUse",
            tool_name=tool,
            tool_input=tool_input,
            tool_response=response,
            tool_use_id=self._use_id(),
        )

    def failure(self, tool: str, tool_input: dict[str, Any], error: str) -> dict[str, Any]:
        """PostToolUseFailure."""
        return self._base(
            "PostToolUseFailure",
            tool_name=tool,
            tool_input=tool_input,
            error=error,
            is_interrupt=False,
            tool_use_id=self._use_id(),
        )

    def prompt(self, text: str) -> dict[str, Any]:
        """UserPromptSubmit."""
        return self._base("UserPromptSubmit", prompt=text)

    def stop(self, message: str, active: bool = False) -> dict[str, Any]:
        """Stop (SubagentStop for a subagent)."""
        event = "SubagentStop" if self.agent_id else "Stop"
        return self._base(
            event,
            stop_hook_active=active,
            last_assistant_message=message,
            background_tasks=[],
            session_crons=[],
        )

    def start(self, source: str = "startup") -> dict[str, Any]:
        """SessionStart."""
        return self._base("SessionStart", source=source)

    def end(self, reason: str = "prompt_input_exit") -> dict[str, Any]:
        """SessionEnd."""
        return self._base("SessionEnd", reason=reason)

    def grep(self, pattern: str, found: str) -> dict[str, Any]:
        """A Grep PostToolUse with ``found`` as its content."""
        args = {"pattern": pattern, "path": "src", "output_mode": "content"}
        return self.post(
            "Grep", args, {"mode": "content", "content": found, "numLines": 1, "filenames": []}
        )

    def read(self, path: str, content: str) -> dict[str, Any]:
        """A Read PostToolUse."""
        return self.post(
            "Read",
            {"file_path": path},
            {"type": "text", "file": {"filePath": path, "content": content}},
        )
