"""The Guard: records steps, judges them with its detectors, and refuses stopped procedures.

    guard = Guard()
    verdict = guard.record(Step(tool="Grep", args={"pattern": "x"}, output="a.py:1: x"))

``check()`` runs before a tool call, ``record()`` after it; ``enforce()`` turns a verdict into
an exception, ``session()`` binds a session id, and ``wrap`` guards a plain Python function.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from antiloop import fingerprint, semantic
from antiloop.audit import AuditEvent
from antiloop.canonical import Procedure, canonical_path, procedure_of
from antiloop.config import OPT_IN_DETECTORS, GuardConfig
from antiloop.detectors import (
    AnyOf,
    Cycle,
    Detector,
    DetectorFn,
    FailStreak,
    Goal,
    MaxSteps,
    Repeat,
    Stagnation,
)
from antiloop.errors import (
    ApprovalDenied,
    BudgetExceeded,
    GoalReached,
    Halt,
    LoopDetected,
    StoreError,
)
from antiloop.events import FileState, Step, step_from_dict
from antiloop.history import (
    History,
    MessageRecord,
    SessionState,
    StepRecord,
    StreamState,
    key_digest,
)
from antiloop.listener import Listener as Listener
from antiloop.readings import SameResult, read_result, same_result, scrub
from antiloop.redact import redact_text
from antiloop.stores import Store
from antiloop.verdict import Action, Verdict

if TYPE_CHECKING:
    import logging

    from antiloop.approval import Approvals, Call, Gate, Ruling
    from antiloop.budgets import Budgets
    from antiloop.embed import Embedder


_READS_ONLY = frozenset({"read", "list", "grep"})
_SEEN_KEPT = 32  # step ids remembered per session: a retry is recognised among the last 32


def _relative_states(step: Step) -> Mapping[str, FileState]:
    """The step's file states keyed by canonical path: one digest on every machine (6)."""
    return {canonical_path(p, step.cwd) or p: s for p, s in step.file_states.items()}


def _kept_context(context: str) -> str:
    """The context a window keeps: redacted before it is cut, so no secret is left half-cut."""
    if len(context) <= _CONTEXT_KEPT and context.isalnum():
        return context
    return redact_text(context)[:_CONTEXT_KEPT]


def _error_digest(record: StepRecord | None, step: Step) -> str:
    """A short digest of a failing step's scrubbed error line (section 6: failure streaks)."""
    if record is not None:
        line = record.readings.error_line or ""
    else:
        line = scrub((step.error or "").strip().partition("\n")[0])
    return fingerprint.digest8(line)


def _telemetry_listener(table: Mapping[str, Any] | None, source: str) -> Listener | None:
    """The OpenTelemetry listener, when ``[telemetry]`` or the OTLP environment asks for one."""
    if table is None and not (
        os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    ):
        return None  # nothing asks: antiloop.telemetry (and OpenTelemetry) stay unimported
    from antiloop.telemetry import listener_for

    return listener_for(os.environ, table, source=source)


def _log() -> logging.Logger:
    """The ``antiloop`` logger; imported on first use (the hook path starts per call)."""
    import logging

    return logging.getLogger("antiloop")


P = ParamSpec("P")
R = TypeVar("R")

_bound_session: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "antiloop_session", default=None
)
_STOPPED_KEPT = 64
_CONTEXT_KEPT = 120  # the fingerprint shows 80 characters of it
_NO_MATCHES: tuple[tuple[None, ...], ...] = tuple((None,) * n for n in range(17))
_OK = Verdict()
_ACTIONS = {a.name.lower(): a for a in Action}


