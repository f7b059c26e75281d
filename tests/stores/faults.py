"""What the fault-injection tests of every backend share: how a store failure reads, and the
tally of steps sent, acknowledged, lost and doubled against what the store kept."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from antiloop.core.verdict import Action, Verdict


def store_failed(verdict: Verdict) -> bool:
    """The verdict a store failure gives (allow: unguarded; block: detector 'store')."""
    return verdict.detector == "store" or verdict.reason.startswith("unguarded")


@dataclass
class Tally:
    """Steps sent, acknowledged (a verdict that is no store failure), lost and doubled; for
    a fleet, verdicts missed (not the in-process guard's) and approvals changed."""

    steps: int = 0
    acknowledged: int = 0
    lost: int = 0
    doubled: int = 0
    missed: int = 0
    changed: int = 0

    def harm(self) -> tuple[int, int, int, int]:
        """``(lost, doubled, missed, changed)``: all four must be 0."""
        return self.lost, self.doubled, self.missed, self.changed


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


def seed_approvals(store: Any, tag: str = "ap") -> list[dict[str, Any]]:
    """Four approval requests, two of them decided; what they read as now (``to_dict``)."""
    from antiloop.approval.request import ApprovalRequest

    for i in range(4):
        store.put_approval(
            ApprovalRequest(
                f"{tag}{i}",
                f"{tag}-s{i}",
                "a",
                "bash",
                {"command": f"deploy {i}"},
                "exec",
                "deploys",
                100.0 + i,
            )
        )
    store.decide_approval(f"{tag}0", "approved", "ann", comment="ok", now=150.0)
    store.decide_approval(f"{tag}1", "denied", "bob", now=151.0)
    return approvals_now(store, tag)


def approvals_now(store: Any, tag: str = "ap") -> list[dict[str, Any]]:
    """The seeded requests as the store reads them now."""
    found = [store.get_approval(f"{tag}{i}") for i in range(4)]
    return [{} if r is None else r.to_dict() for r in found]


def changed(before: list[dict[str, Any]], store: Any, tag: str = "ap") -> int:
    """How many seeded approval requests read differently now."""
    return sum(a != b for a, b in zip(before, approvals_now(store, tag), strict=True))
