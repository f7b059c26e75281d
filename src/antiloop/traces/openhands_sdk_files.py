"""The shapes an OpenHands agent-SDK conversation is kept in, read into runs.

* a persisted conversation: a folder with ``base_state.json`` and ``events/event-NNNNN-<id>.json``
  (one event per file, in index order); the folder or its ``events`` folder is one run, and
  ``base_state.json`` adds the conversation id, model, status and usage;
* a JSON list of events (``[e.model_dump(mode="json") for e in conversation.state.events]``), or
  the agent server's event page ``{"items": [events], ...}``;
* JSON lines with one event per line;
* eval output (the OpenHands benchmarks' ``EvalOutput``): one record per line, or one record,
  ``{"instance_id", "instruction", "metadata", "history": [events], "metrics", "error", ...}``.

How the events become steps is ``openhands_sdk``'s docstring.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from antiloop.traces._base import Run, Source, UnknownFormat, items, nonempty, obj
from antiloop.traces.openhands_sdk import (
    FORMAT,
    event_page,
    is_eval_record,
    kind_of,
    run_from_events,
)

EVENT_FILE = re.compile(r"^event-\d{5,}-[0-9a-fA-F\-]{8,}\.json$")
"""A persisted conversation's event file name (``event-00003-<uuid>.json``)."""

BASE_STATE = "base_state.json"


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
