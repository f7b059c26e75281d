r"""Shell results as each CLI gives them to its hooks, read back into output and exit code.

Before any reading is made, the wrapper a CLI puts around a command's output is taken off, so
a fingerprint names the result as the tool gave it:

* **Gemini CLI** (0.61): ``llmContent`` is ``<untrusted_context>`` around ``Output: …`` followed
  by ``Error:``, ``Exit Code:`` (non-zero only), ``Signal:``, ``Background PIDs:`` and
  ``Process Group PGID:`` lines (``packages/core/src/tools/shell.ts``); ``(empty)`` stands for
  no output.
* **Codex CLI**: ``tool_response`` is a plain string. ``exec_command`` (0.171) gives the output
  alone; the exit code is read from the session's rollout (``transcript_path``), where Codex
  writes the finished command (``exit_code``) before it runs PostToolUse. The formatted forms
  the model reads (``Exit code: N`` / ``Wall time: …`` / ``Output:``, and ``Chunk ID: …`` /
  ``Process exited with code N`` / ``Output:``) are read too.

Example:
    >>> wrapped = "<untrusted_context>\nOutput: 2 a.ts\nProcess Group PGID: 7\n</untrusted_context>"
    >>> gemini_shell(wrapped)
    ('2 a.ts', None, None)
    >>> codex_shell("Exit code: 1\nWall time: 0.2 seconds\nOutput:\nno such file\n")
    ('no such file\n', 1)
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

__all__ = ["codex_exit_code", "codex_shell", "gemini_shell", "unwrap_untrusted"]

_UNTRUSTED = re.compile(r"^\s*<untrusted_context>\n?(.*?)\n?</untrusted_context>\s*$", re.S)
_GEMINI_HEAD = re.compile(r"^(?:Command|Directory): ")
_GEMINI_TAIL = re.compile(r"^(Error|Exit Code|Signal|Background PIDs|Process Group PGID): (.*)$")
_CODEX_HEAD = re.compile(
    r"^(?:(?:Exit code:|Process exited with code) ?(?P<code>-?\d+)|Wall time: [^\n]*"
    r"|Chunk ID: [^\n]*|Original token count: [^\n]*|Total output lines: [^\n]*)$"
)
_ROLLOUT_TAIL = 256 * 1024
_ROLLOUT_WAIT = 0.5


def unwrap_untrusted(text: str) -> str:
    """Gemini's ``<untrusted_context>`` wrapper taken off (the text as it is without one)."""
    match = _UNTRUSTED.match(text)
    return match.group(1) if match else text


def gemini_shell(text: str) -> tuple[str, int | None, str | None]:
    """(output, exit code, error) of Gemini's ``run_shell_command`` result text.

    Older releases put ``Command:`` and ``Directory:`` lines first and ``(none)`` for an empty
    section; both forms are read.
    """
    lines = unwrap_untrusted(text).rstrip("\n").split("\n")
    while lines and _GEMINI_HEAD.match(lines[0]):
        lines.pop(0)
    if not lines or not lines[0].startswith("Output: "):
        return unwrap_untrusted(text), None, None
    lines[0] = lines[0][len("Output: ") :]
    tail: dict[str, str] = {}
    while len(lines) > 1:
        found = _GEMINI_TAIL.match(lines[-1])
        if found is None:
            break
        if found.group(2) != "(none)":
            tail[found.group(1)] = found.group(2)
        lines.pop()
    output = "\n".join(lines)
    if output in ("(empty)", "(none)"):
        output = ""
    code = tail.get("Exit Code")
    exit_code = int(code) if code and code.lstrip("-").isdigit() else None
    error = tail.get("Error")
    if "Signal" in tail:
        error = f"{error + '; ' if error else ''}terminated by signal {tail['Signal']}"
    return output, exit_code, error


def codex_shell(text: str) -> tuple[str, int | None]:
    """(output, exit code) of a Codex shell result string; the code is None when not given."""
    head, sep, rest = text.partition("Output:\n")
    if not sep or not head.strip():
        return text, None
    code: int | None = None
    for line in head.splitlines():
        found = _CODEX_HEAD.match(line.strip())
        if found is None:
            return text, None  # not Codex's header: the output itself
        if found.group("code") is not None:
            code = int(found.group("code"))
    return rest, code


def codex_exit_code(transcript: str | None, call_id: str | None) -> int | None:
    """The exit code Codex wrote to its rollout for ``call_id``, or None.

    Codex writes the finished command (``item_completed``, or ``exec_command_end`` in older
    releases) just before it runs PostToolUse; the file is read a few times for half a second
    at most, in case the line is not flushed yet.
    """
    if not transcript or not call_id:
        return None
    path = Path(transcript)
    deadline = time.monotonic() + _ROLLOUT_WAIT
    while True:
        code = _rollout_exit(path, call_id)
        if code is not None or time.monotonic() >= deadline:
            return code
        time.sleep(0.05)


def _rollout_exit(path: Path, call_id: str) -> int | None:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - _ROLLOUT_TAIL))
            data = f.read()
    except OSError:
        return None
    needle = call_id.encode()
    for raw in reversed(data.splitlines()):
        if needle not in raw or b"exit_code" not in raw:
            continue
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        payload = entry.get("payload") if isinstance(entry, dict) else None
        if not isinstance(payload, dict):
            continue
        inner = payload.get("item")
        item: dict[str, Any] = inner if isinstance(inner, dict) else payload
        if call_id not in (item.get("id"), item.get("call_id"), payload.get("call_id")):
            continue
        code = item.get("exit_code")
        if isinstance(code, int) and not isinstance(code, bool):
            return code
    return None
