"""Claude Code transcripts: sessions and their subagents.

A session is ``~/.claude/projects/<project>/<session>.jsonl``; its subagents' transcripts are
``<session>/subagents/agent-<id>.jsonl``.
The line format is not documented by Anthropic; this follows what the CLI writes (reference
integrations.md section 1.6, checked against public transcripts). Each line is one JSON entry;
only ``type: "assistant"`` and ``type: "user"`` entries matter here, other kinds (``summary``,
``progress``, ``file-history-snapshot``, ``queue-operation``, ...) are skipped.

* **Step**: every ``tool_use`` block of an assistant entry, in file order (the CLI writes one
  entry per content block; parallel calls are several entries sharing ``message.id``). A
  ``tool_use`` id seen before is not counted again. Forks (``parentUuid``) are not resolved: the
  file order is the step order.
* **Tool / args**: the block's ``name`` and ``input``.
* **Result**: the ``tool_result`` block with the same ``tool_use_id`` in a user entry. Its text is
  ``output``; with ``is_error`` it is ``error`` instead. For ``Bash`` an error that starts
  ``Exit code N`` gives ``exit_code`` N and the rest is ``output`` (the command ran and failed); a
  Bash result without ``is_error`` has ``exit_code`` 0, as Claude Code reports every non-zero exit
  as an error. ``<tool_use_error>`` tags are removed from error text. A call no
  ``tool_result`` answers (an interrupted run) has no result: it is listed in
  ``Run.missing_results``, not read as empty.
* ``message``: the assistant text blocks of the same ``message.id`` written before the call (else
  its thinking), given to the first call of that message only, so parallel calls do not repeat it.
* ``goal``: the first user prompt (not a tool result, meta entry or slash-command echo).
* ``session``: ``sessionId`` (shared by a session and its subagents). ``agent``: ``"main"``; for
  a sidechain entry (a subagent transcript) ``<agentType>-<agentId>`` when the
  ``agent-<id>.meta.json`` beside the file names the type, else ``agent-<agentId>``; in the
  ``--output-format stream-json`` output of ``claude -p`` (entries with ``session_id`` and
  ``parent_tool_use_id``), a subagent's entry names the Task call that runs it:
  ``task-<parent_tool_use_id>``. Each subagent is its own stream.
* **Costs**: per step, the final ``usage`` of the message that made the call, on its first step
  (input counts cached and cache-creation tokens); ``costUSD`` where old transcripts have it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from antiloop.core.step import Step
from antiloop.traces._base import (
    Run,
    Source,
    StepCost,
    UnknownFormat,
    costs_or_empty,
    goal_text,
    integer,
    items,
    missing_reason,
    nonempty,
    number,
    obj,
    text,
)

ENTRY_KEYS = frozenset({"sessionId", "parentUuid", "uuid", "leafUuid", "isSidechain"})
SHELL_TOOLS = frozenset({"Bash", "PowerShell"})
MAIN_AGENT = "main"

_EXIT_CODE = re.compile(r"^Exit code (-?\d+)[ \t]*(?:\n|$)")
_TOOL_USE_ERROR = re.compile(r"</?tool_use_error>")
_NOT_A_PROMPT = ("<command-", "<local-command-", "Caveat:", "[Request interrupted")


def is_entry(value: object) -> bool:
    """Whether a decoded JSON line looks like a Claude Code transcript entry."""
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        return False
    if value["type"] in ("user", "assistant") and isinstance(value.get("message"), dict):
        return True
    return any(key in value for key in ENTRY_KEYS)


def block_text(content: object) -> str | None:
    """The text of a message or tool_result ``content``: a string, or its text blocks joined."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in items(content):
        block = obj(block)
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "image":
            parts.append("[image]")
    return "\n".join(parts) if parts else None


def _result(tool: str, block: dict[str, Any]) -> tuple[str | None, str | None, int | None]:
    """(output, error, exit_code) of one tool_result block."""
    body = block_text(block.get("content"))
    if block.get("is_error") is not True:
        return body, None, 0 if tool in SHELL_TOOLS else None
    body = _TOOL_USE_ERROR.sub("", body or "").strip()
    if tool in SHELL_TOOLS:
        code = _EXIT_CODE.match(body)
        if code:
            return body[code.end() :], None, int(code.group(1))
    return None, body or "error", None


def _prompt(entry: dict[str, Any]) -> str | None:
    """The user's own prompt text in an entry, or None for tool results and meta entries."""
    if entry.get("type") != "user" or entry.get("isMeta") or entry.get("isCompactSummary"):
        return None
    content = obj(entry.get("message")).get("content")
    if any(obj(b).get("type") == "tool_result" for b in items(content)):
        return None
    prompt = nonempty(block_text(content))
    if prompt is None or prompt.startswith(_NOT_A_PROMPT):
        return None
    return prompt


def _agent_type(source: Source) -> str | None:
    meta_path = source.path.with_name(source.stem + ".meta.json")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return nonempty(obj(meta).get("agentType"))


