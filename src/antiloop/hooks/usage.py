"""The model usage behind one tool call, read from the host's transcript (for budgets).

Claude Code writes each content block of an assistant message as its own transcript line, all
with the message's ``id`` and its ``usage`` (the last line's is the final one; older releases
also wrote ``costUSD``). A message's usage is charged to its first tool call, once, as
``antiloop.traces.claude_code`` does: the other calls of the message carry none. Only the end
of the file is read: the message that made the call is among its last lines at PostToolUse.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["NO_USAGE", "claude_code_usage"]

Usage = tuple[int | None, int | None, float | None]
NO_USAGE: Usage = (None, None, None)
_TAIL = 1 << 20  # bytes read from the end of the transcript
_INPUT = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def claude_code_usage(transcript: str | None, tool_use_id: str | None) -> Usage:
    """``(tokens_in, tokens_out, cost_usd)`` of the message that made the call, or nones.

    ``tokens_in`` counts the prompt's cached tokens too. A call that is not the first of its
    message, or that the transcript's end does not show, has no usage.
    """
    if not transcript or not tool_use_id:
        return NO_USAGE
    lines = _tail(Path(transcript))
    needle = tool_use_id.encode()
    message_id = None
    for raw in reversed(lines):
        if needle in raw and b"tool_use" in raw:
            entry = _entry(raw)
            message = _message(entry)
            if any(b.get("id") == tool_use_id for b in _tool_uses(message)):
                message_id = message.get("id")
                break
    if not isinstance(message_id, str) or not message_id:
        return NO_USAGE
    mark = json.dumps(message_id).encode()
    first: str | None = None
    usage: dict[str, Any] = {}
    cost: float | None = None
    for raw in lines:
        if mark not in raw:
            continue
        entry = _entry(raw)
        message = _message(entry)
        if message.get("id") != message_id:
            continue
        for block in _tool_uses(message):
            first = first or block.get("id")
        if isinstance(message.get("usage"), dict):
            usage = message["usage"]
        dollars = entry.get("costUSD")
        if isinstance(dollars, int | float) and not isinstance(dollars, bool):
            cost = float(dollars)
    if first != tool_use_id:
        return NO_USAGE
    parts = [_count(usage.get(k)) for k in _INPUT]
    known = [p for p in parts if p is not None]
    return (sum(known) if known else None, _count(usage.get("output_tokens")), cost)


def _tail(path: Path) -> list[bytes]:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            start = max(0, size - _TAIL)
            f.seek(start)
            data = f.read()
    except OSError:
        return []
    lines = data.splitlines()
    return lines[1:] if start and lines else lines  # the first line may be cut


def _entry(raw: bytes) -> dict[str, Any]:
    try:
        entry = json.loads(raw)
    except ValueError:
        return {}
    return entry if isinstance(entry, dict) else {}


def _message(entry: dict[str, Any]) -> dict[str, Any]:
    if entry.get("type") != "assistant":
        return {}
    message = entry.get("message")
    return message if isinstance(message, dict) else {}


def _tool_uses(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]


def _count(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None
