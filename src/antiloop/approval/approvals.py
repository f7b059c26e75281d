"""The Approvals coordinator: policy, requests, channels and waiting, beside the guard.

    approvals = Approvals(store, ApprovalPolicy(), [TerminalChannel()])
    guard = Guard(store=store, approvals=approvals)
    gate = guard.gate("Bash", {"command": "rm -rf build"}, session="s1")
    if not gate.allowed: ...   # tell the model gate.verdict.hint
    run_tool(gate.args)

The approvals never call the guard: the guard hands them its verdict and the call, and they
return a ``Ruling`` the guard applies. Before each call ``gate`` (1) stops the run when a person
asked it to stop, (2) keeps the guard's verdict, (3) asks the policy and, for a risky call, a
person through the channels, and (4) hands any feedback a person queued for the session to the
agent as the verdict's ``hint``. After a step, ``escalate`` brings an ``ask`` or a loop stop to
a person. Each has an async twin (``agate``, ``aescalate``) that waits without blocking the loop.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from antiloop.approval.channels import Answer, Channel
from antiloop.approval.ledger import ApprovalStore, ledger_of
from antiloop.approval.policy import ApprovalPolicy
from antiloop.approval.request import ApprovalRequest, ApprovalStatus
from antiloop.approval.ruling import Call, Gate, Ruling
from antiloop.approval.spending import settling
from antiloop.approval.waiting import Flow, Wakeup
from antiloop.audit import AuditEvent
from antiloop.core.errors import ApprovalDenied, ChannelError, Halt
from antiloop.core.redact import redact_text, redact_value
from antiloop.core.verdict import Action, Verdict

if TYPE_CHECKING:
    from antiloop.core.step import Step

log = logging.getLogger("antiloop")

FINAL = frozenset(
    {ApprovalStatus.APPROVED, ApprovalStatus.DENIED, ApprovalStatus.EDITED, ApprovalStatus.EXPIRED}
)
_YES = frozenset({ApprovalStatus.APPROVED, ApprovalStatus.EDITED})


_EDITED_KEPT = 1024
"""The most edited arguments kept in memory for calls still to run."""


class Approvals:
    """Asks people before risky calls and brings their stops and feedback to the agent.

    Args:
        store: where requests, feedback and stop requests live (the guard's store); a store
            without approval methods keeps them in this process.
        policy: which calls need a person; the default asks for writes, deletes, exec, network.
        channels: how people are told and answer (terminal, web, webhook, callback). The first
            answer wins across channels; with ``policy.required`` > 1, that many approvals.
        clock: seconds since the epoch (inject a fake one in tests).
        poll: seconds between looks at the store while a request waits for another process.
        wait: wait for an answer (default). False: return ``ask`` with the pending request,
            for callers that come back later (the service's ``/v1/check``).

    Example:
        >>> from antiloop.approval import Approvals, Call, CallbackChannel
        >>> from antiloop.stores.memory import MemoryStore
        >>> approvals = Approvals(MemoryStore(), channels=[CallbackChannel(lambda r: False)])
        >>> approvals.gate(Call("Bash", {"command": "rm -rf build"})).verdict.outcome
        'denied'
    """

    def __init__(
        self,
        store: object,
        policy: ApprovalPolicy | None = None,
        channels: Sequence[Channel] = (),
        *,
        clock: Callable[[], float] = time.time,
        poll: float = 0.2,
        wait: bool = True,
    ) -> None:
        self.ledger: ApprovalStore = ledger_of(store)
        self._audit: Callable[[AuditEvent], None] | None = getattr(store, "append_audit", None)
        self.policy = policy or ApprovalPolicy()
        self.channels = list(channels)
        self.clock = clock
        self.poll = poll
        self.wait_for_answer = wait
        self._allowance: dict[str, tuple[int, str]] = {}
        # the arguments a person edited, as given: the store keeps them redacted, and the call
        # runs with these (a request decided in another process runs with the stored ones)
        self._edited: dict[str, dict[str, Any]] = {}
        self._wakeup = Wakeup()
        self.listeners: list[Callable[[str, ApprovalRequest], None]] = []

    def __repr__(self) -> str:
        return f"Approvals({self.policy!r}, channels={[c.name for c in self.channels]!r})"

    # -- before a call ---------------------------------------------------------------------

    def gate(self, call: Call, verdict: Verdict | None = None) -> Ruling:
        """Rule on a call before it runs: stop request, the guard's verdict, policy and person.

        Args:
            call: the call (tool, arguments, session, agent, paths, working directory).
            verdict: the guard's verdict on it (``Guard.check``); continue by default.

        Returns:
            The ruling: its verdict (with any queued feedback as the hint), the arguments to
            run with, the request when a person was asked, and ``end`` when a person stopped
            the run (the guard ends the session: later steps answer ``terminated``).
        """
        return self._wakeup.run(self._gating(call, verdict or Verdict.ok()))

    async def agate(self, call: Call, verdict: Verdict | None = None) -> Ruling:
        """``gate`` from an event loop: store work in threads, the person awaited."""
        return await self._wakeup.arun(self._gating(call, verdict or Verdict.ok()))

    def _gating(self, call: Call, verdict: Verdict) -> Flow[Ruling]:
        session, args = call.session, dict(call.args)
        stopped = self.stopped(session)
        if stopped is not None:
            return Ruling(session, stopped, args, end=stopped)
        request = None
        if verdict.action < Action.BLOCK:
            tool = call.tool
            decision = self.policy.decide(tool, args, call.paths, call.cwd)
            if decision.decision == "deny":
                verdict = Verdict.block(
                    "approval",
                    f"The policy refuses {tool}: {decision.reason}.",
                    outcome="denied",
                    hint=f"{tool} calls of this kind ({decision.risk}) are not allowed here.",
                )
            elif decision.decision == "ask":
                request = yield from self._asking(
                    session=session,
                    agent=call.agent,
                    tool=tool,
                    args=args,
                    risk=decision.risk,
                    reason=decision.reason,
                    rule=decision.rule,
                )
                verdict = verdict_of(request)
                if request.status is ApprovalStatus.EDITED and request.edited_args is not None:
                    args = dict(self._edited.pop(request.id, request.edited_args))
        return Ruling(session, self.with_feedback(session, verdict), args, request)

    def enforce(self, gate: Gate | Ruling, session: str = "default") -> Mapping[str, Any]:
        """Raise ``ApprovalDenied`` (or the verdict's ``Halt``) when the call must not run.

        Returns:
            The arguments to run the call with.
        """
        verdict = gate.verdict
        if verdict.action < Action.BLOCK:
            return gate.args
        if verdict.detector == "approval":
            raise ApprovalDenied(verdict, session)
        raise Halt(verdict, session)

    def stopped(self, session: str) -> Verdict | None:
        """The stop verdict when a person asked the session to stop, else None.

        The guard ends the session with it (``Guard.end``), so later steps answer
        ``terminated``; ``gate`` says so in its ruling's ``end``.
        """
        by = self.ledger.stop_requested(session)
        if by is None:
            return None
        return Verdict.stop(
            "person",
            f"Stopped by {by}.",
            outcome="stopped",
            hint=f"A person ({by}) stopped this run. Stop now and report what you have done.",
        )

    def with_feedback(self, session: str, verdict: Verdict) -> Verdict:
        """The verdict with any queued feedback for the session as (the start of) its hint."""
        return feedback_verdict(verdict, self.ledger.pop_feedback(session))

    # -- asking ----------------------------------------------------------------------------

    def create(
        self,
        *,
        session: str,
        agent: str,
        tool: str,
        args: Mapping[str, Any],
        risk: str,
        reason: str,
        fingerprint: str | None = None,
        extra: Mapping[str, Any] | None = None,
        rule: str | None = None,
    ) -> ApprovalRequest:
        """Store a new pending request (it expires after ``policy.timeout`` seconds).

        ``rule`` names the policy rule that asked; the record keeps it, with who answered,
        through which channel and when (``antiloop log --approvals``).

        The request holds the call redacted (``antiloop.core.redact``): the store, every channel
        (terminal, webhook, web) and every listener (live events) see no secret. The caller
        keeps the raw arguments to run the call with.
        """
        now = self.clock()
        extras = dict(extra or {})
        if self.policy.required > 1:
            extras["required"] = self.policy.required
        request = ApprovalRequest(  # redacted here: stores, channels and listeners see this
            id=uuid.uuid4().hex,
            session=session,
            agent=agent,
            tool=redact_text(tool),
            args=redact_value(dict(args)),
            risk=risk,
            reason=redact_text(reason),
            created_at=now,
            expires_at=now + self.policy.timeout,
            fingerprint=redact_text(fingerprint) if fingerprint else fingerprint,
            extra=redact_value(extras),
            rule=rule,
        )
        self.ledger.put_approval(request)
        self._notify("created", request)
        return request

    def ask(self, **fields: Any) -> ApprovalRequest:
        """Create a request, deliver it on every channel and wait for the answer.

        A standing ``y -N`` allowance of the session approves it at once. With ``wait=False``
        the pending request is returned after delivery.
        """
        return self._wakeup.run(self._asking(**fields))

    async def aask(self, **fields: Any) -> ApprovalRequest:
        """``ask`` from an event loop: delivered in a thread, the answer awaited."""
        return await self._wakeup.arun(self._asking(**fields))

    def _asking(self, **fields: Any) -> Flow[ApprovalRequest]:
        session = fields["session"]
        allowance = self._allowance.get(session)
        request = self.create(**fields)
        if allowance is not None:
            left, by = allowance
            if left <= 1:
                del self._allowance[session]
            else:
                self._allowance[session] = (left - 1, by)
            yes = Answer.approve(f"{by} (approve next)")
            return self.answer(request.id, replace(yes, channel="allowance"))
        self.deliver(request)
        if not self.wait_for_answer:
            current = self.ledger.get_approval(request.id)
            return current if current is not None else request
        return (yield from self._waiting(request.id))

    def deliver(self, request: ApprovalRequest) -> None:
        """Hand the request to every channel, each in its own thread; no channel → denied."""
        if not self.channels:
            return
        failures: list[str] = []
        lock = threading.Lock()

        def run(channel: Channel) -> None:
            name = channel.name
            try:
                channel.deliver(
                    request,
                    lambda ans: self.answer(request.id, replace(ans, channel=ans.channel or name)),
                )
            except ChannelError as exc:
                log.warning("antiloop: channel %s could not deliver: %s", channel.name, exc)
                with lock:
                    failures.append(channel.name)
                    every = len(failures) == len(self.channels)
                if every:
                    said = f"No channel could reach a person: {exc}"
                    self.answer(request.id, Answer.deny("antiloop", said, channel="antiloop"))
            except Exception:  # a channel's bug must not approve, nor kill the run
                log.exception("antiloop: channel %s failed", channel.name)
                with lock:
                    failures.append(channel.name)
                    every = len(failures) == len(self.channels)
                if every:
                    failed = Answer.deny("antiloop", "Every channel failed.", channel="antiloop")
                    self.answer(request.id, failed)

        if len(self.channels) == 1:
            run(self.channels[0])
            return
        for channel in self.channels:
            threading.Thread(
                target=run, args=(channel,), name=f"antiloop-{channel.name}", daemon=True
            ).start()

    def answer(self, id: str, answer: Answer) -> ApprovalRequest:
        """Record a person's answer: the first decides, unless k approvals are required.

        With ``required`` k > 1 (k-of-n), an approval is a vote; the k-th distinct approver
        decides the request approved, and any deny decides it denied at once. ``answer.by``
        must be the identity the channel authenticated (the service's token, a signed
        webhook's user, the terminal's user), never a name the answer carries: the same
        identity (compared case-insensitively, white space collapsed) counts once.
        """
        current = self.ledger.get_approval(id)
        if current is None:
            raise KeyError(id)
        if current.status is not ApprovalStatus.PENDING:
            return current
        if answer.comment:  # a person's words are stored, shown and sent on: redacted too
            answer = replace(answer, comment=redact_text(answer.comment))
        needed = int(current.extra.get("required", 1)) if current.extra else 1
        if answer.status in _YES and needed > 1:
            votes = self.votes(id)
            voter = identity(answer.by)
            if not voter or voter in votes:
                return current
            answer = replace(answer, by=voter)
            self._vote(current, answer)
            votes = self.votes(id)
            if len(votes) < needed:
                self._notify("vote", current)
                return current
            answer = replace(answer, by=", ".join(sorted(votes)))
        if answer.edited_args is not None:
            while len(self._edited) >= _EDITED_KEPT:
                del self._edited[next(iter(self._edited))]
            self._edited[id] = dict(answer.edited_args)
        decided = self.ledger.decide_approval(
            id,
            answer.status,
            answer.by,
            comment=answer.comment,
            edited_args=answer.edited_args,
            now=self.clock(),
        )
        if decided.decided_by == answer.by and decided.status in FINAL:
            if answer.channel and decided.channel is None:
                decided = replace(decided, channel=answer.channel)  # how it was approved, kept
                self.ledger.put_approval(decided)
            self._audited(decided)
        if decided.status in FINAL and decided.decided_by == answer.by:
            if answer.approve_next > 0 and decided.status is ApprovalStatus.APPROVED:
                self._allowance[decided.session] = (answer.approve_next, answer.by)
            if answer.stop:
                self.ledger.request_stop(decided.session, answer.by)
        self._notify("decided", decided)
        return decided

    def votes(self, id: str) -> set[str]:
        """Who has approved a k-of-n request so far: distinct identities (see ``identity``)."""
        request = self.ledger.get_approval(id)
        if request is None:
            return set()
        return {
            identity(r.decided_by or "")
            for r in self.ledger.list_approvals(session=request.session)
            if r.extra.get("vote_for") == id and r.status is ApprovalStatus.APPROVED
        } - {""}

    def _vote(self, parent: ApprovalRequest, answer: Answer) -> None:
        now = self.clock()
        vote = replace(
            parent,
            id=f"{parent.id}.{uuid.uuid4().hex[:8]}",
            created_at=now,
            expires_at=None,
            extra={"vote_for": parent.id},
        )
        self.ledger.put_approval(vote)
        self.ledger.decide_approval(
            vote.id, ApprovalStatus.APPROVED, answer.by, comment=answer.comment, now=now
        )

    def wait(self, id: str, timeout: float | None = None) -> ApprovalRequest:
        """Wait until the request is decided or expired (expiry denies, never approves).

        Args:
            id: the request.
            timeout: seconds to wait at most (by ``clock``); then the request is expired.
        """
        return self._wakeup.run(self._waiting(id, timeout))

    def _waiting(self, id: str, timeout: float | None = None) -> Flow[ApprovalRequest]:
        deadline = None if timeout is None else self.clock() + timeout
        while True:
            request = self.ledger.get_approval(id)
            if request is None:
                raise KeyError(id)
            if request.status in FINAL:
                self._cancel(request)
                return request
            now = self.clock()
            expired = request.expires_at is not None and now >= request.expires_at
            if expired or (deadline is not None and now >= deadline):
                request = self.expire(id)
                if request.status in FINAL:
                    self._cancel(request)
                    return request
            yield self.poll

    def expire(self, id: str) -> ApprovalRequest:
        """End a pending request now: ``expired`` past its ``expires_at``, else denied by timeout.

        Either way it denies; it never approves.
        """
        request = self.ledger.get_approval(id)
        if request is None:
            raise KeyError(id)
        if request.status is not ApprovalStatus.PENDING:
            return request
        decided = self.ledger.decide_approval(
            id,
            ApprovalStatus.DENIED,
            "timeout",
            comment="No answer came in time.",
            now=self.clock(),
        )
        if decided.decided_by == "timeout" and decided.channel is None:
            decided = replace(decided, channel="timeout")
            self.ledger.put_approval(decided)
            self._audited(decided)
        self._notify("decided", decided)
        return decided

    def _audited(self, decided: ApprovalRequest) -> None:
        """Put the decision in the audit log: who, through which channel, when, how long, why."""
        if self._audit is None:
            return
        try:
            self._audit(
                AuditEvent(
                    kind="approval",
                    session=decided.session,
                    at=decided.decided_at if decided.decided_at is not None else self.clock(),
                    agent=decided.agent,
                    tool=decided.tool,
                    args=decided.args,
                    detail=approval_detail(decided),
                )
            )
        except Exception:  # the decision stands in the approvals table whatever the log does
            log.exception("antiloop: could not log approval %s", decided.id)

    def _cancel(self, request: ApprovalRequest) -> None:
        for channel in self.channels:
            cancel = getattr(channel, "cancel", None)
            if cancel is not None:
                cancel(request)

    def _notify(self, event: str, request: ApprovalRequest) -> None:
        self._wakeup.notify()
        for listener in self.listeners:
            listener(event, request)

    # -- loops and stops -------------------------------------------------------------------

    def escalate(
        self, verdict: Verdict, step: Step, spend: Mapping[str, Any] | None = None
    ) -> Ruling:
        """Bring an ``ask`` or a loop ``stop`` to a person, when the policy escalates to humans.

        An approved ``ask`` goes on; a denied one stops. An approved ``stop`` goes on too, and
        the ruling's ``reset`` asks the guard to reset the session's windows; otherwise the stop
        stands. With ``escalate_to = "supervisor"`` the verdict is kept. A budget check-in
        (``spend``: what the person is shown, ``Budgets.report``) is always a person's call.
        """
        return self._wakeup.run(self._escalating(verdict, step, spend))

    async def aescalate(
        self, verdict: Verdict, step: Step, spend: Mapping[str, Any] | None = None
    ) -> Ruling:
        """``escalate`` from an event loop: store work in threads, the person awaited."""
        return await self._wakeup.arun(self._escalating(verdict, step, spend))

    def _escalating(
        self, verdict: Verdict, step: Step, spend: Mapping[str, Any] | None
    ) -> Flow[Ruling]:
        kept = Ruling(step.session, verdict, step.args)
        if verdict.action < Action.ASK or verdict.detector in (None, "goal", "terminated"):
            return kept
        if verdict.detector == "budget":  # a spending check-in: always a person's call
            if spend is None:
                return kept
            return (yield from settling(self._asking, verdict, step, spend))
        if self.policy.escalate_to != "human":
            return kept
        request = yield from self._asking(
            session=step.session,
            agent=step.agent,
            tool=step.tool,
            args=dict(step.args),
            risk="loop",
            reason=verdict.reason,
            fingerprint=verdict.fingerprint,
            extra={"action": verdict.action.name.lower(), "detector": verdict.detector},
            rule=f"escalate:{verdict.detector}",
        )
        if request.status in _YES:
            reset = None
            if verdict.action is Action.STOP:
                reset = f"a person ({request.decided_by}) let the run go on"
            hint = request.comment or "A person let the run go on; change your approach."
            going_on = Verdict(
                Action.NUDGE,
                verdict.detector,
                verdict.outcome,
                verdict.fingerprint,
                reason=f"{verdict.reason} Approved by {request.decided_by}.",
                hint=f"A person says: {hint}" if request.comment else hint,
                evidence=verdict.evidence,
            )
            return Ruling(step.session, going_on, step.args, request, reset=reset)
        reason = f"{verdict.reason} Not approved ({request.status}, {request.decided_by})."
        hint = f"A person says: {request.comment}" if request.comment else verdict.hint
        stopped = replace(verdict, action=Action.STOP, reason=reason, hint=hint)
        return Ruling(step.session, stopped, step.args, request)

    def approver(self, session: str = "default") -> Callable[[Verdict], bool]:
        """A ``Guard(approver=...)`` callable: ask a person about an ``ask`` verdict."""

        def approve(verdict: Verdict) -> bool:
            request = self.ask(
                session=session,
                agent="agent",
                tool=verdict.detector or "guard",
                args={},
                risk="loop",
                reason=verdict.reason,
                fingerprint=verdict.fingerprint,
                rule=f"approver:{verdict.detector}",
            )
            return request.status in _YES

        return approve

    def stop(self, session: str, by: str = "person") -> None:
        """Ask a session to stop at its next step."""
        self.ledger.request_stop(session, by)

    def feedback(self, session: str, text: str) -> None:
        """Queue text for the agent's next step (it arrives as the verdict's hint), redacted."""
        self.ledger.push_feedback(session, redact_text(text))


def approval_detail(request: ApprovalRequest) -> dict[str, Any]:
    """How a request was decided, as the audit log and ``antiloop log --approvals`` show it."""
    return {
        "request": request.id,
        "approved": request.status in _YES,
        "status": str(request.status),
        "decided_by": request.decided_by,
        "channel": request.channel,
        "rule": request.rule,
        "risk": request.risk,
        "asked_at": request.created_at,
        "waited_s": None if request.waited is None else round(request.waited, 3),
        "comment": request.comment,
        "fingerprint": request.fingerprint,
    }


def identity(by: str) -> str:
    """The voter a name stands for: white space collapsed, case folded (``" Alice "`` is alice).

    Example:
        >>> identity("  Alice  Smith ")
        'alice smith'
    """
    return " ".join(str(by).split()).casefold()


def verdict_of(request: ApprovalRequest) -> Verdict:
    """The verdict a decided (or pending) request gives the call it asked about."""
    status = request.status
    said = f"A person says: {request.comment}" if request.comment else ""
    if status in _YES:
        edited = status is ApprovalStatus.EDITED
        reason = f"{'Edited and approved' if edited else 'Approved'} by {request.decided_by}."
        if not said and not edited:
            return Verdict(reason=reason)
        hint = said or "A person changed the arguments of this call."
        return Verdict(Action.NUDGE, "approval", str(status), reason=reason, hint=hint)
    if status is ApprovalStatus.PENDING:
        return Verdict.ask(
            "approval",
            f"{request.tool} waits for a person's approval ({request.risk}).",
            outcome="pending",
            hint="This call waits for a person's approval.",
        )
    if status is ApprovalStatus.EXPIRED:
        return Verdict.block(
            "approval",
            f"No one approved {request.tool} in time; the request expired.",
            outcome="expired",
            hint="No one approved this call in time; do not run it. Try a safer way or stop.",
        )
    return Verdict.block(
        "approval",
        f"{request.decided_by} denied {request.tool}.",
        outcome="denied",
        hint=said or "A person denied this call; do not retry it. Do something else.",
    )


def feedback_verdict(verdict: Verdict, texts: list[str]) -> Verdict:
    """``verdict`` with a person's ``texts`` leading its hint; a continue becomes a nudge."""
    said = " ".join(f"A person says: {t.strip()}" for t in texts if t.strip())
    if not said:
        return verdict
    hint = f"{said} {verdict.hint}".strip()
    if verdict.action is Action.CONTINUE:
        return replace(
            verdict,
            action=Action.NUDGE,
            detector=verdict.detector or "feedback",
            outcome=verdict.outcome or "feedback",
            reason=verdict.reason or "Feedback from a person.",
            hint=hint,
        )
    return replace(verdict, hint=hint)
