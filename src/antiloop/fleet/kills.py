"""Kills: what the kill switch stops, kept as a small set every step is matched against."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from antiloop.core.verdict import Verdict
from antiloop.fleet.procedure import of_fingerprint

SCOPES = ("all", "agent", "fingerprint", "session")
"""What a kill can name: every session of the fleet, an agent name, a fingerprint, a session."""


@dataclass(frozen=True, slots=True)
class Kill:
    """One kill: its scope and target (``""`` for ``all``), who set it, when and why."""

    scope: str
    target: str = ""
    by: str = "unknown"
    at: float = 0.0
    reason: str = ""

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ValueError(f"a kill's scope is one of {', '.join(SCOPES)}, not {self.scope!r}")
        if (self.scope == "all") != (not self.target):
            raise ValueError(
                f"a kill of {self.scope!r} needs a target"
                if self.target == ""
                else "a kill of 'all' names no target"
            )
        if self.scope == "fingerprint":
            of_fingerprint(self.target)  # ValueError: not a fingerprint

    @property
    def key(self) -> str:
        """The kill's field in the durable set: ``all``, ``agent:<name>``, ``session:<id>``."""
        return key_of(self.scope, self.target)

    def describe(self) -> str:
        """``every session``, ``agent 'explorer'``, ``fingerprint AGENT::…``."""
        if self.scope == "all":
            return "every session of the fleet"
        return f"{self.scope} {self.target!r}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (the API's ``Kill``)."""
        return {**asdict(self), "key": self.key}

    def to_json(self) -> str:
        """The stored form."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Kill:
        """A kill from its JSON form (unknown fields ignored)."""
        return cls(
            str(data["scope"]),
            str(data.get("target") or ""),
            str(data.get("by") or "unknown"),
            float(data.get("at") or 0.0),
            str(data.get("reason") or ""),
        )

    def verdict(self) -> Verdict:
        """The ``stop`` a killed step gets: it names the kill and who set it."""
        why = f": {self.reason}" if self.reason else ""
        return Verdict.stop(
            "kill",
            f"The fleet kill switch stopped this session ({self.describe()}, by {self.by}){why}.",
            outcome="killed",
            fingerprint=self.target if self.scope == "fingerprint" else None,
            hint="A person stopped this run with the fleet kill switch. Stop and report.",
            escalate_to="human",
        )


def key_of(scope: str, target: str = "") -> str:
    """The durable key of a kill (agents compare case-insensitively)."""
    if scope == "all":
        return "all"
    return f"{scope}:{target.lower() if scope == 'agent' else target}"


class KillSet:
    """The active kills, indexed for a step's look-up (replaced whole, never mutated)."""

    __slots__ = ("all", "by_agent", "by_procedure", "by_session", "kills")

    def __init__(self, kills: Iterable[Kill] = ()) -> None:
        self.kills: dict[str, Kill] = {k.key: k for k in kills}
        self.all = self.kills.get("all")
        self.by_agent = {k.target.lower(): k for k in self.kills.values() if k.scope == "agent"}
        self.by_session = {k.target: k for k in self.kills.values() if k.scope == "session"}
        self.by_procedure: dict[tuple[str, str, str], Kill] = {}
        for k in self.kills.values():
            if k.scope == "fingerprint":
                self.by_procedure[of_fingerprint(k.target)] = k

    def __bool__(self) -> bool:
        return bool(self.kills)

    def __len__(self) -> int:
        return len(self.kills)

    def with_kill(self, kill: Kill) -> KillSet:
        """A new set with ``kill`` added (or replacing the one of its key)."""
        return KillSet([*(k for k in self.kills.values() if k.key != kill.key), kill])

    def without(self, key: str) -> KillSet:
        """A new set without the kill of ``key``."""
        return KillSet(k for k in self.kills.values() if k.key != key)

    def match(self, session: str, agent: str) -> Kill | None:
        """The kill of the fleet, of this session or of this agent, if any."""
        return self.all or self.by_session.get(session) or self.by_agent.get(agent.lower())
