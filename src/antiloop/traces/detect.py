"""Which trace format a file holds, judged from its content (never its name)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from antiloop.traces._base import FORMATS, INVALID, Run, Source, UnknownFormat, items, obj
from antiloop.traces.claude_code import is_entry, read_claude_code
from antiloop.traces.jsonl import read_jsonl
from antiloop.traces.mini_swe_agent import read_v1, read_v2
from antiloop.traces.openhands import is_event_list, read_openhands
from antiloop.traces.openhands_sdk_files import (
    is_conversation_dir,
    is_event_file,
    looks_like,
    looks_like_line,
    read_conversation_dir,
    read_openhands_sdk,
)
from antiloop.traces.swe_agent import read_swe_agent

Reader = Callable[[Source], Iterator[Run]]

READERS: dict[str, Reader] = {
    "jsonl": read_jsonl,
    "swe-agent": read_swe_agent,
    "mini-swe-agent-1": read_v1,
    "mini-swe-agent-2": read_v2,
    "openhands": read_openhands,
    "openhands-sdk": read_openhands_sdk,
    "claude-code": read_claude_code,
}

_SNIFF_LINES = 200


def _mini_version(doc: dict[str, Any]) -> str | None:
    messages = [obj(m) for m in items(doc.get("messages"))]
    declared = doc.get("trajectory_format")
    if declared == "mini-swe-agent-1":
        return "mini-swe-agent-1"
    if isinstance(declared, str) and declared.startswith("mini-swe-agent-1."):
        return "mini-swe-agent-2"
    if not messages or "mini_version" not in obj(doc.get("info")):
        return None
    uses_tools = any(m.get("tool_calls") or m.get("role") == "tool" for m in messages)
    return "mini-swe-agent-2" if uses_tools else "mini-swe-agent-1"


def _sniff_document(doc: object) -> str | None:
    """The format of a file that is one JSON value, or None."""
    if looks_like(doc):
        return "openhands-sdk"
    if is_event_list(doc):
        return "openhands"
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("messages"), list):
        version = _mini_version(doc)
        if version:
            return version
    trajectory = doc.get("trajectory")
    if isinstance(trajectory, list) and all(
        isinstance(e, dict) and "action" in e for e in trajectory[:5]
    ):
        return "swe-agent"
    return _sniff_line(doc)


def _sniff_line(value: object) -> str | None:
    """The format a single JSON line belongs to, or None."""
    if not isinstance(value, dict):
        return None
    if "tool" in value:
        return "jsonl"
    if looks_like_line(value):
        return "openhands-sdk"
    if isinstance(value.get("history"), list):
        return "openhands"
    if is_entry(value):
        return "claude-code"
    return None


def sniff(source: Source) -> str | None:
    """The format of a loaded file, or None when none fits."""
    doc = source.document()
    if doc is not INVALID:
        found = _sniff_document(doc)
        if found or not isinstance(doc, dict | list):
            return found
    for count, (_, line) in enumerate(source.lines()):
        if count >= _SNIFF_LINES:
            break
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            continue
        found = _sniff_line(value)
        if found:
            return found
    return None


def _why_not(source: Source) -> str:
    """A short description of what the file is instead, for the UnknownFormat message."""
    if not source.text.strip():
        return "the file is empty"
    doc = source.document()
    if isinstance(doc, dict):
        keys = ", ".join(sorted(doc)[:8]) or "none"
        return f"it is a JSON object with keys: {keys}"
    if isinstance(doc, list):
        return f"it is a JSON array of {len(doc)} items, not of OpenHands events"
    if doc is not INVALID:
        return f"it is a bare JSON {type(doc).__name__}"
    if source.too_deep:
        return "its JSON is nested too deeply to read"
    return "it is neither JSON nor JSON lines of step events or transcript entries"


def detect_format(path: Path) -> str | None:
    """The trace format of a file, judged from its content; None when none fits.

    Args:
        path: the file to look at.

    Returns:
        One of ``FORMATS``, or None.

    Example:
        >>> detect_format(Path("run.traj")) # doctest: +SKIP
        'swe-agent'
    """
    if path.is_dir():
        return "openhands-sdk" if is_conversation_dir(path) else None
    try:
        source = Source.read(path)
    except UnknownFormat:
        return None
    return sniff(source)


def read_runs(path: Path, format: str = "auto") -> Iterator[Run]:
    """Read the runs a trace file holds.

    Args:
        path: a trace file, or a persisted OpenHands SDK conversation folder.
        format: ``"auto"`` to detect it from the content, or one of ``FORMATS``.

    Returns:
        An iterator of runs (several only for OpenHands JSONL, one per line).

    Raises:
        UnknownFormat: no format fits the file, or ``format`` names none. Raised at once,
            before the first run is read.
        OSError: the file cannot be read.
    """
    if format != "auto" and format not in READERS:
        known = ", ".join(FORMATS)
        raise UnknownFormat(f"unknown trace format {format!r}; known: auto, {known}")
    if path.is_dir():
        if format in ("auto", "openhands-sdk") and is_conversation_dir(path):
            return read_conversation_dir(path)
        raise UnknownFormat(f"{path}: a folder that is no persisted OpenHands SDK conversation")
    source = Source.read(path)
    chosen = sniff(source) if format == "auto" else format
    if chosen is None:
        raise UnknownFormat(
            f"{path}: no known trace format fits: {_why_not(source)} "
            f"(known formats: {', '.join(FORMATS)})"
        )
    return READERS[chosen](source)


_DOCUMENTATION = frozenset({".md", ".markdown", ".rst", ".adoc"})


def iter_paths(paths: Sequence[Path]) -> Iterator[Path]:
    """The traces named: files, with directories expanded recursively, each one's files sorted.

    In a directory, documentation files (``.md``, ``.rst``, ``.adoc``) are left out.

    A persisted OpenHands SDK conversation (a folder with ``base_state.json`` and
    ``events/event-*.json``) is one trace: its folder is yielded, once, in place of its files.

    Raises:
        FileNotFoundError: a path does not exist.
    """
    for path in paths:
        if path.is_dir():
            yield from _expand(path)
        elif path.exists():
            yield path
        else:
            raise FileNotFoundError(f"no such file or directory: {path}")


def _expand(folder: Path) -> Iterator[Path]:
    if is_conversation_dir(folder):
        yield folder
        return
    # A folder's documentation (README.md, notes.rst) is no trace: skipped in a walk, while a
    # documentation file named on its own is read, and reported unreadable.
    files = sorted(
        p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() not in _DOCUMENTATION
    )
    roots: set[Path] = set()
    for events in {f.parent for f in files if is_event_file(f)}:
        if is_conversation_dir(events):
            roots.add(events.parent if is_conversation_dir(events.parent) else events)
    given: set[Path] = set()
    for file in files:
        owner = next((p for p in file.parents if p in roots), None)
        if owner is None:
            yield file
        elif owner not in given:
            given.add(owner)
            yield owner
