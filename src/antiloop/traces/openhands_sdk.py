"""OpenHands agent SDK (``openhands-sdk``, the V1 event schema) conversations.

The SDK records a conversation as a list of events, each a JSON object with a ``kind``
(``SystemPromptEvent``, ``MessageEvent``, ``ActionEvent``, ``ObservationEvent``,
``AgentErrorEvent``, ``UserRejectObservation``, ``ConversationStateUpdateEvent``, ...). It is
read in each of the shapes the SDK and its tools write:

* a persisted conversation: a folder with ``base_state.json`` and ``events/event-NNNNN-<id>.json``
  (one event per file, in index order); the folder or its ``events`` folder is one run;
* a JSON list of events (``[e.model_dump(mode="json") for e in conversation.state.events]``), or
  the agent server's event page ``{"items": [events], ...}``;
* JSON lines with one event per line;
* eval output (the OpenHands benchmarks' ``EvalOutput``): one record per line, or one record,
  ``{"instance_id", "instruction", "metadata", "history": [events], "metrics", "error", ...}``.

Steps are the ``ActionEvent`` records whose ``action`` is set, in list order: one per tool call
(a response with parallel tool calls gives several, in the order of its calls). An
``ActionEvent`` with ``action: null`` is a tool call the SDK refused before running it (an
unknown tool, arguments that do not validate): it is no step, and is listed with its error in
``meta["rejected_calls"]``.

* **Tool**: ``tool_name`` (``terminal``, ``file_editor``, ``finish``, ``think``, ...).
* **Arguments**: the model's own arguments, ``tool_call.arguments`` decoded, without the SDK's
  ``security_risk`` and ``summary``; else the ``action`` without its ``kind``.
* **Result**: the event answering the call: an ``ObservationEvent`` (by ``action_id``, else
  ``tool_call_id``) gives ``output``, the text items of ``observation.content`` joined, or
  ``error`` when ``observation.is_error``; ``exit_code`` is ``observation.exit_code`` (else
  ``observation.metadata.exit_code``, kept as recorded, -1 included) and ``cwd`` is
  ``observation.metadata.working_dir``. An ``AgentErrorEvent`` gives ``error``; a
  ``UserRejectObservation`` gives ``error`` ``"Action rejected: <reason>"``.
* ``message`` is the call's ``thought`` text (the SDK keeps it on the first call of a
  response), else a ``finish`` action's ``message``. ``goal`` is the eval record's
  ``instruction``, else the first user ``MessageEvent``. ``agent`` is ``"openhands"``.
* **Usage**: where the run's metrics are kept (the eval record's ``metrics``, or
  ``base_state.json``'s ``stats.usage_to_metrics``), each response's tokens (``token_usages``
  by ``response_id``) and cost go to the first step of that response.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from antiloop.events import Step
from antiloop.traces._base import (
    Run,
    Source,
    StepCost,
    UnknownFormat,
    costs_or_empty,
    goal_text,
    integer,
    items,
    json_object,
    nonempty,
    number,
    obj,
    text,
)

FORMAT = "openhands-sdk"
AGENT = "openhands"

EVENT_KINDS = frozenset(
    {
        "ACPToolCallEvent",
        "ActionEvent",
        "AgentErrorEvent",
        "Condensation",
        "CondensationRequest",
        "CondensationSummaryEvent",
        "ConversationErrorEvent",
        "ConversationStateUpdateEvent",
        "HookExecutionEvent",
        "InterruptEvent",
        "LLMCompletionLogEvent",
        "MessageEvent",
        "ObservationEvent",
        "PauseEvent",
        "SecurityAnalysisEvent",
        "StreamingDeltaEvent",
        "SystemPromptEvent",
        "TokenEvent",
        "UserRejectObservation",
    }
)
"""The event kinds of ``openhands.sdk.event`` (1.x)."""

RESULT_KINDS = frozenset({"ObservationEvent", "AgentErrorEvent", "UserRejectObservation"})
NOT_STEPS = frozenset(
    {
        "SystemPromptEvent",
        "MessageEvent",
        "ConversationStateUpdateEvent",
        "Condensation",
        "CondensationRequest",
        "CondensationSummaryEvent",
        "ConversationErrorEvent",
        "PauseEvent",
        "InterruptEvent",
        "TokenEvent",
        "LLMCompletionLogEvent",
        "StreamingDeltaEvent",
        "HookExecutionEvent",
        "SecurityAnalysisEvent",
    }
)
"""Kinds that are no tool call of the agent (their absence of steps is expected)."""

SDK_ARGS = frozenset({"security_risk", "summary"})
"""Keys the SDK asks the model for besides a tool's parameters."""

EVENT_FILE = re.compile(r"^event-\d{5,}-[0-9a-fA-F\-]{8,}\.json$")
"""A persisted conversation's event file name (``event-00003-<uuid>.json``)."""

