"""What the console's pages read: the sessions list, one session's steps and loop, the fleet.

Functions of the service and the session index (``antiloop.server.console.index``), run off
the event loop by the routes (``antiloop.server.console.routes``). A store without an audit
log (``memory://``) still lists its sessions, from their live state.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from antiloop.server.console.index import STATES, SessionIndex, Summary, usage, usage_of

if TYPE_CHECKING:
    from antiloop.approval import ApprovalRequest
    from antiloop.server.service import Service
    from antiloop.stores.auditlog import AuditRecord

MAX_STEPS = 500
"""The most steps (the latest) one session page carries."""
HOURS = 24
KNOWN_AFTER = 3
"""A fingerprint that stopped this many sessions is a known loop (as ``[fleet] known_after``)."""


@dataclass(frozen=True)
class Filters:
    """What the sessions list is narrowed to (each ``None`` or empty: any)."""

    q: str = ""
    agent: str | None = None
    state: str | None = None
    detector: str | None = None
    since: float | None = None
    until: float | None = None

    def keeps(self, s: Summary) -> bool:
        """True when the session passes every filter but the state's."""
        if self.agent and s.agent != self.agent:
            return False
        if self.detector and self.detector not in s.detectors:
            return False
        if self.since is not None and s.last_at < self.since:
            return False
        if self.until is not None and s.last_at > self.until:
            return False
        if self.q:
            end = s.end or {}
            text = " ".join(
                str(v or "")
                for v in (s.session, s.agent, end.get("reason"), end.get("fingerprint"))
            )
            return self.q.casefold() in text.casefold()
        return True


def pending_by_session(service: Service) -> dict[str, list[ApprovalRequest]]:
    """The pending approval requests (expired ones expire first), by session."""
    found: dict[str, list[ApprovalRequest]] = defaultdict(list)
    for r in service.ledger.list_approvals(status="pending"):
        if r.extra.get("vote_for"):
            continue
        fresh = service.fresh_approval(r)
        if str(fresh.status) == "pending":
            found[fresh.session].append(fresh)
    return found


def summaries(service: Service, index: SessionIndex) -> list[Summary]:
    """Every session the console knows, the most recently active first."""
    if audited(service, index):
        index.refresh()
        return index.snapshot()
    found = []
    for sid in service.store.sessions():  # no audit log: the live state is all there is
        state = service.store.peek(sid)
        summary = Summary(sid, steps=getattr(state, "steps", 0))
        ended = getattr(state, "ended", None)
        if ended is not None and hasattr(ended, "to_wire"):
            wire = ended.to_wire(0)
            summary.end = {**wire, "state": "done" if wire.get("detector") == "goal" else "stopped"}
            summary.detectors.add(str(wire.get("detector")))
        recent = service.recent.get(sid)
        if recent:
            summary.agent = recent[-1].get("agent")
            summary.first_at = recent[0].get("at") or 0.0
            summary.last_at = recent[-1].get("at") or 0.0
        found.append(summary)
    found.sort(key=lambda s: s.last_at, reverse=True)
    return found


def audited(service: Service, index: SessionIndex) -> bool:
    """True when the service's guard writes the audit log the index reads."""
    return index.audited and getattr(service.guard, "_audit", None) is not None


