"""The fleet controls and their logic, kept in this process (memory and SQLite stores).

``Fleet`` holds the active kills and the known fingerprints in memory and reads them on every
step without I/O; what it must share it writes through five small methods that ``RedisFleet``
(``antiloop.fleet.redis``) replaces: ``_put_kill``, ``_drop_kill``, ``_record_stop``,
``_claim_nudge`` and ``_waste`` (and ``_stats`` for the view).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from antiloop.config import FleetConfig
from antiloop.core.step import Step
from antiloop.core.verdict import Action, Verdict
from antiloop.fleet.kills import Kill, KillSet, key_of
from antiloop.fleet.procedure import of_fingerprint, of_step
from antiloop.fleet.status import Counts, summarize

log = logging.getLogger("antiloop")

LOG_KEPT = 86400.0  # seconds of stops kept for "stops per hour"
LOG_MAX = 100_000  # stops kept at most
NUDGED_MAX = 100_000  # (session, fingerprint) pairs remembered as nudged, in this process
LIVE_MAX = 100_000  # sessions whose last step this process remembers (one-process fleets)
NOT_LEARNED = ("cycle", "fail-streak", "stagnation")  # no one step has these procedures


def tokens_of(step: Step) -> int:
    """The model tokens a step spent, where the host reported them."""
    return (step.tokens_in or 0) + (step.tokens_out or 0)


def wasted_steps(verdict: Verdict) -> int:
    """Steps a loop stop shows wasted: the attempts after the first (a cycle: its second copy)."""
    n = len(verdict.evidence)
    if verdict.detector == "cycle":
        return max(n // 2, 1)
    return max(n - 1, 1)


def learned(
    known: dict[tuple[str, str], tuple[str, int]], fp: str, count: int
) -> dict[tuple[str, str], tuple[str, int]]:
    """``known`` (a new dict) with ``fp`` known by its procedure, the most stopping one kept."""
    try:
        _, op, context = of_fingerprint(fp)
    except ValueError:
        return known
    if op in NOT_LEARNED:
        return known
    found = known.get((op, context))
    if found is not None and found[0] != fp and found[1] > count:
        return known
    return {**known, (op, context): (fp, count)}


def _bounded_put(items: OrderedDict[str, Any], key: str, value: Any, cap: int) -> None:
    items[key] = value
    items.move_to_end(key)
    while len(items) > cap:
        items.popitem(last=False)


class Fleet:
    """Kill switch, known loops and the fleet view of the sessions of one process.

    Args:
        config: the ``[fleet]`` table.
        clock: seconds since the epoch.
    """

    shared = False
    url = "memory://"

    def __init__(
        self, config: FleetConfig | None = None, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.config = config or FleetConfig()
        self.clock = clock
        self._kills = KillSet()
        self._known: dict[tuple[str, str], tuple[str, int]] = {}  # (op, context) -> (fp, n)
        self._nudged: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self._log: OrderedDict[str, float] = OrderedDict()
        self._counts: dict[str, Counts] = {}
        self._live: OrderedDict[str, float] = OrderedDict()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r}, kills={len(self._kills)})"

    # -- the kill switch -----------------------------------------------------------------

    def kill(self, scope: str, target: str = "", *, by: str = "unknown", reason: str = "") -> Kill:
        """Stop every session the kill names, at its next step, until it is lifted."""
        kill = Kill(scope, target.strip(), by.strip() or "unknown", self.clock(), reason.strip())
        self._put_kill(kill)
        self._kills = self._kills.with_kill(kill)
        return kill

    def lift(self, scope: str, target: str = "") -> Kill | None:
        """Lift a kill; the kill that was lifted, or None when there was none."""
        key = key_of(scope, target.strip())
        found = self._drop_kill(key)
        if found is None:
            found = self._kills.kills.get(key)
        self._kills = self._kills.without(key)
        return found

    def kills(self) -> list[Kill]:
        """The active kills, oldest first."""
        return sorted(self._kills.kills.values(), key=lambda k: (k.at, k.key))

    def killed(
        self,
        session: str,
        agent: str,
        tool: str,
        args: Mapping[str, Any],
        paths: Sequence[str] = (),
        cwd: str | None = None,
    ) -> Verdict | None:
        """The stop of a call a kill names, else None (no I/O: the kills are in memory)."""
        kills = self._kills
        if not kills:
            return None
        found = kills.match(session, agent)
        if found is None and kills.by_procedure:
            found = kills.by_procedure.get(of_step(agent, tool, args, paths, cwd))
        return None if found is None else found.verdict()

    def before(self, step: Step) -> Verdict | None:
        """The guard's question before it judges a step: is it killed?"""
        return self.killed(step.session, step.agent, step.tool, step.args, step.paths, step.cwd)

    # -- after a step: stops counted, known procedures nudged ------------------------------

    def after(self, step: Step, verdict: Verdict) -> Verdict:
        """Count a stop; nudge the first step of a known procedure in a session (``nudge``)."""
        if not self.shared:
            with self._lock:
                _bounded_put(self._live, step.session, self.clock(), LIVE_MAX)
        try:
            if verdict.action is Action.STOP:
                self._stopped(step, verdict)
                return verdict
            if verdict.action is Action.CONTINUE and self.config.nudge and self._known:
                return self._nudge(step, verdict)
        except Exception as exc:  # the fleet never fails a step
            log.error("antiloop: fleet controls failed on session %r: %s", step.session, exc)
        return verdict

    def _stopped(self, step: Step, verdict: Verdict) -> None:
        fp = verdict.fingerprint
        if verdict.detector == "terminated":  # the agent went on after its stop: waste
            if fp:
                self._waste(fp, 1, tokens_of(step))
            return
        if verdict.outcome == "goal":
            return
        learn = bool(fp) and verdict.detector != "kill"
        steps = wasted_steps(verdict) if learn else 0
        member = f"{step.session}\0{fp or verdict.detector}"
        fresh, count = self._record_stop(
            member, fp if learn else None, steps, steps * tokens_of(step)
        )
        if fresh and learn and fp and count >= self.config.known_after:
            self._learn(fp, count)
            if count == self.config.known_after:
                self._announce(fp, count)

    def _learn(self, fp: str, count: int) -> None:
        self._known = learned(self._known, fp, count)

    def known(self) -> dict[str, int]:
        """The known fingerprints (that stopped ``known_after`` sessions or more) and counts."""
        return dict(self._known.values())

    def _nudge(self, step: Step, verdict: Verdict) -> Verdict:
        _, op, context = of_step(step.agent, step.tool, step.args, step.paths, step.cwd)
        found = self._known.get((op, context))
        if found is None:
            return verdict
        fp, count = found
        memo = f"{step.session}\0{fp}"
        with self._lock:
            if memo in self._nudged:
                return verdict
            _bounded_put(self._nudged, memo, None, NUDGED_MAX)
        fresh, now = self._claim_nudge(memo, fp)
        if not fresh:
            return verdict
        count = max(count, now)
        return replace(
            verdict,
            action=Action.NUDGE,
            detector="known",
            outcome="known",
            reason=(
                f"{op} {context!r} is a known loop: {fp} stopped {count} sessions of the fleet."
            ),
            hint=(
                f"Careful: {op} on {context!r} looped in {count} other sessions ({fp}). If it "
                "gives the same result again, do not repeat it: change the approach."
            ),
        )

    # -- what a shared fleet writes elsewhere (RedisFleet) ---------------------------------

    def _put_kill(self, kill: Kill) -> None:
        """Keep a kill (one process: the in-memory set is the store)."""

    def _drop_kill(self, key: str) -> Kill | None:
        """Forget a kill; the kill that was kept, if any."""
        return self._kills.kills.get(key)

    def _announce(self, fp: str, count: int) -> None:
        """Tell the other replicas a fingerprint is known now."""

    def _record_stop(
        self, member: str, fp: str | None, steps: int, tokens: int
    ) -> tuple[bool, int]:
        """Count a stop once per (session, fingerprint): (fresh, sessions ``fp`` stopped)."""
        now = self.clock()
        with self._lock:
            if member in self._log:
                return False, self._counts[fp].sessions if fp and fp in self._counts else 0
            _bounded_put(self._log, member, now, LOG_MAX)
            while self._log and next(iter(self._log.values())) < now - LOG_KEPT:
                self._log.popitem(last=False)
            if fp is None:
                return True, 0
            old = self._counts.get(fp, Counts())
            self._counts[fp] = Counts(old.sessions + 1, old.steps + steps, old.tokens + tokens, now)
            if len(self._counts) > self.config.max_known:
                oldest = min(self._counts, key=lambda f: self._counts[f].last)
                del self._counts[oldest]
            return True, self._counts[fp].sessions

    def _claim_nudge(self, memo: str, fp: str) -> tuple[bool, int]:
        """Whether this session is nudged for ``fp`` for the first time, and ``fp``'s count."""
        found = self._counts.get(fp)
        return True, found.sessions if found else 0

    def _waste(self, fp: str, steps: int, tokens: int) -> None:
        """Add steps and tokens to a fingerprint's waste (a step after its stop)."""
        with self._lock:
            old = self._counts.get(fp)
            if old is not None:
                self._counts[fp] = replace(old, steps=old.steps + steps, tokens=old.tokens + tokens)

    def _stats(self) -> tuple[int, list[float], dict[str, Counts]]:
        """Live sessions, the times of the stops of the last day, the counts by fingerprint."""
        now = self.clock()
        with self._lock:
            live = sum(1 for t in self._live.values() if t >= now - self.config.live_window)
            return live, list(self._log.values()), dict(self._counts)

    # -- the view ------------------------------------------------------------------------

    def status(self, top: int = 10) -> dict[str, Any]:
        """The fleet view: live sessions, stops per hour, the costliest fingerprints, kills."""
        live, stops, counts = self._stats()
        return summarize(
            now=self.clock(),
            live=live,
            stops=stops,
            counts=counts,
            kills=[k.to_dict() for k in self.kills()],
            config=self.config,
            store=self.url,
            shared=self.shared,
            top=top,
        )

    def close(self) -> None:
        """Stop watching (a shared fleet's subscriber); the local one has nothing to close."""