BASE_STATE = "base_state.json"


def kind_of(event: object) -> str | None:
    """The SDK event kind of a decoded JSON value, or None when it is no SDK event.

    The ``kind`` field names it; an event written without one is known by the fields only
    SDK events have (``tool_name`` with ``tool_call_id``, ``llm_message``, ``system_prompt``).
    """
    if not isinstance(event, dict):
        return None
    kind = event.get("kind")
    if isinstance(kind, str):
        return kind if kind in EVENT_KINDS else None
    if "tool_name" in event and "tool_call_id" in event:
        if "tool_call" in event and "llm_response_id" in event:
            return "ActionEvent"
        if "observation" in event:
            return "ObservationEvent"
        if "error" in event:
            return "AgentErrorEvent"
        if "rejection_reason" in event:
            return "UserRejectObservation"
    if "source" in event:
        if "llm_message" in event:
            return "MessageEvent"
        if "system_prompt" in event:
            return "SystemPromptEvent"
    return None


def is_event_list(value: object) -> bool:
    """Whether a decoded JSON value is a non-empty list whose first objects are SDK events."""
    if not isinstance(value, list) or not value:
        return False
    head = [e for e in value[:20] if isinstance(e, dict)]
    return bool(head) and all(kind_of(e) is not None for e in head)


def event_page(value: object) -> list[Any] | None:
    """The events of a decoded value that is an SDK event list or an ``{"items": [...]}`` page."""
    if is_event_list(value):
        assert isinstance(value, list)  # noqa: S101 - narrowing for the type checker
        return value
    if isinstance(value, dict) and is_event_list(value.get("items")):
        return list(value["items"])
    return None


def is_eval_record(value: object) -> bool:
    """Whether a decoded value is an eval record whose ``history`` holds SDK events."""
    return isinstance(value, dict) and is_event_list(value.get("history"))


def is_conversation_dir(path: Path) -> bool:
    """Whether a folder is a persisted SDK conversation (or its ``events`` folder)."""
    events = path if path.name == "events" else path / "events"
    if not events.is_dir():
        return False
    if path.name != "events" and not (path / BASE_STATE).is_file():
        return False
    return any(EVENT_FILE.match(p.name) for p in events.iterdir())


def is_event_file(path: Path) -> bool:
    """Whether a file is one event file of a persisted SDK conversation."""
    return path.parent.name == "events" and bool(EVENT_FILE.match(path.name))


# --- one run ---------------------------------------------------------------------------------


def _texts(content: object) -> str:
    """The text items of an SDK content list joined (``[{"type": "text", "text": ...}]``)."""
    if isinstance(content, str):
        return content
    parts = [text(obj(c).get("text")) for c in items(content) if obj(c).get("type") == "text"]
    return "".join(p for p in parts if p)


def _arguments(event: dict[str, Any]) -> dict[str, Any]:
    args = json_object(obj(event.get("tool_call")).get("arguments"))
    if args is None:
        args = {k: v for k, v in obj(event.get("action")).items() if k != "kind"}
    return {k: v for k, v in args.items() if k not in SDK_ARGS}


def _result_fields(result: dict[str, Any]) -> dict[str, Any]:
    """Step fields from the event that answers a call (empty when there is none)."""
    kind = kind_of(result)
    if kind == "AgentErrorEvent":
        return {"error": text(result.get("error")) or "error"}
    if kind == "UserRejectObservation":
        reason = text(result.get("rejection_reason")) or "rejected"
        return {"error": f"Action rejected: {reason}"}
    if kind != "ObservationEvent":
        return {}
    observation = obj(result.get("observation"))
    metadata = obj(observation.get("metadata"))
    content = _texts(observation.get("content"))
    exit_code = integer(observation.get("exit_code"))
    if exit_code is None:
        exit_code = integer(metadata.get("exit_code"))
    fields: dict[str, Any] = {"exit_code": exit_code, "cwd": nonempty(metadata.get("working_dir"))}
    if observation.get("is_error") is True:
        fields["error"] = content or "error"
    else:
        fields["output"] = content
    return fields


