"""An independent labeller of loops in recorded runs: PROTOCOL §3-§5 read afresh, stdlib only.

It shares no code with antiloop (no import of it): it reads the raw files itself and applies its
own reading of the rule, so that where it and the scanner agree, the agreement is evidence, and
where they disagree, a person reads the run (bench/second_family/README.md says what was found).

What it labels: the first step of each run where the loop rule fires (§5: the same procedure
with the same result twice in a row in one stream) or a cycle (the last 2p steps are two copies
of a p-step sequence, 2 <= p <= 4, equal in procedure and result). Stagnation and failure
streaks are not labelled (the first needs an embedder; the second asks, it does not stop).

Its reading, kept deliberately plain:

* procedure: the tool name (lower case) and its arguments. A shell command (``bash``/``Bash``)
  compares as its words (``shlex``), after a leading ``cd DIR &&``; a command of several lines
  as the words of each line, comments dropped; one with a body (a heredoc, an editor's text up
  to ``end_of_…``, a quote over lines) or one ``shlex`` cannot split compares verbatim
  (trailing spaces aside); a command of comments only is no words (the shell runs nothing).
  SWE-agent's interface commands are kinds of their own (PROTOCOL §3.1: a file viewer reads, an
  editor edits) and act on the open file. Other tools compare by their arguments as canonical
  JSON, with path values made relative to the working directory and stripped of ``./`` and
  trailing ``/``, and string values stripped of surrounding space.
* result: the same when the text is identical, or identical once volatile values are masked
  (durations, clock times, dates, hex addresses, temporary paths, a shell's own line counter,
  process ids), or, for search and list tools, the same set of lines. Two results whose exit
  codes are both known and differ are never the same; nor are two whose first error lines
  (run tools only) are both found and differ.
* a call with no result recorded is never the same result as another.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ALLOWED = frozenset({"sleep", "wait"})
SEARCH_TOOLS = frozenset({"grep", "glob", "ls", "find", "search_files", "list_files"})
READ_TOOLS = frozenset({"read", "notebookread", "view"})
EDIT_TOOLS = frozenset({"edit", "multiedit", "write", "notebookedit", "str_replace_based_edit"})
PATH_KEYS = frozenset({"path", "file_path", "filepath", "file", "filename", "dir", "directory"})
SHELLS = frozenset({"bash", "shell", "sh", "terminal"})

_MASKS = [
    (re.compile(r"\b\d+(\.\d+)?\s?(ms|s|sec|seconds|µs|us|ns|m|min)\b"), "<dur>"),
    (re.compile(r"\b\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?\b"), "<time>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}([T ][\d:.]+Z?)?\b"), "<date>"),
    (re.compile(r"\b0x[0-9a-fA-F]{4,}\b"), "<hex>"),
    (re.compile(r"/tmp/[\w./-]+"), "<tmp>"),
    (re.compile(r"(bash|sh|zsh|dash|-c): line \d+:"), r"\1: line N:"),
    (re.compile(r"\bsh: \d+:"), "sh: N:"),
    (re.compile(r"\b(pid|PID|process) \d+\b"), r"\1 <n>"),
]
_ERROR = re.compile(
    r"(\b(error|exception|fatal)\b|\b\w+(Error|Exception):|^(FAILED|FAIL|--- FAIL)|timed out)",
    re.IGNORECASE | re.MULTILINE,
)
_NO_ERROR = re.compile(r"(error: \(none\)|\b0 errors?\b|\bno errors?\b)", re.IGNORECASE)


@dataclass(frozen=True)
class Call:
    """One step as the labeller sees it."""

    stream: str
    tool: str
    procedure: str
    kind: str  # "run", "search", "read", "edit", "other"
    text: str | None  # the result text; None when no result was recorded
    exit_code: int | None


def mask(text: str) -> str:
    for pattern, repl in _MASKS:
        text = pattern.sub(repl, text)
    return text


def error_line(text: str) -> str | None:
    for line in text.splitlines():
        if _ERROR.search(line) and not _NO_ERROR.search(line):
            return mask(line.strip())
    return None


def same_result(a: Call, b: Call) -> bool:
    if a.text is None or b.text is None:
        return False
    if a.exit_code is not None and b.exit_code is not None and a.exit_code != b.exit_code:
        return False
    if a.kind == "run":
        ea, eb = error_line(a.text), error_line(b.text)
        if ea is not None and eb is not None and ea != eb:
            return False
    if a.text == b.text or mask(a.text) == mask(b.text):
        return True
    if a.kind == "search":
        return {mask(x) for x in a.text.splitlines()} == {mask(x) for x in b.text.splitlines()}
    if a.kind == "run":
        ea = error_line(a.text)
        return ea is not None and ea == error_line(b.text)
    return False


def same(a: Call, b: Call) -> bool:
    return a.stream == b.stream and a.procedure == b.procedure and same_result(a, b)


def shell_procedure(command: str) -> str:
    body = command.rstrip()
    if all(not line.strip() or line.lstrip().startswith("#") for line in body.splitlines()):
        return ""  # only comments: the shell runs nothing, whatever they say
    if "\n" in body.strip() and "<<" not in body and "end_of_" not in body:
        try:  # lines of commands, each its words; a comment is no words
            lines = [shlex.split(line, comments=True) for line in body.splitlines()]
            return " ; ".join(" ".join(words) for words in lines if words)
        except ValueError:
            pass  # a quote that spans lines: verbatim
    if "\n" in body.strip():
        return "\n".join(line.rstrip() for line in body.strip("\n").splitlines())
    body = re.sub(r"^\s*cd\s+\S+\s*&&\s*", "", body)
    try:
        return " ".join(shlex.split(body))
    except ValueError:
        return body.strip()


def shell_kind(command: str) -> str:
    words = command.strip().split()
    first = words[0] if words else ""
    if first in {"grep", "rg", "find", "ls", "ag"}:
        return "search"
    if first in {"cat", "head", "tail", "nl"} or command.startswith("sed -n"):
        return "read"
    return "run"


def json_procedure(args: dict[str, Any], cwd: str | None) -> str:
    def norm(key: str, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip()
            if key in PATH_KEYS:
                if cwd and value.startswith(cwd.rstrip("/") + "/"):
                    value = value[len(cwd.rstrip("/")) + 1 :]
                while value.startswith("./"):
                    value = value[2:]
                value = re.sub(r"/+", "/", value).rstrip("/") or value
        if isinstance(value, dict):
            return {k: norm(k, v) for k, v in value.items()}
        if isinstance(value, list):
            return [norm(key, v) for v in value]
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value

    return json.dumps(norm("", args), sort_keys=True, separators=(",", ":"))


# --- reading the raw files -------------------------------------------------------------------


def _block_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            c.get("text", "") for c in content if isinstance(c, dict) and c.get("type") == "text"
        )
    return ""


def claude_code_calls(path: Path) -> list[Call]:
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            entries.append(value)
    results: dict[str, dict[str, Any]] = {}
    for e in entries:
        if e.get("type") == "user" and isinstance(e.get("message"), dict):
            for block in e["message"].get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    results.setdefault(block.get("tool_use_id", ""), block)
    calls: list[Call] = []
    seen: set[str] = set()
    for e in entries:
        message = e.get("message")
        if e.get("type") != "assistant" or not isinstance(message, dict):
            continue
        for block in message.get("content") or []:
            if not isinstance(block, dict) or block.get("type") != "tool_use":
                continue
            use_id = block.get("id")
            if not block.get("name") or use_id in seen:
                continue
            seen.add(use_id)
            name = str(block["name"])
            args = block.get("input") if isinstance(block.get("input"), dict) else {}
            stream = e.get("agentId") if e.get("isSidechain") is True else "main"
            result = results.get(use_id)
            text = None if result is None else _block_text(result.get("content"))
            exit_code = None
            if name == "Bash" and result is not None:
                exit_code = 0
                if result.get("is_error") is True:
                    m = re.match(r"\s*Exit code (\d+)", text or "")
                    exit_code = int(m.group(1)) if m else None
            if name == "Bash":
                command = str(args.get("command", ""))
                procedure = "bash:" + shell_procedure(command)
                kind = shell_kind(command)
            else:
                low = name.lower()
                procedure = low + ":" + json_procedure(args, e.get("cwd"))
                kind = (
                    "search"
                    if low in SEARCH_TOOLS
                    else "read"
                    if low in READ_TOOLS
                    else "edit"
                    if low in EDIT_TOOLS
                    else "other"
                )
            calls.append(Call(str(stream), name, procedure, kind, text, exit_code))
    return calls


_RC = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")


def mini_swe_agent_calls(path: Path) -> list[Call]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    messages = [m for m in doc.get("messages", []) if isinstance(m, dict)]
    tool_results = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
    calls: list[Call] = []
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        if m.get("tool_calls"):
            for call in m["tool_calls"]:
                try:
                    args = json.loads(call["function"]["arguments"])
                    command = str(args["command"])
                except (KeyError, TypeError, ValueError):
                    command = str(call.get("function", {}).get("arguments", ""))
                result = tool_results.get(call.get("id"))
                text = _block_text(result.get("content")) if result else None
                if result is None:
                    following = messages[i + 1 :]
                    exits = [x for x in following if x.get("role") == "exit"]
                    if exits and not any(x.get("role") == "assistant" for x in following[:1]):
                        text = _block_text(exits[0].get("content"))
                calls.append(_bash_call(command, text))
        else:
            content = _block_text(m.get("content"))
            blocks = re.findall(r"```bash\s*\n(.*?)\n```", content, re.DOTALL)
            if len(blocks) != 1:
                continue
            following = messages[i + 1] if i + 1 < len(messages) else None
            text = None
            if following is not None and following.get("role") != "assistant":
                text = _block_text(following.get("content"))
                if text.lstrip().startswith("Please always provide EXACTLY ONE action"):
                    continue
            calls.append(_bash_call(blocks[0], text))
    return calls


def _bash_call(command: str, text: str | None) -> Call:
    code = None
    if text is not None:
        m = _RC.search(text)
        code = int(m.group(1)) if m else None
    return Call("main", "bash", "bash:" + shell_procedure(command), shell_kind(command), text, code)


_SKIPPED = frozenset({"system", "message", "recall", "change_agent_state", "null"})


def openhands_calls(events: list[dict[str, Any]]) -> list[Call]:
    """An OpenHands (V0) event history: agent actions and the observations they caused."""
    caused = {}
    for e in events:
        if "observation" in e and isinstance(e.get("cause"), int):
            caused.setdefault(e["cause"], e)
    calls: list[Call] = []
    for e in events:
        action = e.get("action")
        if e.get("source") != "agent" or not isinstance(action, str) or action in _SKIPPED:
            continue
        meta = e.get("tool_call_metadata") or {}
        tool = str(meta.get("function_name") or action)
        args = {k: v for k, v in (e.get("args") or {}).items() if k not in ("thought",)}
        obs = caused.get(e.get("id"))
        text = obs.get("content") if obs and isinstance(obs.get("content"), str) else None
        if obs is not None and obs.get("observation") == "error":
            text = "ERROR " + (text or "")
        code = ((obs or {}).get("extras") or {}).get("metadata", {}) or {}
        exit_code = code.get("exit_code") if isinstance(code, dict) else None
        if action == "run":
            command = str(args.get("command", ""))
            calls.append(
                Call(
                    "main",
                    tool,
                    "bash:" + shell_procedure(command),
                    shell_kind(command),
                    text,
                    exit_code if isinstance(exit_code, int) else None,
                )
            )
        else:
            keep = {
                k: v
                for k, v in args.items()
                if k
                in (
                    "path",
                    "command",
                    "old_str",
                    "new_str",
                    "file_text",
                    "view_range",
                    "insert_line",
                    "content",
                    "message",
                )
            }
            kind = "read" if keep.get("command") == "view" or action == "read" else "edit"
            calls.append(
                Call("main", tool, tool + ":" + json_procedure(keep, None), kind, text, None)
            )
    return calls


# SWE-agent's interface commands (PROTOCOL §3.1, v1.2): a file viewer reads, the search commands
# search (``find_file`` lists), the editor commands edit; any other first word is a shell program.
ACI_KINDS = {
    **dict.fromkeys(("open", "goto", "scroll_up", "scroll_down"), "read"),
    **dict.fromkeys(("search_file", "search_dir", "find_file"), "search"),
    **dict.fromkeys(("edit", "create", "insert", "append"), "edit"),
}
# the commands that act on the open file without naming it: the file is part of their context
ON_OPEN_FILE = frozenset({"goto", "scroll_up", "scroll_down", "edit", "insert", "append"})


def _swe_state(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def swe_agent_calls(path: Path) -> list[Call]:
    """A SWE-agent ``.traj``: each ``trajectory`` entry is a step; its agent is the ``agent`` of
    the history's assistant message that issued the same action (multi-agent runs such as CodeR
    name one per role), else one stream."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    issued = [
        m
        for m in doc.get("history") or []
        if isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("action"), str)
    ]
    calls: list[Call] = []
    cursor = 0
    for entry in doc.get("trajectory") or []:
        if not isinstance(entry, dict):
            continue
        action = str(entry.get("action") or "")
        stream = "main"
        for j in range(cursor, len(issued)):
            if issued[j]["action"].strip() == action.strip():
                stream = str(issued[j].get("agent") or "main")
                cursor = j + 1
                break
        observation = entry.get("observation")
        text = observation if isinstance(observation, str) else None
        first = action.strip().split(maxsplit=1)[0] if action.strip() else ""
        kind = ACI_KINDS.get(first) or shell_kind(action)
        context = ""
        if first in ON_OPEN_FILE:
            context = str(_swe_state(entry.get("state")).get("open_file") or "")
        procedure = "bash:" + shell_procedure(action) + ("@" + context if context else "")
        calls.append(Call(stream, first or "bash", procedure, kind, text, None))
    return calls


