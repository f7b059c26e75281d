"""OpenHands agent SDK (``openhands-sdk``, the V1 event schema): events into steps.

The SDK records a conversation as a list of events, each a JSON object with a ``kind``
(``SystemPromptEvent``, ``MessageEvent``, ``ActionEvent``, ``ObservationEvent``,
``AgentErrorEvent``, ``UserRejectObservation``, ``ConversationStateUpdateEvent``, ...).
``openhands_sdk_files`` reads the shapes it is kept in (a persisted conversation folder, an event
list, event JSONL, eval JSONL) and hands the events to ``run_from_events`` here.

Steps are the ``ActionEvent`` records whose ``action`` is set, in list order: one per tool call
(a response with parallel tool calls gives several, in the order of its calls). An
``ActionEvent`` with ``action: null`` is a tool call the SDK refused before running it (an
unknown tool, arguments that do not validate): it is no step, and is listed with its error in
``meta["rejected_calls"]``.

* **Tool**: ``tool_name`` (``terminal``, ``file_editor``, ``finish``, ``think``, ...).
* **Arguments**: the model's own arguments, ``tool_call.arguments`` decoded, without the SDK's
  ``security_risk`` and ``summary``; else the ``action`` without its ``kind``.
* **Result**: the event answering the call: an ``ObservationEvent`` (by ``action_id``, else
  ``tool_call_id``) gives ``output``, the observation's text: the text items of ``content``
  joined (SDK 1.x), else its ``output`` string (the earlier ``ExecuteBashObservation``,
  ``BrowserObservation`` and ``StrReplaceEditorObservation``); ``error`` is an ``error`` string,
  else that text when ``is_error`` (or an earlier ``error: true``) says the call failed;
  ``exit_code`` is ``observation.exit_code`` (else ``observation.metadata.exit_code``, kept as
  recorded, -1 included) and ``cwd`` is ``observation.metadata.working_dir``. An
  ``AgentErrorEvent`` gives ``error``; a ``UserRejectObservation`` gives ``error``
  ``"Action rejected: <reason>"``. A call that no event answers, or whose observation holds no
  text the reader knows (a finish or think observation is empty by design), has no result: it
  is listed in ``Run.missing_results``, never read as an empty output.
* ``message`` is the call's ``thought`` text (the SDK keeps it on the first call of a
  response), else a ``finish`` action's ``message``. ``goal`` is the eval record's
  ``instruction``, else the first user ``MessageEvent``. ``agent`` is ``"openhands"``.
* **Usage**: where the run's metrics are kept (the eval record's ``metrics``, or
  ``base_state.json``'s ``stats.usage_to_metrics``), each response's tokens (``token_usages``
  by ``response_id``) and cost go to the first step of that response.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from antiloop.core.step import Step
from antiloop.traces._base import (
    Run,
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

MISSING_WHY = "no observation answers the call, or it holds no text the reader knows"

SDK_ARGS = frozenset({"security_risk", "summary"})
"""Keys the SDK asks the model for besides a tool's parameters."""


def kind_of(event: object) -> str | None:
    """The SDK event kind of a decoded JSON value, or None when it is no SDK event.

    The ``kind`` field names it (one of ``EVENT_KINDS``, or another kind on an object with the
    ``id``, ``timestamp`` and ``source`` of every SDK event); an event written without one is
    known by the fields only SDK events have (``tool_name`` with ``tool_call_id``,
    ``llm_message``, ``system_prompt``).
    """
    if not isinstance(event, dict):
        return None
    kind = event.get("kind")
    if isinstance(kind, str):
        # A kind of a later SDK: known by the fields every SDK event has; it is no step.
        known = kind in EVENT_KINDS or all(k in event for k in ("id", "timestamp", "source"))
        return kind if known else None
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


NO_TEXT_KINDS = ("Finish", "Think")
"""Observation kinds (by name part) that carry no text by design: their result is empty."""


def _observation_text(observation: dict[str, Any]) -> str | None:
    """An observation's text, or None when it has none a reader knows.

    The SDK has kept it in ``content`` (a list of text items, 1.x; a string in some tools) and,
    before that, in ``output`` (``ExecuteBashObservation``, ``BrowserObservation``,
    ``StrReplaceEditorObservation``), with an error text in ``error`` where the tool failed.
    """
    found = [
        _texts(observation[key])
        for key in ("content", "output")
        if isinstance(observation.get(key), str | list)
    ]
    if found:
        return "\n".join(t for t in found if t)
    kind = text(observation.get("kind")) or ""
    if any(part in kind for part in NO_TEXT_KINDS):
        return ""
    return None


def _result_fields(result: dict[str, Any]) -> dict[str, Any] | None:
    """Step fields from the event that answers a call, or None when no result is found."""
    kind = kind_of(result)
    if kind == "AgentErrorEvent":
        return {"error": text(result.get("error")) or "error"}
    if kind == "UserRejectObservation":
        reason = text(result.get("rejection_reason")) or "rejected"
        return {"error": f"Action rejected: {reason}"}
    if kind != "ObservationEvent":
        return None
    observation = obj(result.get("observation"))
    metadata = obj(observation.get("metadata"))
    content = _observation_text(observation)
    error_text = nonempty(observation.get("error"))
    failed = observation.get("is_error") is True or observation.get("error") is True
    if content is None and error_text is None:
        return None
    exit_code = integer(observation.get("exit_code"))
    if exit_code is None:
        exit_code = integer(metadata.get("exit_code"))
    fields: dict[str, Any] = {"exit_code": exit_code, "cwd": nonempty(metadata.get("working_dir"))}
    if error_text is not None:
        fields["error"] = error_text
        if content:
            fields["output"] = content
    elif failed:
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
) -> tuple[list[Step], list[StepCost], list[dict[str, Any]], list[int]]:
    answered = _results(events)
    steps: list[Step] = []
    costs: list[StepCost] = []
    rejected: list[dict[str, Any]] = []
    missing: list[int] = []
    responses: set[str] = set()
    for position, event in enumerate(events):
        if kind_of(event) != "ActionEvent":
            continue
        tool = nonempty(event.get("tool_name")) or nonempty(obj(event.get("tool_call")).get("name"))
        result = answered.get(position, {})
        action = event.get("action")
        if not isinstance(action, dict) or tool is None:
            error = (_result_fields(result) or {}).get("error")
            rejected.append({"tool": tool, "error": error, "event": position})
            continue
        response_id = text(event.get("llm_response_id"))
        first_of_response = response_id is None or response_id not in responses
        if response_id is not None:
            responses.add(response_id)
        message = nonempty(_texts(event.get("thought")))
        if message is None and action.get("kind") == "FinishAction":
            message = nonempty(action.get("message"))
        fields = _result_fields(result)
        if fields is None:
            missing.append(len(steps))
            fields = {}
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
    return steps, costs, rejected, missing


def _no_step_problems(events: list[dict[str, Any]], rejected: int) -> tuple[str, ...]:
    """Why a run has no steps, in words: what its events were instead."""
    kinds = Counter(kind_of(e) or "not an SDK event" for e in events)
    listing = ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))
    why = f"no executed tool call in {len(events)} events ({listing or 'none'})"
    if rejected:
        why += f"; {rejected} tool calls rejected by the SDK"
    read = NOT_STEPS | RESULT_KINDS | {"ActionEvent", "not an SDK event"}
    unread = sorted(k for k in kinds if k not in read)
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
    steps, costs, rejected, missing = _steps(events, session, goal, _usage(metrics))
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
        missing_results=tuple(missing),
        partial_reason=missing_reason(missing, MISSING_WHY),
    )
