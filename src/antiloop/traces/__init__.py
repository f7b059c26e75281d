"""Trace readers: recorded agent runs turned into antiloop ``Step`` objects.

A scanner reads finished runs with these, to find loops after the fact::

    for path in iter_paths([Path("runs/")]):
        for run in read_runs(path):
            ...  # run.steps, run.costs, run.meta

Formats (detected from the content): ``jsonl`` (docs/protocol.md section 2 events),
``swe-agent`` (``.traj``), ``mini-swe-agent-1`` and ``mini-swe-agent-2``, ``openhands`` (event
lists and eval JSONL of OpenHands before its agent SDK), ``openhands-sdk`` (the agent SDK's V1
events: persisted conversation folders, event lists, event JSONL, eval JSONL) and ``claude-code``
(session and subagent transcripts). Each reader's module
docstring says how its format maps onto ``Step``; step order is the canonical step index of the
corpus' FORMATS.md.
"""

from antiloop.traces._base import FORMATS, GOAL_LIMIT, Run, StepCost, UnknownFormat
from antiloop.traces.detect import detect_format, iter_paths, read_runs

__all__ = [
    "FORMATS",
    "GOAL_LIMIT",
    "Run",
    "StepCost",
    "UnknownFormat",
    "detect_format",
    "iter_paths",
    "read_runs",
]
