"""OpenHands event histories: a JSON list of events, or JSONL with one eval record per line.

An eval record is ``{"instance_id", "instruction", "metadata", "history": [events], "metrics",
"error", ...}``; a whole file that is one such object is read as one run with ``record`` None.

Steps are the events with ``source == "agent"`` and an ``action`` outside ``SKIPPED_ACTIONS``, in
list order (``run``, ``read``, ``edit``, ``think``, ``finish``, ...).

* **Tool**: ``tool_call_metadata.function_name`` (``execute_bash``, ``str_replace_editor``, ...),
  else the ``action``.
* **Arguments**: the model's own tool-call arguments, read from
  ``tool_call_metadata.model_response`` by ``tool_call_id``, where the file keeps them (so a
  ``str_replace_editor`` read carries ``command: "view"``, which the event ``args`` lack). Else the
  event ``args`` without ``thought`` and OpenHands' bookkeeping keys (``BOOKKEEPING_ARGS``).
* **Result**: the observation event whose ``cause`` is the action's ``id``: ``output`` is its
  ``content``, ``exit_code`` is ``extras.metadata.exit_code`` (kept as recorded, -1 included); an
  ``observation: "error"`` event gives ``error`` instead of ``output``. Error observations caused by
  no action (a tool call OpenHands rejected before it became an action) are no step: they are
  listed in ``meta["orphan_errors"]``. An action with no such observation (other than a
  ``finish``, which ends the run and has none) has no result: it is listed in
  ``Run.missing_results``, not read as empty.
* ``message`` is ``args.thought`` (else the model response's text, for the first action of that
  response; else the event message of a ``think``/``finish``). ``goal`` is the task of the record's
  ``instruction`` or of the first user message. ``agent`` is ``metadata.agent_class``, else the one
  named by the ``system`` event, else ``"openhands"``.
"""

from __future__ import annotations

import json
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
    json_object,
    missing_reason,
    nonempty,
    number,
    obj,
    text,
    usage_cost,
)

SKIPPED_ACTIONS = frozenset({"system", "message", "recall", "change_agent_state", "null"})
"""Agent actions that are no tool call, hence no step."""

NO_RESULT_ACTIONS = frozenset({"finish"})
"""Actions that end the run: no observation answers them, by design."""

BOOKKEEPING_ARGS = frozenset(
    {"thought", "impl_source", "translated_ipython_code", "confirmation_state", "security_risk"}
)
"""Event ``args`` keys that OpenHands adds and the model did not send."""


def is_event_list(value: object) -> bool:
    """Whether a decoded JSON value looks like an OpenHands event list."""
    if not isinstance(value, list) or not value:
        return False
    head = [e for e in value[:20] if isinstance(e, dict)]
    return bool(head) and all(
        ("action" in e or "observation" in e) and ("source" in e or "id" in e) for e in head
    )