class LazyEmbedder:
    """An embedder chosen by name and loaded only when a semantic check first needs it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._inner: Embedder | None = None

    def __repr__(self) -> str:
        return f"LazyEmbedder({self.name!r})"

    @property
    def inner(self) -> Embedder:
        """The embedder itself, loaded on first use."""
        if self._inner is None:
            from antiloop.embed import get_embedder

            self._inner = get_embedder(self.name)
        return self._inner

    @property
    def id(self) -> str:
        """The loaded embedder's model id."""
        return self.inner.id

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed with the loaded embedder."""
        return self.inner.embed(texts)


def default_detector(config: GuardConfig, embedder: Embedder) -> AnyOf:
    """The detectors the config switches on, composed with ``|``."""
    on = set(config.detectors)
    parts: list[Detector] = []
    if "repeat" in on:
        repeat: Detector = Repeat(config.repeat_threshold)
        if config.repeat_action != "stop":
            repeat = repeat.with_action(_ACTIONS[config.repeat_action])
        parts.append(repeat)
    if "cycle" in on and config.cycle_max_period >= 2:
        parts.append(Cycle(config.cycle_max_period))
    if "fail-streak" in on and config.failure_streak >= 1:
        parts.append(FailStreak(config.failure_streak))
    if "max-steps" in on:
        parts.append(MaxSteps(config.budget))
    if "goal" in on:
        parts.append(Goal(embedder, config.goal_threshold, config.min_steps))
    if "stagnation" in on:
        parts.append(
            Stagnation(
                embedder, config.stagnation_threshold, config.stagnation_window, config.min_steps
            )
        )
    if on.intersection(OPT_IN_DETECTORS):
        from antiloop.detectors_extra import opt_in_detectors

        parts.extend(opt_in_detectors(config))
    return AnyOf(parts)


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
    ) -> None:
        self.config = config or GuardConfig()
        self.approvals = approvals
        self.budgets = budgets if budgets else None
        self.embedder: Embedder = embedder or LazyEmbedder(self.config.embedder)
        self.detector: Detector | DetectorFn = (
            detector if detector is not None else default_detector(self.config, self.embedder)
        )
        self.listeners = list(listeners)
        self.approver = approver
        self.mode = mode or self.config.mode
        self._allow = frozenset(t.lower() for t in self.config.allow_repeat_tools)
        period = self.config.cycle_max_period if "cycle" in self.config.detectors else 1
        self._lookback = max(period, 1)
        self._window = max(2 * period, self.config.repeat_threshold, 1)
        self._messages = self.config.stagnation_window + 1
        if records is not None:
            store = _split(store, records)
        if isinstance(store, str):
            from antiloop.stores import open_store

            store = open_store(store)
        from antiloop.stores.memory import MemoryStore  # here: it imports approval requests

        self.store: Store = store if store is not None else MemoryStore()
        self._retries = callable(getattr(self.store, "judge", None))
        self.on_store_error = on_store_error or self.config.on_store_error
        self.clock = clock
        if audit is None:  # an in-process guard keeps no log unless asked: memory stays bounded
            audit = not isinstance(self.store, MemoryStore)
        sink = getattr(self.store, "append_audit", None) if audit else None
        self._audit: Callable[[AuditEvent], None] | None = sink

    def __repr__(self) -> str:
        return f"Guard({self.detector!r}, mode={self.mode!r})"

    @classmethod
    def from_config(cls, source: str | Mapping[str, Any] | GuardConfig, **kw: Any) -> Guard:
        """A Guard from a config file path (TOML or JSON), a mapping, or a GuardConfig.

        OpenTelemetry export (``antiloop.telemetry``) is attached when the OTLP environment or
        the file's ``[telemetry]`` table asks for it; ``[budgets]`` gives ``budgets``.
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
            config = GuardConfig.from_mapping(settings.guard, source=settings.source)
            telemetry, where = settings.tables.get("telemetry"), settings.source
            if "budgets" in settings.tables and "budgets" not in kw:
                from antiloop.budgets import Budgets

                kw["budgets"] = Budgets.from_mapping(settings.tables["budgets"], where)
        listener = _telemetry_listener(telemetry, where)
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

        return Call(tool, dict(args or {}), self._session_id(session), agent, tuple(paths), cwd)

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
        state = self.store.peek(self._session_id(session))
        if state is None:
            return Verdict.ok()
        if state.ended is not None:
            return self._terminated(state.ended)  # type: ignore[arg-type]
        stream = state.streams.get(agent.lower())
        if stream is None or not stream.stopped:
            return Verdict.ok()
        proc = procedure_of(tool, args or {}, paths, cwd)
        fp = stream.stopped.get(key_digest(proc.key))
        if fp is None:
            return Verdict.ok()
        verdict = Verdict.block(
            "repeat",
            redact_text(
                f"{proc.operation} {proc.context!r} was stopped as a loop; it is not run again."
            ),
            outcome="loop",
            fingerprint=fp,
            hint=(
                f"This exact {proc.operation} was already stopped as a loop ({fp}). "
                "Do something different."
            ),
            escalate_to=self.config.escalate_to,
        )
        return self._shadowed(verdict)

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
        self._tell(step, verdict)
        return verdict

    def _recorded(self, step: Step | Mapping[str, Any]) -> tuple[Step, Verdict]:
        """The step, and the verdict the store's transaction gave it (before any person)."""
        if not isinstance(step, Step):
            step = step_from_dict(dict(step))
        step_id = step.id
        if step_id is None and self._retries:
            # a store that may run the judgement again (a lost reply, a conflict) judges a
            # step once by an id of its own: a retry then answers, it does not count twice
            step_id = "~" + os.urandom(12).hex()
        try:
            judge = getattr(self.store, "judge", None)
            if judge is not None:
                audit = self._audit is not None

                def judged(state: SessionState) -> tuple[Verdict, tuple[AuditEvent, ...]]:
                    verdict, fresh = self._record(state, step, step_id)
                    if not audit or not fresh:
                        return verdict, ()
                    return verdict, (self._audit_event("step", step, verdict, state.steps - 1),)

                verdict: Verdict = judge(step.session, judged)
            else:
                with self.store.transaction(step.session) as state:
                    verdict, fresh = self._record(state, step, step_id)
                    if self._audit is not None and fresh:
                        self._audit(self._audit_event("step", step, verdict, state.steps - 1))
        except StoreError as exc:
            verdict = self._store_failed(exc, step.session)
        return step, verdict

    def _check_in(self, verdict: Verdict, step: Step) -> dict[str, Any] | None:
        """What a person is shown at a budget check-in; None for any other verdict."""
        if self.budgets is None or verdict.detector != "budget" or verdict.action is not Action.ASK:
            return None
        from antiloop.budgets import check_in

        return check_in(self.budgets, self.store, step)

    def _tell(self, step: Step, verdict: Verdict) -> None:
        for listener in self.listeners:
            listener.on_verdict(step, verdict)

    def _store_failed(self, exc: StoreError, session: str) -> Verdict:
        """The store failed: follow ``on_store_error`` (allow with a loud log, or block)."""
        message = f"antiloop: store {self.store.url} failed for session {session!r}: {exc}"
        if self.on_store_error == "block":
            _log().error("%s; blocking the call (on_store_error=block)", message)
            return Verdict.block(
                "store",
                f"The guard's store failed ({exc}); calls are blocked until it is back.",
                outcome="error",
                hint="The guard cannot record steps right now; wait, or ask for help.",
            )
        _log().error("%s; allowing the call unguarded (on_store_error=allow)", message)
        return Verdict.ok(reason=f"unguarded: the store failed ({exc})")

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
        )

    def _record(self, state: SessionState, step: Step, step_id: str | None) -> tuple[Verdict, bool]:
        """The verdict on a step, and whether it is new (False: a step id seen before)."""
        if step_id is None:
            return self._judge(state, step), True
        seen = state.seen
        if step_id in seen:
            first = seen[step_id]
            return (_OK if first is None else first), False  # type: ignore[return-value]
        verdict = self._judge(state, step)
        seen[step_id] = None if verdict is _OK else verdict
        if len(seen) > _SEEN_KEPT:
            del seen[next(iter(seen))]
        return verdict, True

    def _judge(self, state: SessionState, step: Step) -> Verdict:
        if state.ended is not None:
            return self._terminated(state.ended)  # type: ignore[arg-type]
        history = self._observe(state, step)
        verdict = self.detector(history)
        if self.budgets is not None:
            verdict = self.budgets.judge(state, step, verdict)
        if verdict is None:
            return _OK
        if verdict.action is Action.CONTINUE:
            return verdict
        verdict = _with(verdict, reason=redact_text(verdict.reason), hint=redact_text(verdict.hint))
        if verdict.action >= Action.ASK and verdict.detector != "goal":
            verdict = _with(verdict, escalate_to=self.config.escalate_to)
        if self.mode == "shadow":
            return self._shadowed(verdict)
        if verdict.action >= Action.BLOCK and verdict.detector in ("repeat", "cycle"):
            stopped = history.stream.stopped
            stopped[key_digest(history.procedure.key)] = verdict.fingerprint or ""
            while len(stopped) > _STOPPED_KEPT:
                del stopped[next(iter(stopped))]
        if verdict.action is Action.STOP:
            state.ended = verdict
        return verdict

    def _observe(self, state: SessionState, step: Step) -> History:
        """Count the step and add it to its stream's windows; returns what detectors judge."""
        state.steps += 1
        if state.goal is None and step.goal:
            state.goal = step.goal
        agent = step.agent.lower()
        stream = state.streams.get(agent)
        if stream is None:
            stream = state.streams[agent] = StreamState([], [])
        index = state.steps - 1
        proc = procedure_of(step.tool, step.args, step.paths, step.cwd)
        tool = sys.intern(step.tool.lower())  # one string per tool name, however many steps
        record = None
        if not self._allowed(tool, proc):
            record = self._record_of(index, tool, proc, step, stream)
        if step.failed:
            error = _error_digest(record, step)
            if stream.fails and stream.fail_tool == tool:
                stream.fails += 1
                # a streak's evidence is its last failures: as many as the rule counts, 16 at least
                keep = 1 - max(16, self.config.failure_streak)
                stream.fail_steps = (*stream.fail_steps[keep:], index)
                stream.fail_errors = (*stream.fail_errors[keep:], error)
            else:
                stream.fail_tool, stream.fails, stream.fail_steps = tool, 1, (index,)
                stream.fail_errors = (error,)
        elif stream.fails:
            stream.fail_tool, stream.fails, stream.fail_steps = "", 0, ()
            stream.fail_errors = ()
        message = None
        if step.message is not None:
            message = MessageRecord(
                index,
                step.message,
                semantic.mask_digits(step.message),
                semantic.is_blank(step.message),
            )
            stream.blanks = stream.blanks + 1 if message.blank else 0
            messages = stream.messages
            messages.append(message)
            if len(messages) > self._messages:
                del messages[0]
        return History(step, record, proc, stream, state, message)

    def _record_of(
        self, index: int, tool: str, proc: Procedure, step: Step, stream: StreamState
    ) -> StepRecord:
        readings = read_result(
            proc.operation,
            proc.runs_something,
            step.output,
            step.error,
            step.exit_code,
            _relative_states(step) if step.file_states else step.file_states,
        )
        digest = key_digest(proc.key)
        window = stream.window
        depth = min(self._lookback, len(window))
        same: tuple[SameResult | None, ...] = (
            _NO_MATCHES[depth] if depth < len(_NO_MATCHES) else (None,) * depth
        )
        for back in range(1, depth + 1):
            old = window[-back]
            if old.procedure == digest:
                found = same_result(old.readings, readings)
                if found is not None:
                    same = (*same[: back - 1], found, *same[back:])
        record = StepRecord(
            index, tool, proc.operation, digest, _kept_context(proc.context), readings, same
        )
        stream.run = stream.run + 1 if same and same[0] is not None else 1
        window.append(record)
        if len(window) > self._window:
            del window[0]
        return record

    def _allowed(self, tool: str, proc: Procedure) -> bool:
        """Whether a step may repeat (section 5).

        An allowed tool or operation, or a shell command of which one part is an allowed
        program and every other part only reads.
        """
        allow = self._allow
        if not allow:
            return False
        if tool in allow:
            return True
        if not proc.parts:
            return proc.operation in allow
        allowed = False
        for program, op in proc.parts:
            if program in allow or op in allow:
                allowed = True
            elif op not in _READS_ONLY:
                return False
        return allowed

    def _terminated(self, ended: Verdict) -> Verdict:
        return Verdict(
            Action.STOP,
            "terminated",
            ended.outcome,
            ended.fingerprint,
            reason=f"The session already stopped ({ended.detector}): {ended.reason}",
            hint=ended.hint,
            escalate_to=ended.escalate_to,
        )

    def _shadowed(self, verdict: Verdict) -> Verdict:
        if self.mode != "shadow" or verdict.action <= Action.NUDGE:
            return verdict
        return _with(
            verdict,
            action=Action.CONTINUE,
            reason=f"[shadow: would {verdict.action.name.lower()}] {verdict.reason}",
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

    def end(self, session: str, verdict: Verdict) -> None:
        """End a session with a verdict (a person stopped it), unless it ended already."""
        state = self.store.peek(session)
        if state is None or state.ended is None:
            with self.store.transaction(session) as live:
                if live.ended is None:
                    live.ended = verdict

    def forget(self, session: str) -> None:
        """Drop everything remembered about a session."""
        self.store.forget(session)

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
        raise _halt_for(verdict)(verdict, sid)

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
            antiloop.errors.LoopDetected: search '{"pattern":"x"}' ran twice in a row with the ...
        """

        def decorate(func: Callable[..., Any]) -> Any:
            return _Wrapped(self, func, tool or func.__name__, agent).build()

        return decorate(fn) if fn is not None else decorate


class _Wrapped:
    """A guarded tool function: check before, record after, raise on a loop."""

    def __init__(self, guard: Guard, func: Callable[..., Any], tool: str, agent: str) -> None:
        import inspect  # only for wrapped tools: it imports ast, dis and tokenize

        self.guard = guard
        self.func = func
        self.tool = tool
        self.agent = agent
        self.signature = inspect.signature(func)
        self.is_async = inspect.iscoroutinefunction(func)

    def build(self) -> Any:
        func = self.func
        if self.is_async:

            @functools.wraps(func)
            async def async_call(*args: Any, **kwargs: Any) -> Any:
                call = self._before(args, kwargs)
                try:
                    result = await func(*args, **kwargs)
                except Exception as exc:
                    self._after(call, None, exc)
                    raise
                self._after(call, result, None)
                return result

            return async_call

        @functools.wraps(func)
        def call(*args: Any, **kwargs: Any) -> Any:
            step_args = self._before(args, kwargs)
            try:
                result = func(*args, **kwargs)
            except Exception as exc:
                self._after(step_args, None, exc)
                raise
            self._after(step_args, result, None)
            return result

        return call

    def _before(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        try:
            bound = self.signature.bind(*args, **kwargs)
            bound.apply_defaults()
            step_args = {k: _jsonable(v) for k, v in bound.arguments.items()}
        except (TypeError, ValueError):
            step_args = {
                "args": [_jsonable(a) for a in args],
                **{k: _jsonable(v) for k, v in kwargs.items()},
            }
        guard = self.guard
        guard.enforce(guard.check(self.tool, step_args, agent=self.agent))
        return step_args

    def _after(self, step_args: dict[str, Any], result: Any, exc: BaseException | None) -> None:
        guard = self.guard
        step = guard.step(
            self.tool,
            step_args,
            agent=self.agent,
            output=None if exc is not None else _as_text(result),
            error=None if exc is None else f"{type(exc).__name__}: {exc}",
        )
        verdict = guard.record(step)
        if exc is not None and verdict.action >= Action.BLOCK:
            raise _halt_for(verdict)(verdict, step.session) from exc
        guard.enforce(verdict, step.session)


def _halt_for(verdict: Verdict) -> type[Halt]:
    if verdict.detector == "approval":
        return ApprovalDenied
    if verdict.detector == "person":
        return Halt
    if verdict.detector == "goal":
        return GoalReached
    if verdict.detector == "max-steps" or verdict.outcome == "budget":
        return BudgetExceeded
    return LoopDetected


def _with(verdict: Verdict, **changes: Any) -> Verdict:
    from dataclasses import replace

    return replace(verdict, **changes)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return repr(value)


def _as_text(result: Any) -> str:
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, sort_keys=True, default=repr, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(result)
