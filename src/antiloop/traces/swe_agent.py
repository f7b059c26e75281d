"""SWE-agent ``.traj`` files: one JSON object with a ``trajectory`` list; each entry is a step.

Mapping (decided here, as the format stores only the action text):

* **Tool**: when the first word of ``action`` is a SWE-agent command (``SWE_AGENT_COMMANDS``, plus
  any tool name the file's own ``history`` tool calls use), that word is the tool. Otherwise the
  action is a shell command: tool ``bash`` with args ``{"command": <the whole action>}``. So is
  an interface command of PROTOCOL §3.1 (``INTERFACE_COMMANDS``: the file viewer, search and
  editor commands, which SWE-agent runs in its shell) written as text: the engine reads it as
  §3.1 says (a viewer shows file contents, an editor body compares verbatim).
* **Arguments** of a SWE-agent command: where the history holds the model's own tool call for
  this action (SWE-agent 1.x function calling), its JSON arguments. Otherwise they are parsed from
  the text: the known commands get named fields (``open`` -> ``path``, ``line_number``;
  ``search_dir`` -> ``search_term``, ``dir``; ``edit N:M`` -> ``start_line``, ``end_line``,
  ``replacement_text``; ...), any other command ``{"arguments": [words...]}``, plus ``"input"``
  for the lines after the first.
* **Result**: ``output`` is the observation (an entry without an observation string has no
  result: it is listed in ``Run.missing_results``, not read as empty). No exit code is stored.
  ``error`` is set only for the tool's own refusals, recognised by their first line: an edit
  rejected for syntax errors (``edit not applied: <the E-codes>``, the edit was not applied),
  ``Wrong flag!``, ``Usage: ...``, ``Error: ...``, ``File ... not found``, ``No file open``. A
  traceback printed by a program the agent ran is output, not error: without an exit code the
  reader cannot tell.
* ``paths``: the file open after the step (from ``state``) for the commands that act on the open
  file without naming it (``edit``, ``goto``, ``scroll_down``, ``scroll_up``, ``insert``,
  ``append``).
  ``cwd`` is ``state.working_dir``; ``message`` is ``thought``; ``goal`` is the issue text of the
  first non-demonstration user message; ``agent`` is the ``agent`` of the history's assistant
  message that issued the action (``primary``, ``main``; each role of a multi-agent run such as
  CodeR: ``Reproducer``, ``Programmer``...), else the first agent the history names.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from typing import Any

from antiloop.core.step import Step
from antiloop.traces._base import (
    Run,
    Source,
    UnknownFormat,
    goal_text,
    integer,
    items,
    json_object,
    missing_reason,
    nonempty,
    number,
    obj,
    require_dict,
    text,
)

SWE_AGENT_COMMANDS = frozenset(
    {
        # the default file viewer, search and edit tools
        "open",
        "goto",
        "scroll_down",
        "scroll_up",
        "create",
        "submit",
        "search_dir",
        "search_file",
        "find_file",
        "edit",
        "insert",
        "append",
        "filemap",
        "str_replace_editor",
        # EnIGMA (CTF) tools
        "decompile",
        "disassemble",
        "debug_start",
        "debug_add_breakpoint",
        "debug_continue",
        "debug_step",
        "debug_exec",
        "debug_stop",
        "connect_start",
        "connect_sendline",
        "connect_exec",
        "connect_stop",
        "exit_forfeit",
    }
)
"""First words of an action that name a SWE-agent command rather than a shell program."""

_SIGNATURES: dict[str, tuple[str, ...]] = {
    "open": ("path", "line_number"),
    "goto": ("line_number",),
    "scroll_down": (),
    "scroll_up": (),
    "create": ("filename",),
    "submit": (),
    "search_dir": ("search_term", "dir"),
    "search_file": ("search_term", "file"),
    "find_file": ("file_name", "dir"),
    "filemap": ("file_path",),
    "decompile": ("binary_path", "function_name"),
    "disassemble": ("binary_path", "function_name"),
}
_ON_OPEN_FILE = frozenset({"edit", "goto", "scroll_down", "scroll_up", "insert", "append"})
INTERFACE_COMMANDS = frozenset(
    {"open", "goto", "scroll_up", "scroll_down", "search_file", "search_dir", "find_file"}
    | {"edit", "create", "insert", "append"}
)
"""The commands PROTOCOL §3.1 classifies like programs when a shell runs them."""
_EDIT_RANGE = re.compile(r"^(\d+)\s*:\s*(\d+)$")
_SYNTAX_REJECTED = "Your proposed edit has introduced new syntax error"
_REFUSALS = (
    re.compile(r"^Wrong flag!"),
    re.compile(r"^Usage: "),
    re.compile(r"^Error: "),
    re.compile(r"^File .+ not found"),
    re.compile(r"^No file open"),
)


def _words(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError:
        return line.split()


def _int_or_str(word: str) -> int | str:
    return int(word) if word.isdigit() else word


def parse_action(
    action: str, known: frozenset[str] = SWE_AGENT_COMMANDS
) -> tuple[str, dict[str, Any]]:
    """Split a SWE-agent action into (tool, args), as the module docstring describes."""
    stripped = action.strip()
    first_line, _, body = stripped.partition("\n")
    words = first_line.split(None, 1)
    if not words or words[0] not in known:
        return "bash", {"command": stripped}
    tool = words[0]
    rest = words[1].strip() if len(words) > 1 else ""
    if tool == "edit":
        span = _EDIT_RANGE.match(rest)
        replacement = body.removesuffix("end_of_edit").removesuffix("\n")
        if span:
            return tool, {
                "start_line": int(span.group(1)),
                "end_line": int(span.group(2)),
                "replacement_text": replacement,
            }
        return tool, {"arguments": _words(rest), "replacement_text": replacement}
    parts = _words(rest)
    names = _SIGNATURES.get(tool)
    args: dict[str, Any]
    if names is not None and len(parts) <= len(names):
        args = {
            name: _int_or_str(word) if name == "line_number" else word
            for name, word in zip(names, parts, strict=False)
        }
    else:
        args = {"arguments": parts} if parts else {}
    if body:
        args["input"] = body
    return tool, args


def refusal(observation: str | None) -> str | None:
    """The error a SWE-agent tool reported in its observation, or None."""
    if not observation:
        return None
    body = observation.lstrip()
    first = body.split("\n", 1)[0].strip()
    if first.startswith(_SYNTAX_REJECTED):
        codes = [
            line.strip()[2:].strip()
            for line in body.split("\n")
            if line.strip().startswith("- ") and re.match(r"- [A-Z]\d+", line.strip())
        ]
        return "edit not applied: " + ("; ".join(codes) if codes else "syntax error")
    if any(p.match(first) for p in _REFUSALS):
        return first
    return None


def _state(value: object) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return obj(value)


def _content(message: dict[str, Any]) -> str | None:
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = [text(obj(p).get("text")) for p in items(content)]
    return "\n".join(p for p in parts if p) or None


def _issuers(history: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(action, agent) of each assistant message of the history that issued an action."""
    return [
        (action.strip(), agent)
        for h in history
        if h.get("role") == "assistant"
        and not h.get("is_demo")
        and (action := text(h.get("action"))) is not None
        and (agent := nonempty(h.get("agent")))
    ]