def _tool_call(metadata: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The model's arguments for this call and the response's text, from ``model_response``."""
    call_id = text(metadata.get("tool_call_id"))
    response = obj(metadata.get("model_response"))
    for choice in items(response.get("choices")):
        message = obj(obj(choice).get("message"))
        for call in items(message.get("tool_calls")):
            call = obj(call)
            if call_id is not None and call.get("id") == call_id:
                args = json_object(obj(call.get("function")).get("arguments"))
                return args, nonempty(message.get("content"))
    return None, None


def _steps(
    events: list[dict[str, Any]], session: str, agent: str, goal: str | None
) -> tuple[list[Step], list[StepCost], list[dict[str, Any]], list[int]]:
    observations: dict[int, dict[str, Any]] = {}
    orphans: list[dict[str, Any]] = []
    for event in events:
        if "observation" not in event:
            continue
        cause = integer(event.get("cause"))
        if cause is not None:
            observations.setdefault(cause, event)
        elif event.get("observation") == "error":
            orphans.append({"id": event.get("id"), "content": text(event.get("content"))})
    steps: list[Step] = []
    costs: list[StepCost] = []
    missing: list[int] = []
    responses: set[str] = set()
    for event in events:
        action = text(event.get("action"))
        if event.get("source") != "agent" or action is None or action in SKIPPED_ACTIONS:
            continue
        metadata = obj(event.get("tool_call_metadata"))
        tool = nonempty(metadata.get("function_name")) or action
        event_args = obj(event.get("args"))
        model_args, response_text = _tool_call(metadata)
        if model_args is None:
            model_args = {k: v for k, v in event_args.items() if k not in BOOKKEEPING_ARGS}
        response = obj(metadata.get("model_response"))
        response_id = text(response.get("id"))
        first_of_response = response_id is None or response_id not in responses
        if response_id is not None:
            responses.add(response_id)
        message = nonempty(event_args.get("thought")) or nonempty(event_args.get("final_thought"))
        if message is None and first_of_response:
            message = response_text
        if message is None and action in ("think", "finish"):
            message = nonempty(event.get("message"))
        event_id = integer(event.get("id"))
        obs = observations.get(event_id, {}) if event_id is not None else {}
        extras = obj(obs.get("extras"))
        run_meta = obj(extras.get("metadata"))
        is_error = obs.get("observation") == "error"
        content = text(obs.get("content"))
        if content is None and action not in NO_RESULT_ACTIONS:
            missing.append(len(steps))
        steps.append(
            Step(
                tool=tool,
                args=model_args,
                session=session,
                agent=agent,
                output=None if is_error else content,
                error=(content or "error") if is_error else None,
                exit_code=integer(run_meta.get("exit_code")),
                message=message,
                goal=goal,
                cwd=nonempty(run_meta.get("working_dir")) or nonempty(event_args.get("cwd")),
            )
        )
        costs.append(usage_cost(response.get("usage")) if first_of_response else StepCost())
    return steps, costs, orphans, missing


def _agent_class(events: list[dict[str, Any]]) -> str | None:
    for event in events:
        if event.get("action") == "system":
            return nonempty(obj(event.get("args")).get("agent_class"))
    return None


def _first_user_text(events: list[dict[str, Any]]) -> str | None:
    for event in events:
        if event.get("source") == "user" and event.get("action") == "message":
            return text(obj(event.get("args")).get("content")) or text(event.get("message"))
    return None


def _run_from_events(
    source: Source,
    record: int | None,
    events: list[dict[str, Any]],
    eval_record: dict[str, Any] | None,
) -> Run:
    data = eval_record or {}
    metadata = obj(data.get("metadata"))
    instance = nonempty(data.get("instance_id"))
    session = instance or (source.stem if record is None else f"{source.stem}#{record}")
    agent_class = nonempty(metadata.get("agent_class")) or _agent_class(events)
    agent = agent_class or "openhands"
    goal = goal_text(text(data.get("instruction")) or _first_user_text(events))
    steps, costs, orphans, missing = _steps(events, session, agent, goal)
    metrics = obj(data.get("metrics"))
    meta: dict[str, Any] = {
        "instance_id": instance,
        "agent_class": agent_class,
        "model": nonempty(obj(metadata.get("llm_config")).get("model")),
        "max_iterations": integer(metadata.get("max_iterations")),
        "error": text(data.get("error")),
    }
    meta = {k: v for k, v in meta.items() if v is not None}
    if orphans:
        meta["orphan_errors"] = orphans
    return Run(
        file=str(source.path),
        record=record,
        format="openhands",
        steps=tuple(steps),
        costs=costs_or_empty(costs),
        total_cost_usd=number(metrics.get("accumulated_cost")),
        meta=meta,
        problems=() if steps else (_no_steps(events),),
        missing_results=tuple(missing),
        partial_reason=missing_reason(missing, "no observation caused by it holds a content text"),
    )


def _no_steps(events: list[dict[str, Any]]) -> str:
    """Why a history gives no step: what its events are instead."""
    actions = sorted({a for e in events if (a := text(e.get("action"))) is not None})
    if any(isinstance(e.get("action"), dict) for e in events):
        return (
            f"no agent action among {len(events)} events: their actions are objects, as in "
            "OpenHands agent-SDK events (--format openhands-sdk reads those)"
        )
    listed = ", ".join(actions) if actions else "none"
    return f"no agent tool action among {len(events)} events (actions: {listed})"


def read_openhands(source: Source) -> Iterator[Run]:
    """Yield the runs of an OpenHands event list or eval-output JSONL file."""
    doc = source.document()
    if is_event_list(doc):
        assert isinstance(doc, list)  # noqa: S101 - narrowing for the type checker
        yield _run_from_events(source, None, [obj(e) for e in doc], None)
        return
    if isinstance(doc, dict) and isinstance(doc.get("history"), list):
        yield _run_from_events(source, None, [obj(e) for e in doc["history"]], doc)
        return
    runs: list[Run] = []
    found = False
    for line_number, line in source.lines():
        record = line_number - 1
        try:
            value = json.loads(line)
        except ValueError as exc:
            problem = f"line {line_number}: not valid JSON ({exc})"
        else:
            if isinstance(value, dict) and isinstance(value.get("history"), list):
                found = True
                events = [obj(e) for e in value["history"]]
                runs.append(_run_from_events(source, record, events, value))
                continue
            problem = f"line {line_number}: not an OpenHands record (no 'history' list)"
        runs.append(
            Run(
                file=str(source.path),
                record=record,
                format="openhands",
                steps=(),
                problems=(problem,),
            )
        )
    if not found:
        raise UnknownFormat(
            f"{source.path}: not an OpenHands history: expected a JSON list of events "
            "or JSON lines with a 'history' list"
        )
    yield from runs