def _results(events: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """For each action's position, the first later event that answers it."""
    by_id: dict[str, int] = {}
    open_calls: dict[str, int] = {}
    answered: dict[int, dict[str, Any]] = {}
    for position, event in enumerate(events):
        kind = kind_of(event)
        if kind == "ActionEvent":
            event_id = text(event.get("id"))
            if event_id is not None:
                by_id[event_id] = position
            call_id = text(event.get("tool_call_id"))
            if call_id is not None:
                open_calls[call_id] = position
        elif kind in RESULT_KINDS:
            action_id = text(event.get("action_id"))
            at = by_id.get(action_id) if action_id is not None else None
            if at is None:
                at = open_calls.get(text(event.get("tool_call_id")) or "")
            if at is not None and at not in answered:
                answered[at] = event
    return answered


def _usage(metrics: list[dict[str, Any]]) -> dict[str, StepCost]:
    """Each response's tokens and cost by response id, from SDK ``Metrics`` objects."""
    found: dict[str, StepCost] = {}
    for metric in metrics:
        usages = [obj(u) for u in items(metric.get("token_usages"))]
        costs = [number(obj(c).get("cost")) for c in items(metric.get("costs"))]
        paired = len(costs) == len(usages)
        for n, usage in enumerate(usages):
            response_id = text(usage.get("response_id"))
            if not response_id or response_id in found:
                continue
            found[response_id] = StepCost(
                input_tokens=integer(usage.get("prompt_tokens")),
                output_tokens=integer(usage.get("completion_tokens")),
                cost_usd=costs[n] if paired else None,
            )
    return found


def _first_user_text(events: list[dict[str, Any]]) -> str | None:
    for event in events:
        if kind_of(event) == "MessageEvent" and event.get("source") == "user":
            return nonempty(_texts(obj(event.get("llm_message")).get("content")))
    return None


def _steps(
    events: list[dict[str, Any]],
    session: str,
    goal: str | None,
    usage: dict[str, StepCost],
) -> tuple[list[Step], list[StepCost], list[dict[str, Any]]]:
    answered = _results(events)
    steps: list[Step] = []
    costs: list[StepCost] = []
    rejected: list[dict[str, Any]] = []
    responses: set[str] = set()
    for position, event in enumerate(events):
        if kind_of(event) != "ActionEvent":
            continue
        tool = nonempty(event.get("tool_name")) or nonempty(obj(event.get("tool_call")).get("name"))
        result = answered.get(position, {})
        action = event.get("action")
        if not isinstance(action, dict) or tool is None:
            rejected.append(
                {"tool": tool, "error": _result_fields(result).get("error"), "event": position}
            )
            continue
        response_id = text(event.get("llm_response_id"))
        first_of_response = response_id is None or response_id not in responses
        if response_id is not None:
            responses.add(response_id)
        message = nonempty(_texts(event.get("thought")))
        if message is None and action.get("kind") == "FinishAction":
            message = nonempty(action.get("message"))
        fields = _result_fields(result)
        steps.append(
            Step(
                tool=tool,
                args=_arguments(event),
                session=session,
                agent=AGENT,
                output=fields.get("output"),
                error=fields.get("error"),
                exit_code=fields.get("exit_code"),
                message=message,
                goal=goal,
                cwd=fields.get("cwd"),
            )
        )
        cost = usage.get(response_id or "") if first_of_response else None
        costs.append(cost or StepCost())
    return steps, costs, rejected


def _no_step_problems(events: list[dict[str, Any]], rejected: int) -> tuple[str, ...]:
    """Why a run has no steps, in words: what its events were instead."""
    kinds = Counter(kind_of(e) or "not an SDK event" for e in events)
    listing = ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))
    why = f"no executed tool call in {len(events)} events ({listing or 'none'})"
    if rejected:
        why += f"; {rejected} tool calls rejected by the SDK"
    unread = sorted(k for k in kinds if k not in NOT_STEPS and k not in RESULT_KINDS)
    unread = [k for k in unread if k != "ActionEvent"]
    if unread:
        why += f"; kinds not read as steps: {', '.join(unread)}"
    return (why,)


def run_from_events(
    file: str,
    record: int | None,
    events: list[dict[str, Any]],
    *,
    session: str,
    eval_record: dict[str, Any] | None = None,
    state: dict[str, Any] | None = None,
) -> Run:
    """One run from SDK events, with what the eval record or ``base_state.json`` adds."""
    data = eval_record or {}
    state = state or {}
    metadata = obj(data.get("metadata"))
    goal = goal_text(text(data.get("instruction")) or _first_user_text(events))
    metrics = [obj(data.get("metrics"))] if data.get("metrics") else []
    if not metrics:
        metrics = [obj(m) for m in obj(obj(state.get("stats")).get("usage_to_metrics")).values()]
    steps, costs, rejected = _steps(events, session, goal, _usage(metrics))
    total = [number(m.get("accumulated_cost")) for m in metrics]
    known = [t for t in total if t is not None]
    agent_state = obj(state.get("agent"))
    meta: dict[str, Any] = {
        "instance_id": nonempty(data.get("instance_id")),
        "conversation_id": nonempty(state.get("id")),
        "model": nonempty(obj(metadata.get("llm")).get("model"))
        or nonempty(obj(agent_state.get("llm")).get("model")),
        "max_iterations": integer(metadata.get("max_iterations"))
        or integer(state.get("max_iterations")),
        "execution_status": nonempty(state.get("execution_status")),
        "error": text(data.get("error")),
    }
    meta = {k: v for k, v in meta.items() if v is not None}
    if rejected:
        meta["rejected_calls"] = rejected
    return Run(
        file=file,
        record=record,
        format=FORMAT,
        steps=tuple(steps),
        costs=costs_or_empty(costs),
        total_cost_usd=sum(known) if known else None,
        meta=meta,
        problems=() if steps else _no_step_problems(events, len(rejected)),
    )


