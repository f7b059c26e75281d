r"""The normaliser: one agent's hook payload in, one ``HookEvent`` out.

Claude Code, Gemini CLI and Codex CLI send close cousins of one JSON shape (reference
integrations.md sections 1.3, 2.1, 2.3). This module maps each onto a ``HookEvent`` whose
``kind`` says what the guard does with it:

=========  ========================================  ============  ==========================
kind       Claude Code                               Gemini CLI    Codex CLI
=========  ========================================  ============  ==========================
pre        PreToolUse                                BeforeTool    PreToolUse
post       PostToolUse, PostToolUseFailure           AfterTool     PostToolUse
prompt     UserPromptSubmit                          BeforeAgent   UserPromptSubmit
stop       Stop, SubagentStop                        AfterAgent    Stop, SubagentStop
start      SessionStart                              SessionStart  SessionStart
end        SessionEnd                                SessionEnd    (none)
other      everything else: answered with nothing
=========  ========================================  ============  ==========================

Results are turned into the text the model reads, without the parts that change on every run
(``durationMs``, process group ids), so that a repeated call gives a repeated result. A failed
Bash call (``error`` starting ``Exit code N``) gives ``exit_code`` N and its output, as the
transcript reader does. For the file-writing tools the touched files are named in ``files``; the
handler reads their sha256 and mtime from disk after the step.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DIALECTS",
    "BadPayload",
    "HookEvent",
    "normalize",
    "parse_payload",
    "response_text",
]

DIALECTS = ("claude-code", "gemini", "codex")
MAIN_AGENT = "main"
"""The agent name of the main conversation (subagents are ``<agent_type>-<agent_id>``)."""

_KINDS: dict[str, dict[str, str]] = {
    "claude-code": {
        "PreToolUse": "pre",
        "PostToolUse": "post",
        "PostToolUseFailure": "post",
        "UserPromptSubmit": "prompt",
        "Stop": "stop",
        "SubagentStop": "stop",
        "SessionStart": "start",
        "SessionEnd": "end",
    },
    "gemini": {
        "BeforeTool": "pre",
        "AfterTool": "post",
        "BeforeAgent": "prompt",
        "AfterAgent": "stop",
        "SessionStart": "start",
        "SessionEnd": "end",
    },
    "codex": {
        "PreToolUse": "pre",
        "PostToolUse": "post",
        "UserPromptSubmit": "prompt",
        "Stop": "stop",
        "SubagentStop": "stop",
        "SessionStart": "start",
    },
}

#: tools whose touched file is named by an argument (Claude Code, Gemini CLI)
FILE_TOOLS: Mapping[str, tuple[str, ...]] = {
    "Edit": ("file_path",),
    "MultiEdit": ("file_path",),
    "Write": ("file_path",),
    "NotebookEdit": ("notebook_path",),
    "write_file": ("file_path", "absolute_path"),
    "replace": ("file_path", "absolute_path"),
}
SHELL_TOOLS = frozenset({"Bash", "PowerShell", "run_shell_command", "shell", "exec_command"})
_VOLATILE = frozenset(
    {
        "durationMs",
        "duration_ms",
        "durationSeconds",
        "totalDurationMs",
        "elapsed",
        "elapsed_ms",
        "timestamp",
        "totalTokens",
        "usage",
        "totalToolUseCount",
    }
)
_EXIT_CODE = re.compile(r"^Exit code:? (-?\d+)[ \t]*(?:\n|$)", re.IGNORECASE)
_PATCH_FILE = re.compile(
    r"^\*\*\* (?:Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.M
)
_TOOL_USE_ERROR = re.compile(r"</?tool_use_error>")
_TEXT_CAP = 1_000_000


class BadPayload(ValueError):
    """The hook input is empty, not JSON, not a JSON object, or of a shape antiloop does not know.

    Attributes:
        field: the field whose shape is unknown (None when the input is not an object at all).
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class HookEvent:
    """One hook invocation, in the agent-independent form the handler judges.

    Attributes:
        dialect: ``claude-code``, ``gemini`` or ``codex``.
        name: the agent's own event name (``PreToolUse``, ``AfterTool``, ...).
        kind: ``pre``, ``post``, ``prompt``, ``stop``, ``start``, ``end`` or ``other``.
        session: the agent's session id.
        agent: ``main``, or ``<agent_type>-<agent_id>`` for a subagent.
        tool: the tool name (tool events).
        args: the tool input.
        output: the result text the model reads (``post``).
        error: the error text (``post`` of a failed call).
        exit_code: a shell tool's exit code, where known.
        interrupted: the person interrupted the call (its result says nothing).
        files: files the call wrote, absolute or relative to ``cwd``.
        cwd: the agent's working directory.
        prompt: the person's prompt (``prompt``).
        message: the agent's last message (``stop``).
        stop_hook_active: the agent is already going on because a stop hook said so.
        permission_mode: Claude Code's permission mode, when sent.
        attended: whether a person can answer the host's prompt (False in ``claude -p`` and
            the Agent SDK; None when the host does not say). Set by the runner from the
            environment.
        detail: what else is kept in the audit log (source, reason, model, ids).
    """

    dialect: str
    name: str
    kind: str
    session: str
    agent: str = MAIN_AGENT
    tool: str | None = None
    args: Mapping[str, Any] = field(default_factory=dict)
    output: str | None = None
    error: str | None = None
    exit_code: int | None = None
    interrupted: bool = False
    files: tuple[str, ...] = ()
    cwd: str | None = None
    prompt: str | None = None
    message: str | None = None
    stop_hook_active: bool = False
    permission_mode: str | None = None
    attended: bool | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)