def _agent_of(action: str, issuers: list[tuple[str, str]], start: int) -> tuple[str | None, int]:
    """The agent that issued ``action`` at or after ``start`` in ``issuers``, and the next start."""
    wanted = action.strip()
    for j in range(start, len(issuers)):
        if issuers[j][0] == wanted:
            return issuers[j][1], j + 1
    return None, start


class _ToolCalls:
    """The model's own tool calls in ``history`` (SWE-agent 1.x), matched to actions in order."""

    def __init__(self, history: list[dict[str, Any]]) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        for entry in history:
            if entry.get("role") != "assistant" or entry.get("is_demo"):
                continue
            action = text(entry.get("action"))
            calls = items(entry.get("tool_calls"))
            if action is None or len(calls) != 1:
                continue
            function = obj(obj(calls[0]).get("function"))
            name = nonempty(function.get("name"))
            args = json_object(function.get("arguments"))
            if name and args is not None:
                self.calls.append((action.strip(), name, args))
        self.names = frozenset(name for _, name, _ in self.calls) - {"bash"}
        self._next = 0

    def match(self, action: str) -> tuple[str, dict[str, Any]] | None:
        wanted = action.strip()
        for j in range(self._next, len(self.calls)):
            if self.calls[j][0] == wanted:
                self._next = j + 1
                return self.calls[j][1], self.calls[j][2]
        return None


def read_swe_agent(source: Source) -> Iterator[Run]:
    """Yield the one run of a SWE-agent ``.traj`` file."""
    doc = require_dict(source, "SWE-agent")
    trajectory = doc.get("trajectory")
    if not isinstance(trajectory, list):
        raise UnknownFormat(f"{source.path}: not a SWE-agent trajectory: no 'trajectory' list")
    history = [obj(h) for h in items(doc.get("history"))]
    info = obj(doc.get("info"))
    agent = next((a for h in history if (a := nonempty(h.get("agent")))), "swe-agent")
    goal = goal_text(
        next(
            (
                _content(h)
                for h in history
                if h.get("role") == "user" and not h.get("is_demo") and _content(h)
            ),
            None,
        )
    )
    session = nonempty(info.get("instance_id")) or source.stem
    tool_calls = _ToolCalls(history)
    known = SWE_AGENT_COMMANDS | tool_calls.names
    issuers = _issuers(history)
    issued = 0
    steps: list[Step] = []
    missing: list[int] = []
    for raw in trajectory:
        entry = obj(raw)
        action = text(entry.get("action")) or ""
        tool, args = parse_action(action, known)
        command = tool
        called = tool_calls.match(action)
        if called is not None:
            tool, args = called
        elif tool in INTERFACE_COMMANDS:
            tool, args = "bash", {"command": action.strip()}
        state = _state(entry.get("state"))
        open_file = nonempty(state.get("open_file"))
        on_open = command in _ON_OPEN_FILE
        paths = (open_file,) if on_open and open_file and open_file != "n/a" else ()
        issuer, issued = _agent_of(action, issuers, issued)
        output = text(entry.get("observation"))
        if output is None:
            missing.append(len(steps))
        steps.append(
            Step(
                tool=tool,
                args=args,
                session=session,
                agent=issuer or agent,
                paths=paths,
                output=output,
                error=refusal(output),
                message=nonempty(entry.get("thought")),
                goal=goal,
                cwd=nonempty(state.get("working_dir")),
            )
        )
    stats = obj(info.get("model_stats"))
    meta = {
        "environment": text(doc.get("environment")),
        "exit_status": text(info.get("exit_status")),
        "submitted": bool(text(info.get("submission"))),
        "api_calls": integer(stats.get("api_calls")),
        "tokens_sent": integer(stats.get("tokens_sent")),
        "tokens_received": integer(stats.get("tokens_received")),
    }
    yield Run(
        file=str(source.path),
        record=None,
        format="swe-agent",
        steps=tuple(steps),
        costs=(),
        total_cost_usd=number(stats.get("instance_cost")),
        meta={k: v for k, v in meta.items() if v is not None},
        missing_results=tuple(missing),
        partial_reason=missing_reason(missing, "the entry has no observation text"),
    )
