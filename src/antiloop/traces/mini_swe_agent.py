"""mini-swe-agent trajectories: v1 (text actions) and v2 (OpenAI tool calls).

Both are one JSON object ``{"trajectory_format", "instance_id", "info", "messages"}``.

v1 (``"mini-swe-agent-1"``): the action is the body of the one ```` ```bash ```` block of an
assistant message; the next (user) message is its result. An assistant message with no block,
or several, or one followed by the format-error message, ran nothing and is no step.

v2 (``"mini-swe-agent-1.1"``): every entry of an assistant message's ``tool_calls`` is a step,
in order; its result is the ``role: "tool"`` message with the same ``tool_call_id``. The final
submission call has no tool message; the ``role: "exit"`` message that follows it is its result.

Each step is tool ``bash`` with args ``{"command": ...}``. The result text
``<returncode>N</returncode><output>...</output>`` (or its ``<output_head>``/``<output_tail>`` form)
gives ``exit_code`` and ``output``; an ``<exception>`` or a timeout notice gives ``error``. A
result with none of these tags (the submitted diff) is the output as it stands. A call with
no result message after it (a run cut short) has no result: it is listed in
``Run.missing_results``, not read as empty. ``message`` is
the assistant's text (v1: without the bash block and a leading ``THOUGHT:``); ``goal`` is the task
inside the first user message's ``<pr_description>``; ``cwd`` is ``info.config.environment.cwd``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from antiloop.core.step import Step
from antiloop.traces._base import (
    Run,
    Source,
    StepCost,
    costs_or_empty,
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
    usage_cost,
)

AGENT = "mini-swe-agent"
BASH_BLOCK = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
FORMAT_ERROR = "Please always provide EXACTLY ONE action"

MISSING_WHY = "no message after the call holds its result"

_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_EXCEPTION = re.compile(r"<exception>(.*?)</exception>", re.DOTALL)
_THOUGHT = re.compile(r"^\s*THOUGHT:\s*", re.IGNORECASE)


def _section(body: str, tag: str) -> str | None:
    """The text from the first ``<tag>`` to the last ``</tag>``, one newline trimmed each side."""
    start = body.find(f"<{tag}>")
    end = body.rfind(f"</{tag}>")
    if start < 0 or end < start:
        return None
    inner = body[start + len(tag) + 2 : end]
    inner = inner.removeprefix("\n")
    return inner.removesuffix("\n")


def parse_observation(body: str | None) -> tuple[str | None, str | None, int | None]:
    """Split a mini-swe-agent result text into (output, error, exit_code)."""
    if body is None:
        return None, None, None
    error: str | None = None
    exception = _EXCEPTION.search(body)
    if exception:
        error = exception.group(1).strip() or None
    first_line = body.split("\n", 1)[0]
    if first_line.startswith("The last command") and "timed out" in first_line:
        error = first_line.strip()
    code = _RETURNCODE.search(body)
    exit_code = int(code.group(1)) if code else None
    output = _section(body, "output")
    if output is None:
        head = _section(body, "output_head")
        tail = _section(body, "output_tail")
        if head is not None or tail is not None:
            elided = _section(body, "elided_chars")
            parts = [head, f"[{elided.strip()}]" if elided else None, tail]
            output = "\n".join(p for p in parts if p is not None)
    if output is None and exit_code is None and error is None:
        output = body
    return output, error, exit_code


def _config(info: dict[str, Any]) -> dict[str, Any]:
    return obj(info.get("config"))


def _meta(doc: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
    config = _config(info)
    stats = obj(info.get("model_stats"))
    meta: dict[str, Any] = {
        "trajectory_format": text(doc.get("trajectory_format")),
        "instance_id": text(doc.get("instance_id")),
        "model": text(obj(config.get("model")).get("model_name")),
        "exit_status": text(info.get("exit_status")),
        "mini_version": text(info.get("mini_version")),
        "api_calls": integer(stats.get("api_calls")),
        "submitted": bool(text(info.get("submission"))),
    }
    return {k: v for k, v in meta.items() if v is not None}


def _first_user(messages: list[dict[str, Any]]) -> str | None:
    for message in messages:
        if message.get("role") == "user":
            return _content(message)
    return None


def _content(message: dict[str, Any]) -> str | None:
    """A message's text: a string, or the text parts of a content list."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = [text(obj(p).get("text")) for p in items(content)]
    joined = "\n".join(p for p in parts if p)
    return joined or None


def _turn_cost(message: dict[str, Any]) -> StepCost:
    extra = obj(message.get("extra"))
    return usage_cost(obj(extra.get("response")).get("usage"), extra.get("cost"))