# --- the shapes a conversation is kept in ---------------------------------------------------


def looks_like(doc: object) -> bool:
    """Whether a whole-file JSON value is an SDK event list, event page or eval record."""
    return event_page(doc) is not None or is_eval_record(doc)


def looks_like_line(value: object) -> bool:
    """Whether one JSON line is an SDK event or an eval record with SDK events."""
    return kind_of(value) is not None or is_eval_record(value)


def read_openhands_sdk(source: Source) -> Iterator[Run]:
    """Yield the runs of an SDK event list, event-per-line JSONL or eval-output file."""
    if is_event_file(source.path):
        raise UnknownFormat(
            f"{source.path}: one event of a persisted OpenHands SDK conversation: "
            f"scan its folder ({source.path.parent.parent}) to read the whole run"
        )
    doc = source.document()
    page = event_page(doc)
    if page is not None:
        yield run_from_events(str(source.path), None, [obj(e) for e in page], session=source.stem)
        return
    if is_eval_record(doc):
        assert isinstance(doc, dict)  # noqa: S101 - narrowing for the type checker
        yield _eval_run(source, None, doc)
        return
    yield from _read_lines(source)


def _eval_run(source: Source, record: int | None, data: dict[str, Any]) -> Run:
    instance = nonempty(data.get("instance_id"))
    session = instance or (source.stem if record is None else f"{source.stem}#{record}")
    events = [obj(e) for e in items(data.get("history"))]
    return run_from_events(str(source.path), record, events, session=session, eval_record=data)


def _read_lines(source: Source) -> Iterator[Run]:
    """JSONL: eval records (a run per line) or events (one run for the file)."""
    records: list[Run] = []
    events: list[dict[str, Any]] = []
    bad: list[tuple[int, str]] = []
    for line_number, line in source.lines():
        try:
            value = json.loads(line)
        except ValueError as exc:
            bad.append((line_number, f"line {line_number}: not valid JSON ({exc})"))
            continue
        if is_eval_record(value):
            records.append(_eval_run(source, line_number - 1, value))
        elif kind_of(value) is not None:
            events.append(value)
        else:
            bad.append(
                (line_number, f"line {line_number}: not an OpenHands SDK event or eval record")
            )
    if not records and not events:
        raise UnknownFormat(
            f"{source.path}: not an OpenHands SDK conversation: no line is an SDK event "
            "or an eval record with SDK events"
        )
    if events:
        run = run_from_events(str(source.path), None, events, session=source.stem)
        yield _with_problems(run, [problem for _, problem in bad])
        return
    for line_number, problem in bad:
        records.append(
            Run(
                file=str(source.path),
                record=line_number - 1,
                format=FORMAT,
                steps=(),
                problems=(problem,),
            )
        )
    yield from sorted(records, key=lambda r: r.record or 0)


def _with_problems(run: Run, problems: list[str]) -> Run:
    if not problems:
        return run
    return dataclasses.replace(run, problems=(*problems, *run.problems))


def read_conversation_dir(path: Path) -> Iterator[Run]:
    """Yield the one run of a persisted SDK conversation folder (or its ``events`` folder).

    Raises:
        UnknownFormat: the folder holds no event files.
    """
    root = path.parent if path.name == "events" else path
    events_dir = root / "events"
    files = sorted(
        (p for p in events_dir.iterdir() if EVENT_FILE.match(p.name)),
        key=lambda p: int(p.name.split("-")[1]),
    )
    if not files:
        raise UnknownFormat(f"{path}: not an OpenHands SDK conversation: no event files")
    events: list[dict[str, Any]] = []
    problems: list[str] = []
    for file in files:
        try:
            value = json.loads(file.read_text(encoding="utf-8-sig"))
        except (ValueError, UnicodeDecodeError) as exc:
            problems.append(f"{file.name}: not valid JSON ({exc})")
            continue
        if kind_of(value) is None:
            problems.append(f"{file.name}: not an OpenHands SDK event")
            continue
        events.append(value)
    state: dict[str, Any] = {}
    base = root / BASE_STATE
    if base.is_file():
        try:
            state = obj(json.loads(base.read_text(encoding="utf-8-sig")))
        except (ValueError, UnicodeDecodeError) as exc:
            problems.append(f"{BASE_STATE}: not valid JSON ({exc})")
    session = nonempty(state.get("id")) or root.name
    run = run_from_events(str(path), None, events, session=session, state=state)
    yield _with_problems(run, problems)
