"""What the fault-injection tests of every backend share: how a store failure reads, and the
tally of steps sent, acknowledged, lost and doubled against what the store kept."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from antiloop.verdict import Action, Verdict


def store_failed(verdict: Verdict) -> bool:
    """The verdict a store failure gives (allow: unguarded; block: detector 'store')."""
    return verdict.detector == "store" or verdict.reason.startswith("unguarded")


@dataclass
class Tally:
    """Steps sent, acknowledged (a verdict that is no store failure), lost and doubled."""

    steps: int = 0
    acknowledged: int = 0
    lost: int = 0
    doubled: int = 0


def tally(
    store: Any,
    verdicts: Mapping[str, Sequence[tuple[int, Verdict]]],
    outputs: Callable[[str], Counter[str | None]],
) -> Tally:
    """Check each session's state against its audit records and count what was kept.

    ``verdicts[session]`` holds ``(n, verdict)`` for the step whose output was ``contents n``;
    ``outputs(session)`` counts the outputs of that session's audit records. Every verdict is
    a continue or a store failure, and the state counts exactly the steps the log holds.
    """
    result = Tally()
    for session, got in verdicts.items():
        kept = outputs(session)
        state = store.peek(session)
        assert state is not None
        assert state.steps == sum(kept.values())  # the state and the log agree
        for n, verdict in got:
            assert verdict.action < Action.BLOCK or store_failed(verdict), verdict.reason
            result.steps += 1
            if not store_failed(verdict):
                result.acknowledged += 1
                result.lost += kept[f"contents {n}"] == 0
            result.doubled += kept[f"contents {n}"] > 1
    return result
