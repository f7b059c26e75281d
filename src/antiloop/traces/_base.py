"""Shared types and small helpers of the trace readers.

The readers turn decoded JSON into ``Step`` objects. JSON is untyped, so every access goes
through the coercing helpers here (``obj``, ``items``, ``text``, ``integer``, ``number``): a
field of the wrong type reads as absent instead of raising.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from antiloop.core.errors import AntiloopError
from antiloop.core.step import Step

GOAL_LIMIT = 2000
"""Step.goal is the task text trimmed to this many characters."""

FORMATS = (
    "jsonl",
    "swe-agent",
    "mini-swe-agent-1",
    "mini-swe-agent-2",
    "openhands",
    "openhands-sdk",
    "claude-code",
)
"""The format names ``read_runs`` accepts (besides ``"auto"``)."""


class UnknownFormat(AntiloopError, ValueError):
    """A file is no trace a reader knows, or the format asked for is not one of ``FORMATS``."""


@dataclass(frozen=True, slots=True)
class StepCost:
    """Model usage of the turn that produced one step, where the format records it.

    Attributes:
        input_tokens: prompt tokens sent for that turn (cached ones included), or None.
        output_tokens: completion tokens, or None.
        cost_usd: the turn's cost in US dollars, or None.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None


NO_COST = StepCost()


@dataclass(frozen=True, slots=True)
class Run:
    """One recorded agent run, read into steps.

    Attributes:
        file: the path the run was read from.
        record: 0-based line number of the run in a file that holds one run per line
            (OpenHands JSONL), else None.
        format: the format name (one of ``FORMATS``).
        steps: the steps in canonical step order (corpus FORMATS.md): ``steps[i]`` is step ``i``.
        costs: per-step usage, as long as ``steps``; ``()`` when the format records none.
        total_cost_usd: the run's total cost as the file states it, or None.
        meta: what else the file says about the run (model, exit status, instance id, ...).
        problems: things that could not be read, each naming its line or event.
        missing_results: the steps (indices into ``steps``) whose result the reader could not
            find: their ``output`` and ``error`` are unknown, not empty. A run with any is
            *partial*, and ``partial_reason`` says why.
        partial_reason: the steps with no result and why, in one line; None when there are none.
    """

    file: str
    record: int | None
    format: str
    steps: tuple[Step, ...]
    costs: tuple[StepCost, ...] = ()
    total_cost_usd: float | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    missing_results: tuple[int, ...] = ()
    partial_reason: str | None = None

    @property
    def partial(self) -> bool:
        """Whether some step's result could not be found (see ``missing_results``)."""
        return bool(self.missing_results)


def missing_reason(missing: list[int], why: str) -> str | None:
    """Why a run is partial, naming the steps ``missing`` (no result found), or None."""
    if not missing:
        return None
    shown = ", ".join(str(i) for i in missing[:10])
    more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
    noun = "step" if len(missing) == 1 else "steps"
    return f"no result found for {len(missing)} {noun} ({shown}{more}): {why}"


_INVALID = object()


class Source:
    """A trace file's text, decoded once, with its whole-file JSON parsed on demand."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.text = text
        self._doc: object = None
        self._parsed = False
        self.too_deep = False
        """The whole file is JSON nested too deeply for Python's parser to read."""

    @classmethod
    def read(cls, path: Path) -> Source:
        """Read a file as UTF-8 text, or raise UnknownFormat when it is not text.

        A file with a NUL byte is no text; in any other, each byte sequence that is not UTF-8
        becomes U+FFFD (the Unicode rule of steps, ``antiloop.core.step``).
        """
        data = path.read_bytes()
        if b"\0" in data:
            raise UnknownFormat(f"{path}: not a trace: the file is not UTF-8 text")
        return cls(path, data.decode("utf-8-sig", "replace"))

    @property
    def stem(self) -> str:
        """The file name without its trace suffixes (``x.traj.json`` -> ``x``)."""
        name = self.path.name
        for suffix in (".traj.json", ".jsonl", ".json", ".traj"):
            if name.endswith(suffix) and len(name) > len(suffix):
                return name[: -len(suffix)]
        return name

    def document(self) -> object:
        """The whole file decoded as one JSON value, or ``INVALID`` when it is not one."""
        if not self._parsed:
            self._parsed = True
            try:
                self._doc = json.loads(self.text)
            except ValueError:
                self._doc = _INVALID
            except RecursionError:  # nested too deeply to read: no document (maybe lines)
                self._doc = _INVALID
                self.too_deep = True
        return self._doc

    def lines(self) -> Iterator[tuple[int, str]]:
        """The non-blank lines with their 1-based line numbers."""
        for number, line in enumerate(self.text.splitlines(), start=1):
            if line.strip():
                yield number, line


INVALID = _INVALID


def obj(value: object) -> dict[str, Any]:
    """The value if it is a JSON object, else an empty dict."""
    return value if isinstance(value, dict) else {}


def items(value: object) -> list[Any]:
    """The value if it is a JSON array, else an empty list."""
    return value if isinstance(value, list) else []


def text(value: object) -> str | None:
    """The value if it is a string, else None."""
    return value if isinstance(value, str) else None


def integer(value: object) -> int | None:
    """The value as an int when it is an integral JSON number, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def number(value: object) -> float | None:
    """The value as a float when it is a JSON number, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def nonempty(value: object) -> str | None:
    """The value stripped, when it is a string with something in it, else None."""
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def json_object(raw: object) -> dict[str, Any] | None:
    """Decode a JSON-object string (tool-call arguments); a dict passes through; else None."""
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


_TASK_PATTERNS = (
    re.compile(
        r"<pr_description>\s*(?:Consider the following PR description:\s*)?(.*?)</pr_description>",
        re.S,
    ),
    re.compile(r"<issue_description>\s*(.*?)</issue_description>", re.S),
    re.compile(r"ISSUE:\s*\n(.*?)\n\s*INSTRUCTIONS:", re.S),
)


def goal_text(task: str | None) -> str | None:
    """The task part of a first user message, trimmed to ``GOAL_LIMIT`` characters.

    A SWE-bench style prompt wraps the task in boilerplate; where a known wrapper is found
    (``<pr_description>``, ``<issue_description>``, ``ISSUE: ... INSTRUCTIONS:``) only its
    inside is kept.
    """
    if task is None:
        return None
    for pattern in _TASK_PATTERNS:
        match = pattern.search(task)
        if match and match.group(1).strip():
            task = match.group(1)
            break
    task = task.strip()
    return task[:GOAL_LIMIT] if task else None


def usage_cost(usage: object, cost: object = None) -> StepCost:
    """A StepCost from an OpenAI-style ``usage`` object and an optional separate cost."""
    data = obj(usage)
    dollars = number(cost)
    if dollars is None:
        dollars = number(data.get("cost"))
    return StepCost(
        input_tokens=integer(data.get("prompt_tokens")),
        output_tokens=integer(data.get("completion_tokens")),
        cost_usd=dollars,
    )


def costs_or_empty(costs: list[StepCost]) -> tuple[StepCost, ...]:
    """The costs as a tuple, or ``()`` when not one of them records anything."""
    return tuple(costs) if any(c != NO_COST for c in costs) else ()


def require_dict(source: Source, what: str) -> dict[str, Any]:
    """The whole-file JSON object, or raise UnknownFormat saying the file is not ``what``."""
    doc = source.document()
    if not isinstance(doc, dict):
        raise UnknownFormat(f"{source.path}: not a {what} trajectory: expected one JSON object")
    return doc
