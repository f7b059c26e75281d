"""The Guard: records steps, judges them with its detectors, and refuses stopped procedures.

    guard = Guard()
    verdict = guard.record(Step(tool="Grep", args={"pattern": "x"}, output="a.py:1: x"))

``check()`` runs before a tool call, ``record()`` after it; ``enforce()`` turns a verdict into
an exception, ``session()`` binds a session id, and ``wrap`` guards a plain Python function.
The decisions are made by the pure core (``antiloop.core.decide``); the guard moves the data
between it and the store, the embedder, the approvals, the listeners and the audit log.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from antiloop.audit import AuditEvent
from antiloop.config import GuardConfig
from antiloop.core import decide
from antiloop.core.detectors import Detector, DetectorFn
from antiloop.core.errors import ApprovalDenied, StoreError
from antiloop.core.history import SessionState
from antiloop.core.redact import redact_name
from antiloop.core.step import Step, step_from_dict, valid_step, valid_unicode
from antiloop.core.verdict import Action, Verdict
from antiloop.defaults import LazyEmbedder, default_detector, policy_of, telemetry_listener
from antiloop.listener import Listener as Listener
from antiloop.stores import Store
from antiloop.wrap import halt_for, wrapped

if TYPE_CHECKING:
    import logging

    from antiloop.approval import Approvals, Call, Gate, Ruling
    from antiloop.budgets import Budgets
    from antiloop.config import FleetConfig
    from antiloop.embed import Embedder
    from antiloop.fleet import Fleet
    from antiloop.outage import OutageConfig

__all__ = ["Guard", "LazyEmbedder", "Listener", "default_detector"]

P = ParamSpec("P")
R = TypeVar("R")

_bound_session: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "antiloop_session", default=None
)


def _log() -> logging.Logger:
    """The ``antiloop`` logger; imported on first use (the hook path starts per call)."""
    import logging

    return logging.getLogger("antiloop")


def _split(store: Store | str | None, records: Store | str) -> Store:
    """State in ``store`` (memory by default), records in ``records``: a SplitStore."""
    from antiloop.stores import open_store
    from antiloop.stores.memory import MemoryStore
    from antiloop.stores.split import SplitStore

    state = open_store(store) if isinstance(store, str) else store or MemoryStore()
    return SplitStore(state, open_store(records) if isinstance(records, str) else records)


class Guard:
    """Keeps agents from looping: judges each step and remembers what it needs, nothing more.

    Args:
        detector: the policy; by default the one ``config`` describes.
        config: thresholds and switches (docs/protocol.md section 7).
        embedder: for the goal and stagnation checks; by default ``config.embedder``, loaded
            on first use.
        listeners: observers of every verdict (audit logs, metrics).
        approver: called with an ``ask`` verdict by ``enforce()``; returns True to go on.
        mode: ``enforce`` (default) or ``shadow``: judge and log everything, never block.
        store: where session state lives: a Store or a URL; in this process by default.
        records: where the audit log, approvals and interventions live when not in ``store``
            (a Store or URL, e.g. ``postgresql://…`` beside ``store="redis://…"``): a
            ``SplitStore`` (``antiloop.stores.split``) then judges each step.
        audit: write an audit event per step to the store, when the store keeps an audit log
            (default: yes, except for the in-process memory store).
        on_store_error: ``allow`` (default: go on unguarded, with a loud log line) or
            ``block`` when the store fails.
        clock: seconds since the epoch, for audit times (inject a fake one in tests).
        approvals: people in the loop (``antiloop.approval.Approvals``): ``check`` then also
            stops a run a person stopped, asks before risky calls (the approval policy) and
            passes on queued feedback as the hint; ``record`` escalates ask and loop-stop
            verdicts to a person when the policy escalates to humans.
        budgets: token and cost limits per session and agent (``antiloop.budgets``): a soft
            limit answers ``ask`` (a person decides, with ``approvals``), a hard one stops.
        fleet: the fleet controls (``antiloop.fleet``: kill switch, known loops), or the
            ``[fleet]`` settings to open them over the store (shared through a Redis store).
        outage: how a failing store is ridden out (``antiloop.outage``: retries with backoff
            for ``retry_window`` seconds, then ``on_store_error``, the step journaled locally
            and replayed when the store is back); the ``[outage]`` defaults when not given.
        telemetry: export each step to OpenTelemetry when the standard OTLP environment
            names an endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``antiloop.telemetry``; the
            ``otel`` extra); False never does.

    Example:
        >>> guard = Guard()
        >>> step = Step(tool="grep", args={"pattern": "x"}, output="a")
        >>> guard.record(step).action.wire, guard.record(step).action.wire
        ('continue', 'stop')
    """

    def __init__(
        self,
        detector: Detector | DetectorFn | None = None,
        *,
        config: GuardConfig | None = None,
        embedder: Embedder | None = None,
        listeners: Sequence[Listener] = (),
        approver: Callable[[Verdict], bool] | None = None,
        mode: str | None = None,
        store: Store | str | None = None,
        records: Store | str | None = None,
        audit: bool | None = None,
        on_store_error: str | None = None,
        clock: Callable[[], float] = time.time,
        approvals: Approvals | None = None,
        budgets: Budgets | None = None,
        fleet: Fleet | FleetConfig | None = None,
        outage: OutageConfig | None = None,
        telemetry: bool = True,
    ) -> None:
        from antiloop.stores.memory import MemoryStore  # here: it imports approval requests

        where = store if isinstance(store, str) else None

        self.config = config or GuardConfig()
        self.approvals = approvals
        self.embedder: Embedder = embedder or LazyEmbedder(self.config.embedder)
        self.policy = policy_of(
            self.config,
            detector if detector is not None else default_detector(self.config, self.embedder),
            mode=mode or self.config.mode,
            budgets=budgets.judge if budgets else None,
        )
        self._budgets = budgets if budgets else None
        self.listeners = list(listeners)
        if telemetry:  # the standard OTLP environment (OTEL_EXPORTER_OTLP_ENDPOINT...) asks
            listener = telemetry_listener(None, "the OTLP environment")
            if listener is not None and not any(type(x) is type(listener) for x in listeners):
                self.listeners.append(listener)
        self.approver = approver
        if records is not None:
            store = _split(store, records)
        if isinstance(store, str):
            from antiloop.stores import open_store

            store = open_store(store)
        self.store: Store = store if store is not None else MemoryStore()
        self._retries = callable(getattr(self.store, "judge", None))
        # a step without an id is judged by one of the guard's own where a try may have
        # saved it unseen (a conflict, a lost answer), so that the next try answers it
        self._own_ids = self._retries or bool(getattr(self.store, "lost_replies", False))
        from antiloop.outage import OutageConfig
        from antiloop.outage.rider import Rider

        self.outage = outage or OutageConfig()
        self._rides = not isinstance(self.store, MemoryStore)  # memory never fails
        self.rider = Rider(self.outage, self.store, self._put_journaled, clock)
        self.on_store_error = on_store_error or self.config.on_store_error
        self.clock = clock
        if audit is None:  # an in-process guard keeps no log unless asked: memory stays bounded
            audit = not isinstance(self.store, MemoryStore)
        sink = getattr(self.store, "append_audit", None) if audit else None
        self._audit: Callable[[AuditEvent], None] | None = sink
        self.fleet: Fleet | None = None  # consulted before and after each step
        if fleet is not None:
            from antiloop.config import FleetConfig
            from antiloop.fleet import open_fleet

            if isinstance(fleet, FleetConfig):
                fleet = open_fleet(where or self.store, fleet)
            self.fleet = fleet

    def __repr__(self) -> str:
        return f"Guard({self.detector!r}, mode={self.mode!r})"

    @property
    def detector(self) -> Detector | DetectorFn:
        """The policy's detectors (settable)."""
        return self.policy.detector

    @detector.setter
    def detector(self, detector: Detector | DetectorFn) -> None:
        self.policy = replace(self.policy, detector=detector)

    @property
    def mode(self) -> str:
        """``enforce`` or ``shadow`` (settable)."""
        return self.policy.mode

    @mode.setter
    def mode(self, mode: str) -> None:
        self.policy = replace(self.policy, mode=mode)

    @property
    def budgets(self) -> Budgets | None:
        """The token and cost limits, or None (settable)."""
        return self._budgets

    @budgets.setter
    def budgets(self, budgets: Budgets | None) -> None:
        self._budgets = budgets if budgets else None
        judge = budgets.judge if budgets else None
        self.policy = replace(self.policy, budgets=judge)

    @classmethod
    def from_config(cls, source: str | Mapping[str, Any] | GuardConfig, **kw: Any) -> Guard:
        """A Guard from a config file path (TOML or JSON), a mapping, or a GuardConfig.

        OpenTelemetry export (``antiloop.telemetry``) is attached when the OTLP environment or
        the file's ``[telemetry]`` table asks for it; ``[budgets]`` gives ``budgets`` and
        ``[outage]`` ``outage``.
        """
        from antiloop.config import read_settings

        telemetry: Mapping[str, Any] | None = None
        where = "config"
        if isinstance(source, GuardConfig):
            config = source
        elif isinstance(source, Mapping):
            config = GuardConfig.from_mapping(source)
        else:
            settings = read_settings(source)
            config = settings.config()
            telemetry, where = settings.tables.get("telemetry"), settings.source
            if "outage" in settings.tables and "outage" not in kw:
                from antiloop.outage import OutageConfig

                kw["outage"] = OutageConfig.from_mapping(settings.tables["outage"], where)
            if "budgets" in settings.tables and "budgets" not in kw:
                from antiloop.budgets import Budgets

                kw["budgets"] = Budgets.from_mapping(settings.tables["budgets"], where)
        listener = telemetry_listener(telemetry, where)
        if listener is not None:
            kw["listeners"] = [*kw.get("listeners", ()), listener]
        return cls(config=config, **kw)

    # -- before a call ---------------------------------------------------------------------

    def check(
        self,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        session: str | None = None,
        agent: str = "agent",
        paths: Sequence[str] = (),
        cwd: str | None = None,
    ) -> Verdict:
        """Judge a call before it runs: refuse a stopped procedure or a call in an ended session.

        With ``approvals``, a person's stop, the approval policy (and the person's answer) and
        queued feedback come in too; ``gate`` also gives the arguments a person edited.
        """
        verdict = self._check(tool, args, session=session, agent=agent, paths=paths, cwd=cwd)
        if self.approvals is None:
            return verdict
        call = self._call(tool, args, session, agent, paths, cwd)
        return self.apply(self.approvals.gate(call, verdict)).verdict

    def gate(
        self,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        session: str | None = None,
        agent: str = "agent",
        paths: Sequence[str] = (),
        cwd: str | None = None,
    ) -> Gate:
        """``check``, with the arguments to run the call with and the approval request, if any."""
        from antiloop.approval.ruling import Gate

        verdict = self._check(tool, args, session=session, agent=agent, paths=paths, cwd=cwd)
        if self.approvals is None:
            return Gate(verdict, dict(args or {}))
        call = self._call(tool, args, session, agent, paths, cwd)
        return self.apply(self.approvals.gate(call, verdict))

    def _call(
        self,
        tool: str,
        args: Mapping[str, Any] | None,
        session: str | None,
        agent: str,
        paths: Sequence[str],
        cwd: str | None,
    ) -> Call:
        from antiloop.approval.ruling import Call

        sid = self._session_id(session)
        tool, args, sid, agent, paths, cwd = valid_unicode((tool, args, sid, agent, paths, cwd))
        tool, sid, agent = redact_name(tool), redact_name(sid), redact_name(agent)
        return Call(tool, dict(args or {}), sid, agent, tuple(paths), cwd)

    def apply(self, ruling: Ruling) -> Gate:
        """Do what the approvals ruled to the session (end it, reset it, set its limits)."""
        session = ruling.session
        if ruling.end is not None:
            self.end(session, ruling.end)
        if ruling.limits and self.budgets is not None:
            from antiloop.budgets import raise_limits

            raise_limits(self.store, session, ruling.limits, self.budgets)
        if ruling.reset is not None:
            self.reset(session, ruling.reset)
        return ruling.gate

    def _check(
        self,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        session: str | None = None,
        agent: str = "agent",
        paths: Sequence[str] = (),
        cwd: str | None = None,
    ) -> Verdict:
        sid = self._session_id(session)
        tool, args, sid, agent, paths, cwd = valid_unicode((tool, args, sid, agent, paths, cwd))
        tool, sid, agent = redact_name(tool), redact_name(sid), redact_name(agent)
        if self.fleet is not None:  # a kill of the fleet, this agent or this procedure
            killed = self.fleet.killed(sid, agent, tool, args or {}, paths, cwd)
            if killed is not None:
                with contextlib.suppress(StoreError):
                    self.end(sid, killed)
                return killed
        # a failing store is ridden out; past the window, the caller gets the StoreError
        peek = self.store.peek
        state = self.ride_out(lambda: peek(sid)) if self._rides else peek(sid)
        return decide.refuse(state, tool, args, agent, paths, cwd, self.policy)

    # -- after a call ----------------------------------------------------------------------

    def record(self, step: Step | Mapping[str, Any]) -> Verdict:
        """Record a step (a call and its result) and return the verdict on it.

        A store with ``judge(session, fn)`` (Redis) judges by compare-and-set, in one round
        trip when it saved the session last: ``fn`` may run again on a fresh state when
        another guard saved the session first, which is sound because ``_record`` depends
        only on the state and the step. Any other store runs it once in ``transaction()``.
        """
        step, verdict = self._recorded(step)
        if self.approvals is not None and verdict.action >= Action.ASK:
            spend = self._check_in(verdict, step)
            verdict = self.apply(self.approvals.escalate(verdict, step, spend)).verdict
        if self.listeners:
            self._tell(step, verdict)
        return verdict

    def _recorded(self, step: Step | Mapping[str, Any]) -> tuple[Step, Verdict]:
        """The step, and the verdict the store's transaction gave it (before any person)."""
        step = step_from_dict(dict(step)) if not isinstance(step, Step) else valid_step(step)
        fleet = self.fleet
        killed = fleet.before(step) if fleet is not None else None
        if fleet is not None and killed is not None:  # the kill switch: the session ends
            with contextlib.suppress(StoreError):
                self.end(step.session, killed)
            return step, fleet.after(step, killed)
        step_id = step.id
        if step_id is None and self._own_ids:
            step_id = "~" + os.urandom(12).hex()
        if not self._rides:
            try:
                verdict = self._judged(step, step_id, self._step_event)
            except StoreError as exc:
                verdict = self._store_failed(exc, step.session)
            return step, verdict if fleet is None else fleet.after(step, verdict)
        ids = [step_id]

        def attempt() -> Verdict:
            try:
                return self._judged(step, ids[0], self._step_event)
            except StoreError:
                if ids[0] is None:  # the attempts after this one, and the journal, use an id
                    ids[0] = "~" + os.urandom(12).hex()
                raise

        failed = self.rider.catch_up()  # the journal first; its failure is this step's too
        try:
            if failed is not None and self.rider.down:
                raise failed
            verdict = self.ride_out(attempt)
        except StoreError as exc:
            verdict = self._store_failed(exc, step.session, step, ids[0])
        return step, verdict if fleet is None else fleet.after(step, verdict)

    def _judged(
        self,
        step: Step,
        step_id: str | None,
        event: Callable[[Step, Verdict, int], AuditEvent],
    ) -> Verdict:
        """Judge a step in the store (once, no retry); ``event`` makes its audit record."""
        judge = getattr(self.store, "judge", None) if self._retries else None
        audit = self._audit is not None
        if judge is not None:

            def judged(state: SessionState) -> tuple[Verdict, tuple[AuditEvent, ...]]:
                verdict, fresh = decide.judge(state, step, self.policy, step_id)
                if not audit or not fresh:
                    return verdict, ()
                return verdict, (event(step, verdict, state.steps - 1),)

            found: Verdict = judge(step.session, judged)
            return found
        with self.store.transaction(step.session) as state:
            verdict, fresh = decide.judge(state, step, self.policy, step_id)
            if self._audit is not None and fresh:
                self._audit(event(step, verdict, state.steps - 1))
        return verdict

    def _step_event(self, step: Step, verdict: Verdict, index: int) -> AuditEvent:
        return self._audit_event("step", step, verdict, index)

    # -- outages (antiloop.outage) -----------------------------------------------------------

    def ride_out(self, call: Callable[[], R]) -> R:
        """``call()`` tried again for ``outage.retry_window`` on a StoreError (``Rider``)."""
        return self.rider.ride_out(call)

    def _put_journaled(self, entry: dict[str, Any]) -> None:
        """Record a journaled step in the store: judged, its record marked unguarded."""
        from antiloop.outage.rider import answered_verdict

        given = answered_verdict(entry)
        at = float(entry.get("at") or self.clock())

        def event(step: Step, judged: Verdict, index: int) -> AuditEvent:
            return replace(
                self._audit_event("step", step, given, index),
                at=at,
                detail={
                    "unguarded": True,
                    "judged": judged.action.name.lower(),
                    "judged_detector": judged.detector,
                    "replayed_at": self.clock(),
                    "store_error": str(entry.get("error", ""))[:500],
                },
            )

        self._judged(step_from_dict(entry["step"]), str(entry["id"]), event)

    def replay_journal(self) -> int:
        """Put the steps journaled during an outage into the store now; how many went in.

        Journals left by processes that ended are adopted first.
        """
        return self.rider.replay_now()

    def _check_in(self, verdict: Verdict, step: Step) -> dict[str, Any] | None:
        """What a person is shown at a budget check-in; None for any other verdict."""
        if self.budgets is None or verdict.detector != "budget" or verdict.action is not Action.ASK:
            return None
        from antiloop.budgets import check_in

        return check_in(self.budgets, self.store, step)

    def _tell(self, step: Step, verdict: Verdict) -> None:
        for listener in self.listeners:
            listener.on_verdict(step, verdict)

    def _store_failed(
        self,
        exc: StoreError,
        session: str,
        step: Step | None = None,
        step_id: str | None = None,
    ) -> Verdict:
        """The store failed: follow ``on_store_error`` (allow, loudly, or block this call).

        With ``step``, the step is journaled to be recorded when the store is back; a step the
        journal cannot take is refused under either policy (nothing answered goes unrecorded).
        """
        message = f"antiloop: store {self.store.url} failed for session {session!r}: {exc}"
        from antiloop.stores import faults

        faults.count("error")
        block = self.on_store_error == "block"
        verdict = _store_block(str(exc)) if block else _unguarded(str(exc))
        if step is not None and self._rides and self.outage.journal_dir is not None:
            try:
                self.rider.keep(step, step_id or "~" + os.urandom(12).hex(), verdict, exc)
            except StoreError as full:
                _log().error("%s; %s: refusing the call", message, full)
                return _store_block(f"{exc}; {full}")
        if block:
            _log().error("%s; blocking the call (on_store_error=block)", message)
        else:
            _log().error("%s; allowing the call unguarded (on_store_error=allow)", message)
        return verdict

    def unrecorded(self, step: Step, exc: StoreError) -> Verdict:
        """The verdict ``on_store_error`` gives a step the store did not take; journaled."""
        return self._store_failed(exc, step.session, step, step.id)

    def _audit_event(
        self, kind: str, step: Step, verdict: Verdict | None, index: int | None
    ) -> AuditEvent:
        return AuditEvent(
            kind=kind,
            session=step.session,
            at=self.clock(),
            agent=step.agent,
            index=index,
            tool=step.tool,
            args=step.args,
            output=step.output,
            error=step.error,
            exit_code=step.exit_code,
            verdict=verdict,
            detail=_usage(step),
        )

    # -- people and sessions -----------------------------------------------------------------

    def reset(self, session: str | None = None, reason: str = "") -> None:
        """Open a fresh window for a session (a person spoke): counters and windows start over."""
        sid = self._session_id(session)
        with self.store.transaction(sid) as state:
            state.streams.clear()
            state.ended = None
        for listener in self.listeners:
            listener.on_reset(sid, reason)

    def forget(self, session: str) -> None:
        """Drop everything remembered about a session."""
        self.store.forget(session)

    def end(self, session: str, verdict: Verdict) -> None:
        """End a session with a verdict (a person stopped it), unless it ended already."""
        state = self.store.peek(session)
        if state is None or state.ended is None:
            ended = False
            with self.store.transaction(session) as live:
                if live.ended is None:
                    live.ended = verdict
                    ended = True
            if ended and self._audit is not None:  # the end, and who made it, in the log
                self._audit(
                    AuditEvent(
                        "session", session, self.clock(), verdict=verdict, detail={"event": "ended"}
                    )
                )

    def ended(self, session: str | None = None) -> Verdict | None:
        """The verdict that ended a session, or None while it goes on."""
        state = self.store.peek(self._session_id(session))
        return state.ended if state else None  # type: ignore[return-value]

    @property
    def sessions(self) -> list[str]:
        """The ids of the sessions the guard remembers."""
        return self.store.sessions()

    def enforce(self, verdict: Verdict, session: str | None = None) -> Verdict:
        """Raise the matching ``Halt`` for a blocking verdict; return the verdict otherwise.

        An ``ask`` goes to the approver when there is one; without one it passes.
        """
        sid = self._session_id(session)
        if verdict.action is Action.ASK and self.approver is not None:
            if not self.approver(verdict):
                raise ApprovalDenied(verdict, sid)
            return verdict
        if verdict.action < Action.BLOCK:
            return verdict
        raise halt_for(verdict)(verdict, sid)

    @contextlib.contextmanager
    def session(self, session: str | None = None) -> Iterator[str]:
        """Bind a session id for ``check``, ``record`` defaults and ``wrap``; yields the id."""
        if session is None:
            import uuid  # only here: it imports platform

            session = uuid.uuid4().hex
        sid = session
        token = _bound_session.set(sid)
        try:
            yield sid
        finally:
            _bound_session.reset(token)

    def session_id(self, session: str | None = None) -> str:
        """The session id in use: the one given, else the one bound by ``session()``."""
        return session or _bound_session.get() or "default"

    def _session_id(self, session: str | None) -> str:
        return session or _bound_session.get() or "default"

    def step(self, tool: str, args: Mapping[str, Any] | None = None, **fields: Any) -> Step:
        """Build a Step in the bound session (``session=`` overrides it)."""
        fields.setdefault("session", self._session_id(None))
        return step_from_dict({**fields, "tool": tool, "args": dict(args or {})})

    # -- the decorator ---------------------------------------------------------------------

    @overload
    def wrap(self, fn: Callable[P, R]) -> Callable[P, R]: ...

    @overload
    def wrap(
        self, *, tool: str | None = None, agent: str = "agent"
    ) -> Callable[[Callable[P, R]], Callable[P, R]]: ...

    def wrap(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        tool: str | None = None,
        agent: str = "agent",
    ) -> Any:
        """Guard a plain Python tool function: a loop raises ``LoopDetected``.

        Example:
            >>> guard = Guard()
            >>> @guard.wrap
            ... def search(pattern: str) -> str:
            ...     return "no matches"
            >>> search("x")
            'no matches'
            >>> search("x")  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            antiloop.core.errors.LoopDetected: search '{"pattern":"x"}' ran twice in a row ...
        """

        def decorate(func: Callable[..., Any]) -> Any:
            return wrapped(self, func, tool or func.__name__, agent)

        return decorate(fn) if fn is not None else decorate


def _usage(step: Step) -> dict[str, Any]:
    """The tokens and cost the step reported, kept in its audit record (the console shows them)."""
    if step.tokens_in is None and step.tokens_out is None and step.cost_usd is None:
        return {}
    # "usage", not "tokens_in": the redactor hides the values of keys that name a token
    found = {"in": step.tokens_in, "out": step.tokens_out, "usd": step.cost_usd}
    return {"usage": {k: v for k, v in found.items() if v is not None}}


def _unguarded(problem: str) -> Verdict:
    """``on_store_error="allow"``: go on, unguarded."""
    return Verdict.ok(reason=f"unguarded: the store failed ({problem})")


def _store_block(problem: str) -> Verdict:
    """``on_store_error="block"``: this call is refused; the session goes on."""
    return Verdict.block(
        "store",
        f"The guard's store is unreachable ({problem}); this call is refused, the session "
        "is not ended.",
        outcome="error",
        hint="The guard cannot record steps right now: wait a few seconds and try again.",
    )