def session_list(
    service: Service, index: SessionIndex, filters: Filters, limit: int, cursor: int
) -> dict[str, Any]:
    """A page of sessions (most recently active first), the counts, and what to filter by."""
    pending = pending_by_session(service)
    known = summaries(service, index)
    names = {s.session for s in known}
    for sid, requests in pending.items():  # a session that only waits for an answer
        if sid not in names:
            first = min(r.created_at for r in requests)
            known.insert(0, Summary(sid, agent=requests[0].agent, first_at=first, last_at=first))
    known.sort(key=lambda s: s.last_at, reverse=True)
    # Filtered on the summaries; only the page is made into rows (a fleet has many sessions).
    others = [(s, s.state(s.session in pending)) for s in known if filters.keeps(s)]
    states = Counter(state for _, state in others)
    matched = [s for s, state in others if not filters.state or state == filters.state]
    page = [s.row(len(pending.get(s.session, ()))) for s in matched[cursor : cursor + limit]]
    for row in page:  # a stop asked outside the console (antiloop stop) is in the ledger only
        if row["state"] == "running":
            by = service.ledger.stop_requested(row["session"])
            if by is not None:
                row["state"], row["stop_requested"] = "stopping", {"by": by, "reason": ""}
    more = cursor + limit < len(matched)
    return {
        "sessions": page,
        "next_cursor": str(cursor + limit) if more else None,
        "counts": {
            "total": len(known),
            "matched": len(matched),
            "states": {state: states.get(state, 0) for state in STATES},
        },
        "agents": sorted({s.agent for s in known if s.agent})[:200],
        "detectors": sorted({d for s in known for d in s.detectors}),
        "audited": audited(service, index),
        "catching_up": index.reading,
    }


def step_row(record: AuditRecord) -> dict[str, Any]:
    """A step or check record as the session page shows it (the texts redacted and capped)."""
    tokens_in, tokens_out, cost = usage_of(record)
    row = record.to_dict()
    for name in ("prev", "hash", "args_sha256", "output_sha256"):
        row.pop(name, None)
    row["args_cut"] = _cut(record.args, record.args_bytes)
    row["output_cut"] = _cut(record.output, record.output_bytes)
    row["usage"] = usage(tokens_in, tokens_out, cost)
    return row


def _cut(text: str | None, size: int | None) -> bool:
    return text is not None and size is not None and size > len(text.encode("utf-8", "replace"))


def session_view(service: Service, index: SessionIndex, sid: str) -> dict[str, Any] | None:
    """One session: its summary, every step (the latest ``MAX_STEPS``), usage, the loop."""
    records: list[AuditRecord] = []
    if audited(service, index):
        index.refresh()
        records = list(index.store.audit_records(session=sid))
    pending = pending_by_session(service).get(sid, [])
    summary = index.get(sid) if records else None
    if summary is None:
        summary = next((s for s in summaries(service, index) if s.session == sid), None)
    if summary is None and pending:
        first = pending[0]
        summary = Summary(
            sid, agent=first.agent, first_at=first.created_at, last_at=first.created_at
        )
    if summary is None:
        return None
    steps = [step_row(r) for r in records if r.kind in ("step", "check")]
    row = summary.row(len(pending))
    if row["state"] == "running" and row["stop_requested"] is None:
        by = service.ledger.stop_requested(sid)
        if by is not None:
            row["state"], row["stop_requested"] = "stopping", {"by": by, "reason": ""}
    return {
        "session": sid,
        "summary": row,
        "steps": steps[-MAX_STEPS:],
        "steps_shown": min(len(steps), MAX_STEPS),
        "usage": usage(
            sum(s["usage"]["in"] for s in steps),
            sum(s["usage"]["out"] for s in steps),
            sum(s["usage"]["usd"] for s in steps),
        ),
        "people": _people(records),
        "loop": loop_of(summary.end, steps),
        "audited": audited(service, index),
    }


def loop_of(end: dict[str, Any] | None, steps: list[dict[str, Any]]) -> dict[str, Any] | None:
    """For a session that a loop stopped: the steps that matched and what made them the same."""
    if not end or not end.get("fingerprint") or not end.get("evidence"):
        return None
    from antiloop.core.fingerprint import parse

    try:
        parts = parse(end["fingerprint"])
    except ValueError:
        return None
    wanted = set(end["evidence"])
    matched = [s for s in steps if s["kind"] == "step" and s["index"] in wanted]
    same_args = len({s["args"] for s in matched}) == 1 if matched else False
    same_output = (
        len({(s["output"], s["output_bytes"]) for s in matched}) == 1 if matched else False
    )
    return {
        "detector": end.get("detector"),
        "outcome": end.get("outcome"),
        "reason": end.get("reason"),
        "fingerprint": end["fingerprint"],
        "agent": parts.agent,
        "operation": parts.operation,
        "context": parts.context,
        "result": parts.result,
        "evidence": sorted(wanted),
        "steps": matched,
        "same_args": same_args,
        "same_output": same_output,
    }