def runs_of(path: Path) -> list[list[Call]]:
    """The runs of one file, each as its calls: Claude Code JSONL, OpenHands eval JSONL, a
    SWE-agent ``.traj``, or a mini-swe-agent trajectory."""
    if path.suffix == ".jsonl":
        first = path.read_text(encoding="utf-8").split("\n", 1)[0]
        try:
            head = json.loads(first)
        except ValueError:
            head = {}
        if isinstance(head, dict) and isinstance(head.get("history"), list):
            return [
                openhands_calls([e for e in json.loads(line)["history"] if isinstance(e, dict)])
                for line in path.read_text(encoding="utf-8").splitlines()
                if line.strip()
            ]
        return [claude_code_calls(path)]
    if path.suffix == ".traj":
        return [swe_agent_calls(path)]
    return [mini_swe_agent_calls(path)]


def calls_of(path: Path) -> list[Call]:
    """The calls of a one-run file."""
    return runs_of(path)[0]


# --- the rule --------------------------------------------------------------------------------


def _exempt(call: Call) -> bool:
    words = call.procedure.split(":", 1)[-1].split()
    return call.tool.lower() in ALLOWED or (bool(words) and words[0] in ALLOWED)


def first_loop(calls: list[Call]) -> int | None:
    """The first step where the loop rule or a cycle fires, or None."""
    streams: dict[str, list[tuple[int, Call]]] = {}
    for index, call in enumerate(calls):
        if _exempt(call):
            continue
        seen = streams.setdefault(call.stream, [])
        seen.append((index, call))
        if len(seen) >= 2 and same(seen[-2][1], call):
            return index
        for p in (2, 3, 4):
            if len(seen) < 2 * p:
                continue
            tail = [c for _, c in seen[-2 * p :]]
            first, second = tail[:p], tail[p:]
            if all(same(x, y) for x, y in zip(first, second, strict=True)) and not _repeats(first):
                return index
    return None


def _repeats(sequence: list[Call]) -> bool:
    """Whether a sequence is itself a repetition of a shorter one (not primitive)."""
    n = len(sequence)
    return any(
        n % q == 0 and all(same(sequence[i], sequence[i % q]) for i in range(n))
        for q in range(1, n)
    )


def label(path: Path) -> Iterator[dict[str, Any]]:
    calls = calls_of(path)
    yield {"steps": len(calls), "first_loop": first_loop(calls)}