def _usage_cost(usage: dict[str, Any], dollars: float | None) -> StepCost:
    parts = [
        integer(usage.get(k))
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    ]
    known = [p for p in parts if p is not None]
    return StepCost(
        input_tokens=sum(known) if known else None,
        output_tokens=integer(usage.get("output_tokens")),
        cost_usd=dollars,
    )


def read_claude_code(source: Source) -> Iterator[Run]:
    """Yield the one run of a Claude Code transcript (main session or subagent)."""
    entries: list[dict[str, Any]] = []
    problems: list[str] = []
    for line_number, line in source.lines():
        try:
            value = json.loads(line)
        except ValueError as exc:
            problems.append(f"line {line_number}: not valid JSON ({exc})")
            continue
        if not isinstance(value, dict):
            problems.append(f"line {line_number}: not a JSON object")
            continue
        entries.append(value)
    if not any(is_entry(e) for e in entries):
        raise UnknownFormat(f"{source.path}: not a Claude Code transcript: no transcript entries")

    results: dict[str, dict[str, Any]] = {}
    usages: dict[str, tuple[dict[str, Any], float | None]] = {}
    for entry in entries:
        message = obj(entry.get("message"))
        if entry.get("type") == "user":
            for block in items(message.get("content")):
                block = obj(block)
                use_id = text(block.get("tool_use_id"))
                if block.get("type") == "tool_result" and use_id and use_id not in results:
                    results[use_id] = block
        elif entry.get("type") == "assistant" and text(message.get("id")):
            usages[message["id"]] = (obj(message.get("usage")), number(entry.get("costUSD")))

    goal = goal_text(next((p for e in entries if (p := _prompt(e))), None))
    agent_type = _agent_type(source)
    steps: list[Step] = []
    costs: list[StepCost] = []
    missing: list[int] = []
    seen: set[str] = set()
    said: dict[str, list[str]] = {}
    thought: dict[str, list[str]] = {}
    spoken: set[str] = set()
    models: list[str] = []
    agent_ids: list[str] = []
    for index, entry in enumerate(entries):
        if entry.get("type") != "assistant":
            continue
        message = obj(entry.get("message"))
        message_id = text(message.get("id")) or f"#{index}"
        model = nonempty(message.get("model"))
        if model and model not in models and not model.startswith("<"):
            models.append(model)
        for block in items(message.get("content")):
            block = obj(block)
            kind = block.get("type")
            if kind == "text" and nonempty(block.get("text")):
                said.setdefault(message_id, []).append(block["text"].strip())
            elif kind == "thinking" and nonempty(block.get("thinking")):
                thought.setdefault(message_id, []).append(block["thinking"].strip())
            if kind != "tool_use":
                continue
            use_id = text(block.get("id"))
            name = nonempty(block.get("name"))
            if name is None or (use_id is not None and use_id in seen):
                continue
            if use_id is not None:
                seen.add(use_id)
            first = message_id not in spoken
            spoken.add(message_id)
            words = said.get(message_id) or thought.get(message_id)
            result = results.get(use_id) if use_id is not None else None
            if result is None:
                missing.append(len(steps))
            output, error, exit_code = (
                _result(name, result) if result is not None else (None, None, None)
            )
            agent_id = nonempty(entry.get("agentId"))
            parent_call = nonempty(entry.get("parent_tool_use_id"))
            if entry.get("isSidechain") is True and agent_id:
                agent = f"{agent_type}-{agent_id}" if agent_type else f"agent-{agent_id}"
                if agent_id not in agent_ids:
                    agent_ids.append(agent_id)
            elif parent_call is not None:  # stream-json: a subagent's call, under its Task call
                agent = f"task-{parent_call}"
            else:
                agent = MAIN_AGENT
            steps.append(
                Step(
                    tool=name,
                    args=obj(block.get("input")),
                    session=nonempty(entry.get("sessionId")) or source.stem,
                    agent=agent,
                    output=output,
                    error=error,
                    exit_code=exit_code,
                    message="\n\n".join(words) if first and words else None,
                    goal=goal,
                    cwd=nonempty(entry.get("cwd")),
                )
            )
            usage, dollars = usages.get(message_id, ({}, None))
            costs.append(_usage_cost(usage, dollars) if first else StepCost())

    first_entry = next((e for e in entries if is_entry(e) and e.get("sessionId")), {})
    spent = [d for _, d in usages.values() if d is not None]
    meta: dict[str, Any] = {
        "session_id": nonempty(first_entry.get("sessionId")),
        "version": nonempty(first_entry.get("version")),
        "cwd": nonempty(first_entry.get("cwd")),
        "git_branch": nonempty(first_entry.get("gitBranch")),
        "model": models[0] if models else None,
        "agent_type": agent_type,
    }
    meta = {k: v for k, v in meta.items() if v is not None}
    if len(models) > 1:
        meta["models"] = models
    if agent_ids:
        meta["agent_ids"] = agent_ids
    yield Run(
        file=str(source.path),
        record=None,
        format="claude-code",
        steps=tuple(steps),
        costs=costs_or_empty(costs),
        total_cost_usd=sum(spent) if spent else None,
        meta=meta,
        problems=tuple(problems),
        missing_results=tuple(missing),
        partial_reason=missing_reason(missing, "no tool_result answers the tool_use"),
    )