def _costliest(c: dict[str, Any]) -> tuple[Any, ...]:
    spent = c["usage"]
    return (-spent["usd"], -(spent["in"] + spent["out"]), -c["steps"], c["fingerprint"])


def _people(records: list[AuditRecord]) -> list[dict[str, Any]]:
    """Who decided what in the session: approvals, stops and feedback, oldest first."""
    said = []
    for r in records:
        detail = r.detail or {}
        if r.kind == "approval":
            said.append(
                {
                    "at": r.at,
                    "by": detail.get("decided_by") or r.approved_by,
                    "what": str(detail.get("status") or "decided"),
                    "tool": r.tool,
                    "text": detail.get("comment") or "",
                }
            )
        elif r.kind == "session" and detail.get("event") in ("stop", "feedback"):
            said.append(
                {
                    "at": r.at,
                    "by": detail.get("decided_by"),
                    "what": str(detail.get("event")),
                    "tool": None,
                    "text": detail.get("reason") or detail.get("text") or "",
                }
            )
    return said


def fleet_view(service: Service, index: SessionIndex, hours: int, top: int) -> dict[str, Any]:
    """Stops per hour, by detector; the costliest and the known loops; sessions by state."""
    known = summaries(service, index)
    now = time.time()
    start = (now // 3600 - hours + 1) * 3600  # the start of the oldest hour shown
    per_hour = [0] * hours
    detectors: Counter[str] = Counter()
    stops = (
        index.stop_times()
        if audited(service, index)
        else [(s.last_at, (s.end or {}).get("detector"), None) for s in known if s.end]
    )
    for at, detector, _ in stops:
        if at >= start and detector != "goal":  # a goal reached is a success, not a stop
            slot = int((at - start) // 3600)
            if 0 <= slot < hours:
                per_hour[slot] += 1
                detectors[detector or "?"] += 1
    costs: dict[str, dict[str, Any]] = {}
    for s in known:
        fp = (s.end or {}).get("fingerprint")
        if not fp or s.end is None or s.end.get("state") == "done":
            continue
        c = costs.setdefault(
            fp, {"fingerprint": fp, "sessions": 0, "steps": 0, "usage": usage(0, 0, 0.0)}
        )
        c["sessions"] += 1
        c["steps"] += s.steps
        c["usage"] = usage(
            c["usage"]["in"] + s.tokens_in,
            c["usage"]["out"] + s.tokens_out,
            c["usage"]["usd"] + s.cost_usd,
        )
        c["last"] = max(c.get("last", 0.0), s.end.get("at") or s.last_at)
        c["detector"] = s.end.get("detector")
    ranked = sorted(costs.values(), key=_costliest)
    pending = pending_by_session(service)
    states = Counter(s.state(s.session in pending) for s in known)
    return {
        "hours": hours,
        "hour_starts": [start + 3600 * i for i in range(hours)],
        "stops_per_hour": per_hour,
        "stops": sum(per_hour),
        "by_detector": dict(detectors.most_common()),
        "costliest": ranked[:top],
        "known_loops": sorted(
            (c for c in costs.values() if c["sessions"] >= KNOWN_AFTER),
            key=lambda c: (-c["sessions"], c["fingerprint"]),
        )[:top],
        "known_after": KNOWN_AFTER,
        "states": {state: states.get(state, 0) for state in STATES},
        "sessions": len(known),
        "pending_approvals": sum(len(v) for v in pending.values()),
        "audited": audited(service, index),
    }


__all__ = [
    "Filters",
    "fleet_view",
    "loop_of",
    "session_list",
    "session_view",
    "step_row",
]