class _Context:
    """What every step of one run shares."""

    def __init__(self, source: Source, doc: dict[str, Any]) -> None:
        self.info = obj(doc.get("info"))
        self.messages = [obj(m) for m in items(doc.get("messages"))]
        self.session = nonempty(doc.get("instance_id")) or source.stem
        self.goal = goal_text(_first_user(self.messages))
        self.cwd = nonempty(obj(_config(self.info).get("environment")).get("cwd"))

    def step(self, command: str, result: str | None, message: str | None) -> Step:
        output, error, exit_code = parse_observation(result)
        return Step(
            tool="bash",
            args={"command": command},
            session=self.session,
            agent=AGENT,
            output=output,
            error=error,
            exit_code=exit_code,
            message=message,
            goal=self.goal,
            cwd=self.cwd,
        )


def _format_error_prefix(info: dict[str, Any]) -> str:
    """The start of the configured format-error message (before any template variable)."""
    template = text(obj(_config(info).get("agent")).get("format_error_template"))
    if template:
        prefix = template.split("{{", 1)[0].split("{%", 1)[0].strip()
        if len(prefix) >= 10:
            return prefix
    return FORMAT_ERROR


def _thought(content: str, block: re.Match[str]) -> str | None:
    rest = content[: block.start()] + content[block.end() :]
    return nonempty(_THOUGHT.sub("", rest.strip(), count=1))


def read_v1(source: Source) -> Iterator[Run]:
    """Yield the one run of a mini-swe-agent v1 (text action) trajectory."""
    doc = require_dict(source, "mini-swe-agent")
    ctx = _Context(source, doc)
    error_prefix = _format_error_prefix(ctx.info)
    messages = ctx.messages
    steps: list[Step] = []
    costs: list[StepCost] = []
    missing: list[int] = []
    for i, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        content = _content(message) or ""
        blocks = list(BASH_BLOCK.finditer(content))
        if len(blocks) != 1:
            continue
        following = messages[i + 1] if i + 1 < len(messages) else None
        result = _content(following) if following and following.get("role") != "assistant" else None
        if result is not None and result.lstrip().startswith(error_prefix):
            continue
        if result is None:
            missing.append(len(steps))
        steps.append(ctx.step(blocks[0].group(1), result, _thought(content, blocks[0])))
        costs.append(_turn_cost(message))
    yield _run(source, doc, ctx, "mini-swe-agent-1", steps, costs, [], missing)


def read_v2(source: Source) -> Iterator[Run]:
    """Yield the one run of a mini-swe-agent v2 (tool calling) trajectory."""
    doc = require_dict(source, "mini-swe-agent")
    ctx = _Context(source, doc)
    messages = ctx.messages
    results: dict[str, str | None] = {}
    for message in messages:
        call_id = text(message.get("tool_call_id"))
        if message.get("role") == "tool" and call_id is not None and call_id not in results:
            results[call_id] = _content(message)
    steps: list[Step] = []
    costs: list[StepCost] = []
    problems: list[str] = []
    missing: list[int] = []
    for i, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        thought = nonempty(_content(message))
        for n, call in enumerate(items(message.get("tool_calls"))):
            call = obj(call)
            function = obj(call.get("function"))
            raw = function.get("arguments")
            args = json_object(raw)
            command = text(obj(args).get("command"))
            if command is None:
                problems.append(f"message {i}: tool call {n} has no 'command' argument")
                command = raw if isinstance(raw, str) else ""
            call_id = text(call.get("id"))
            if call_id is not None and call_id in results:
                result = results[call_id]
            else:
                result = _exit_result(messages, i)
            if result is None:
                missing.append(len(steps))
            step = ctx.step(command, result, thought if n == 0 else None)
            name = nonempty(function.get("name"))
            if name and name != "bash":
                extra = {k: v for k, v in obj(args).items() if k != "command"}
                step = replace(step, tool=name, args={"command": command, **extra})
            steps.append(step)
            costs.append(_turn_cost(message) if n == 0 else StepCost())
    yield _run(source, doc, ctx, "mini-swe-agent-2", steps, costs, problems, missing)


def _exit_result(messages: list[dict[str, Any]], index: int) -> str | None:
    """The ``role: "exit"`` message that ends the run, when it follows a call with no result."""
    for message in messages[index + 1 :]:
        role = message.get("role")
        if role == "exit":
            return _content(message)
        if role in ("assistant", "tool"):
            return None
    return None


def _run(
    source: Source,
    doc: dict[str, Any],
    ctx: _Context,
    fmt: str,
    steps: list[Step],
    costs: list[StepCost],
    problems: list[str],
    missing: list[int],
) -> Run:
    stats = obj(ctx.info.get("model_stats"))
    return Run(
        file=str(source.path),
        record=None,
        format=fmt,
        steps=tuple(steps),
        costs=costs_or_empty(costs),
        total_cost_usd=number(stats.get("instance_cost")),
        meta={**_meta(doc, ctx.info), **({"cwd": ctx.cwd} if ctx.cwd else {})},
        problems=tuple(problems),
        missing_results=tuple(missing),
        partial_reason=missing_reason(missing, MISSING_WHY),
    )
