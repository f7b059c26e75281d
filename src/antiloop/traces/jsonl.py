"""Generic JSONL: one docs/protocol.md section 2 step event per line.

Blank lines are skipped. A line that is no step (bad JSON, no ``tool``, ...) is reported in
``Run.problems`` as ``line N: <reason>`` (N counts every physical line from 1) and the steps
around it still count. The steps' usage (``tokens_in``, ``tokens_out``, ``cost_usd``) is the
run's ``costs`` when any step carries it.
"""

from __future__ import annotations

from collections.abc import Iterator

from antiloop.core.errors import BadStep
from antiloop.core.step import Step, parse_line, step_from_dict
from antiloop.traces._base import Run, Source, StepCost


def read_jsonl(source: Source) -> Iterator[Run]:
    """Yield the one run of a step-event JSONL file."""
    steps: list[Step] = []
    problems: list[str] = []
    doc = source.document()
    lines = list(source.lines())
    if isinstance(doc, dict) and len(lines) > 1:
        # One event written as pretty-printed JSON over several lines.
        try:
            steps.append(step_from_dict(doc))
        except BadStep as exc:
            problems.append(f"line 1: {exc}")
    else:
        for number, line in lines:
            try:
                steps.append(parse_line(line))
            except BadStep as exc:
                problems.append(f"line {number}: {exc}")
    costs = tuple(StepCost(s.tokens_in, s.tokens_out, s.cost_usd) for s in steps)
    recorded = any(c != StepCost() for c in costs)
    yield Run(
        file=str(source.path),
        record=None,
        format="jsonl",
        steps=tuple(steps),
        costs=costs if recorded else (),
        problems=tuple(problems),
    )