def attended(dialect: str, env: Mapping[str, str]) -> bool | None:
    """Whether a person can answer the host's permission prompt, from the hook's environment.

    Claude Code sets ``CLAUDE_CODE_SESSION_ATTENDED`` (``0`` under ``claude -p``) and
    ``CLAUDE_CODE_ENTRYPOINT`` (``sdk-cli``, ``sdk-py``... when driven headless).
    """
    if dialect != "claude-code":
        return None
    flag = env.get("CLAUDE_CODE_SESSION_ATTENDED")
    if flag in ("0", "1"):
        return flag == "1"
    entry = env.get("CLAUDE_CODE_ENTRYPOINT") or ""
    return False if entry.startswith("sdk") else None


def parse_payload(data: bytes | str) -> dict[str, Any]:
    """Decode the hook input: a JSON object, or ``BadPayload`` saying what is wrong."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")  # the Unicode rule of steps (antiloop.core.step)
    if not data.strip():
        raise BadPayload("the hook input is empty (expected the event's JSON on stdin)")
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise BadPayload(f"the hook input is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise BadPayload(f"the hook input is a JSON {type(value).__name__}, not an object")
    return value


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _agent(payload: Mapping[str, Any]) -> str:
    agent_id = _str(payload.get("agent_id"))
    if agent_id is None:
        return MAIN_AGENT
    agent_type = _str(payload.get("agent_type"))
    return f"{agent_type}-{agent_id}" if agent_type else f"agent-{agent_id}"


def _blocks_text(blocks: list[Any]) -> str | None:
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            if isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif block.get("type") == "image":
                parts.append("[image]")
    return "\n".join(parts) if parts else None


def _without_volatile(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_volatile(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [_without_volatile(v) for v in value]
    return value


def response_text(tool: str, response: object) -> str | None:
    r"""The text a tool's structured result stands for, without the parts that vary per run.

    Example:
        >>> response_text("Bash", {"stdout": "ok", "stderr": "", "interrupted": False})
        'ok'
        >>> response_text("Glob", {"filenames": ["a.py", "b.py"], "durationMs": 3})
        'a.py\nb.py'
    """
    if response is None:
        return None
    if isinstance(response, str):
        return response[:_TEXT_CAP]
    if isinstance(response, list):
        text = _blocks_text(response)
        if text is not None:
            return text[:_TEXT_CAP]
    if isinstance(response, dict):
        text = _dict_text(tool, response)
        if text is not None:
            return text[:_TEXT_CAP]
    dumped = json.dumps(_without_volatile(response), sort_keys=True, ensure_ascii=False)
    return dumped[:_TEXT_CAP]


def _dict_text(tool: str, r: dict[str, Any]) -> str | None:
    if "stdout" in r or "stderr" in r:
        out = r.get("stdout") if isinstance(r.get("stdout"), str) else ""
        err = r.get("stderr") if isinstance(r.get("stderr"), str) else ""
        return "\n".join(p for p in (out, err) if p)
    file = r.get("file")
    if isinstance(file, dict) and isinstance(file.get("content"), str):
        return str(file["content"])  # Read
    if isinstance(r.get("content"), str) and tool in ("Grep", "Read"):
        return str(r["content"])
    if isinstance(r.get("filenames"), list) and not isinstance(r.get("content"), str):
        return "\n".join(str(f) for f in r["filenames"])  # Glob, Grep files mode
    if isinstance(r.get("content"), list):
        return _blocks_text(r["content"])  # Agent / Task, MCP results
    if tool in FILE_TOOLS and isinstance(r.get("filePath"), str):
        return f"The file {r['filePath']} has been updated."  # the model reads no more
    for key in ("result", "output", "llmContent"):
        value = r.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return _blocks_text(value)
    return None


def _shell_failure(text: str) -> tuple[str | None, int | None]:
    """(output, exit code) of a Claude Code Bash error ``Exit code N`` + output, else Nones."""
    match = _EXIT_CODE.match(text)
    if match is None:
        return None, None
    return text[match.end() :], int(match.group(1))


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def _files(tool: str, args: Mapping[str, Any]) -> tuple[str, ...]:
    keys = FILE_TOOLS.get(tool)
    if keys:
        for key in keys:
            path = _str(args.get(key))
            if path:
                return (path,)
        return ()
    if tool == "apply_patch":
        patch = next((v for v in args.values() if isinstance(v, str) and "*** " in v), "")
        found = [a or b for a, b in _PATCH_FILE.findall(patch)]
        return tuple(dict.fromkeys(p for p in found if p))
    return ()


def _codex_args(tool: str, args: Mapping[str, Any]) -> Mapping[str, Any]:
    """Codex sends a shell command as argv (``["bash", "-lc", "..."]``); keep the script."""
    command = args.get("command")
    if isinstance(command, list) and all(isinstance(w, str) for w in command):
        if len(command) >= 3 and command[1] in ("-lc", "-c") and command[0].endswith("sh"):
            return {**args, "command": command[2]}
        import shlex

        return {**args, "command": shlex.join(command)}
    return args


def normalize(dialect: str, payload: Mapping[str, Any]) -> HookEvent:
    """Turn one agent's hook payload into a ``HookEvent``.

    Raises:
        BadPayload: ``hook_event_name`` or ``session_id`` is missing or not a string.
    """
    if dialect not in _KINDS:
        raise ValueError(f"unknown agent {dialect!r}: use one of {', '.join(DIALECTS)}")
    name = payload.get("hook_event_name")
    if not isinstance(name, str) or not name:
        raise BadPayload("the hook input has no 'hook_event_name'", "hook_event_name")
    session = payload.get("session_id")
    if not isinstance(session, str) or not session:
        raise BadPayload(f"the {name} input has no 'session_id'", "session_id")
    kind = _KINDS[dialect].get(name, "other")
    common: dict[str, Any] = {
        "dialect": dialect,
        "name": name,
        "kind": kind,
        "session": session,
        "agent": _agent(payload),
        "cwd": _str(payload.get("cwd")),
        "permission_mode": _str(payload.get("permission_mode")),
    }
    detail = {
        k: payload[k]
        for k in (
            "source",
            "reason",
            "model",
            "agent_type",
            "agent_id",
            "transcript_path",
            "tool_use_id",
            "turn_id",
            "trigger",
        )
        if isinstance(payload.get(k), str | int | float)
    }
    common["detail"] = detail
    if kind in ("pre", "post"):
        return _tool_event(dialect, name, kind, payload, common)
    if kind == "prompt":
        return HookEvent(**common, prompt=_str(payload.get("prompt")))
    if kind == "stop":
        message = payload.get("last_assistant_message")
        if dialect == "gemini":
            message = payload.get("prompt_response")
        if isinstance(message, list):
            message = _blocks_text(message)
        return HookEvent(
            **common,
            message=message if isinstance(message, str) else None,
            stop_hook_active=payload.get("stop_hook_active") is True,
            prompt=_str(payload.get("prompt")),
        )
    return HookEvent(**common)


def _tool_event(
    dialect: str, name: str, kind: str, payload: Mapping[str, Any], common: dict[str, Any]
) -> HookEvent:
    tool = payload.get("tool_name")
    if not isinstance(tool, str) or not tool.strip():
        raise BadPayload(f"the {name} input has no 'tool_name'", "tool_name")
    raw_args = payload.get("tool_input")
    if isinstance(raw_args, str):  # some MCP and Cursor inputs arrive as a JSON string
        try:
            raw_args = json.loads(raw_args)
        except ValueError:
            raw_args = {"input": raw_args}
    if raw_args is not None and not isinstance(raw_args, dict):
        kind = type(raw_args).__name__
        raise BadPayload(
            f"the {name} input's 'tool_input' is a {kind}, not an object", "tool_input"
        )
    args: Mapping[str, Any] = raw_args if isinstance(raw_args, dict) else {}
    if dialect == "codex":
        args = _codex_args(tool, args)
    if kind == "pre":
        return HookEvent(**common, tool=tool, args=args)
    output: str | None = None
    error: str | None = None
    exit_code: int | None = None
    interrupted = payload.get("is_interrupt") is True
    if name == "PostToolUseFailure":
        text = payload.get("error")
        text = text if isinstance(text, str) else response_text(tool, text) or "error"
        text = _TOOL_USE_ERROR.sub("", text).strip() or "error"
        if tool in SHELL_TOOLS:
            output, exit_code = _shell_failure(text)
        if exit_code is None:
            error = text
    elif dialect == "gemini":
        output, error, exit_code = _gemini_result(tool, payload.get("tool_response"))
    elif (
        dialect == "codex" and tool in SHELL_TOOLS and isinstance(payload.get("tool_response"), str)
    ):
        from antiloop.hooks.results import codex_exit_code, codex_shell

        output, exit_code = codex_shell(payload["tool_response"][:_TEXT_CAP])
        if exit_code is None:
            exit_code = codex_exit_code(
                _str(payload.get("transcript_path")), _str(payload.get("tool_use_id"))
            )
    else:
        response = payload.get("tool_response")
        output = response_text(tool, response)
        if isinstance(response, dict):
            interrupted = interrupted or response.get("interrupted") is True
            code = _int(response.get("exit_code", response.get("exitCode")))
            exit_code = code
            if code is None and tool in SHELL_TOOLS and dialect == "claude-code":
                exit_code = 0  # Claude Code reports every non-zero exit as a failure
        elif dialect == "claude-code" and tool in SHELL_TOOLS:
            exit_code = 0
    return HookEvent(
        **common,
        tool=tool,
        args=args,
        output=output,
        error=error,
        exit_code=exit_code,
        interrupted=interrupted,
        files=_files(tool, args),
    )


def _gemini_result(tool: str, response: object) -> tuple[str | None, str | None, int | None]:
    if not isinstance(response, dict):
        return response_text(tool, response), None, None
    content = response.get("llmContent")
    text = content if isinstance(content, str) else None
    if isinstance(content, list):
        text = _blocks_text(content)
    elif isinstance(content, dict) and isinstance(content.get("text"), str):
        text = content["text"]
    from antiloop.hooks.results import gemini_shell, unwrap_untrusted

    exit_code = None
    error = None
    if text is not None and tool in SHELL_TOOLS:
        text, exit_code, error = gemini_shell(text)
    elif text is not None:
        text = unwrap_untrusted(text)
    raw_error = response.get("error")
    if isinstance(raw_error, dict):
        error = _str(raw_error.get("message")) or json.dumps(raw_error, sort_keys=True)
    elif isinstance(raw_error, str) and raw_error:
        error = raw_error
    return text, error, exit_code
