"""The guard's side of a hook: judge one ``HookEvent`` and say what the agent should hear.

State lives in the store (SQLite by default, ``ANTILOOP_STORE``) keyed by session and agent: a
subagent (``agent_id``) is its own stream, so its steps never make a loop with the main
conversation's. Every hook run is a fresh process; ``BEGIN IMMEDIATE`` makes the parallel
PostToolUse processes of one tool batch take turns.

What each kind of event does:

* ``pre``: ``Guard.check`` refuses (``deny``) a procedure stopped as a loop, or any call of a
  session that ended or that a person asked to stop (``antiloop stop``); then, only when the
  config opts in (``[approval]``), the approval policy may ``ask`` or ``deny``. An ``ask`` is
  dropped where nobody could answer it (a headless run: ``claude -p``, the Agent SDK) and where
  the agent's permission mode says the person does not want to be asked:
  ``bypassPermissions``, ``dontAsk``, ``auto``, and writes under ``acceptEdits``.
* ``post``: ``Guard.record`` with the output, error, exit code and, for the file-writing tools,
  each file's sha256 and mtime read from disk now. A repeat or cycle answers ``block`` with the
  fingerprint (the procedure is then refused until the person speaks); a failure streak
  answers ``block`` with the hint (the tool already ran: "block" only tells the model); a stop
  ends the turn (``continue: false``). Feedback queued by a person is passed on.
* ``prompt``: the person spoke: the session's windows reset, the prompt becomes the goal.
* ``stop``: the last assistant message is recorded as a step of the invisible tool
  ``antiloop:turn-end`` (counted, never part of a repeat or cycle), so the goal and stagnation
  checks judge it. A goal reached is logged only. Stagnation means the agent keeps saying the
  same thing while something (another Stop hook, ``stop_hook_active``) keeps it going: the
  answer ends the turn (``continue: false``). The hook never blocks a Stop, so it cannot start
  such a loop itself.
* ``start`` / ``end``: a ``session`` record in the audit log.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from antiloop.hooks.events import HookEvent

if TYPE_CHECKING:
    from antiloop.config import GuardConfig
    from antiloop.core.detectors import AnyOf
    from antiloop.core.step import FileState
    from antiloop.core.verdict import Verdict
    from antiloop.embed import Embedder
    from antiloop.guard import Guard
    from antiloop.hooks.config import HookConfig
    from antiloop.stores import Store

__all__ = ["TURN_END", "HookHandler", "Outcome", "hook_detector"]

TURN_END = "antiloop:turn-end"
"""The tool name of the step a Stop records: the agent's last message, no call."""

_QUIET_MODES = frozenset({"bypassPermissions", "dontAsk", "auto"})
_GOAL_LIMIT = 2000
_HASH_LIMIT = 64 * 1024 * 1024  # files larger than this are known by their mtime only


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the agent is told, before it is put in its dialect.

    Attributes:
        action: ``pass`` (nothing), ``deny`` or ``ask`` (before a call), ``block`` (tell the
            model after a call), ``context`` (a hint beside the result), ``halt`` (end the turn),
            ``warn`` (a message to the person only).
        reason: for the model.
        notice: for the person (``systemMessage``, ``stopReason``).
        fingerprint: the loop's fingerprint, when there is one.
        repeat: the result repeats one the model already read (a repeat or a cycle).
    """

    action: str = "pass"
    reason: str = ""
    notice: str | None = None
    fingerprint: str | None = None
    repeat: bool = False


PASS = Outcome()


def hook_detector(config: GuardConfig, embedder: Embedder) -> AnyOf:
    """The detectors of a hook: ``default_detector`` with the hook mappings (see config)."""
    from antiloop.defaults import default_detector

    return default_detector(config, embedder, hook=True)


def file_state(path: str, cwd: str | None = None) -> FileState:
    """A file's sha256 and mtime read from disk now (None for what cannot be read)."""
    from antiloop.core.step import FileState

    full = Path(path)
    if cwd and not full.is_absolute():
        full = Path(cwd) / full
    try:
        info = full.stat()
    except OSError:
        return FileState()
    digest = None
    if info.st_size <= _HASH_LIMIT:
        try:
            with full.open("rb") as f:
                digest = hashlib.file_digest(f, "sha256").hexdigest()
        except OSError:
            digest = None
    return FileState(sha256=digest, mtime=info.st_mtime)


class HookHandler:
    """Judges hook events against one store.

    Args:
        config: the hook's settings.
        store: a Store or a URL (by default ``ANTILOOP_STORE`` or ``~/.antiloop/antiloop.db``).
        timeout: at most this many seconds waiting for another process's lock.
        clock: seconds since the epoch, for audit times.
    """

    def __init__(
        self,
        config: HookConfig,
        store: Store | str | None = None,
        *,
        timeout: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.clock = clock
        self._store_arg = store
        self._timeout = timeout
        self._guard: Guard | None = None

    @property
    def guard(self) -> Guard:
        """The guard, built on first use."""
        if self._guard is None:
            from antiloop.guard import Guard, LazyEmbedder
            from antiloop.stores import default_store_url, open_store

            store = self._store_arg
            if store is None or isinstance(store, str):
                store = open_store(store or default_store_url())
            if self._timeout is not None and hasattr(store, "timeout"):
                store.timeout = min(store.timeout, self._timeout)
            if store.url.startswith("sqlite:"):  # a server store: the guard rides out an outage
                _open(store)  # and journals the step (antiloop.outage)
            config = self.config.guard_config()
            config = replace(config, allow_repeat_tools=(*config.allow_repeat_tools, TURN_END))
            embedder = LazyEmbedder(config.embedder)
            budgets = None
            if self.config.budgets is not None:
                from antiloop.budgets import Budgets

                budgets = Budgets.from_mapping(self.config.budgets, self.config.source or "config")
            self._guard = Guard(
                hook_detector(config, embedder),
                config=config,
                embedder=embedder,
                store=store,
                on_store_error="allow",
                clock=self.clock,
                budgets=budgets,
                telemetry=False,  # the runner attaches it, within the hook's deadline
            )
        return self._guard

    def close(self) -> None:
        """Release the store."""
        if self._guard is not None:
            self._guard.store.close()

    def handle(self, event: HookEvent) -> Outcome:
        """Judge one event; a StoreError or ConfigError propagates to the runner."""
        kind = event.kind
        if kind == "pre":
            return self._pre(event)
        if kind == "post":
            return self._post(event)
        if kind == "prompt":
            return self._prompt(event)
        if kind == "stop":
            return self._stop(event)
        if kind in ("start", "end"):
            self._audit(
                "session", event, detail={"event": kind, "hook": event.name, **event.detail}
            )
        return PASS

    # -- before a call ---------------------------------------------------------------------

    def _pre(self, event: HookEvent) -> Outcome:
        guard = self.guard
        tool = event.tool or ""
        asked_by = self._stop_requested(event.session)
        if asked_by is not None:
            reason = f"antiloop: {asked_by} asked this session to stop; no more tool calls."
            self._audit("check", event, detail={"decision": "deny", "stop_requested": asked_by})
            return Outcome("deny", reason, notice=reason)
        verdict = guard.check(
            tool, event.args, session=event.session, agent=event.agent, cwd=event.cwd
        )
        from antiloop.core.verdict import Action

        if verdict.action >= Action.BLOCK:
            self._audit("check", event, verdict)
            return Outcome(
                "deny", _loop_text(verdict, refused=True), fingerprint=verdict.fingerprint
            )
        if self.config.budgets is not None:
            asked = self._budget_check_in(event)
            if asked is not None:
                return asked
        if self.config.approval == "off":
            return PASS
        decision = self.config.approval_policy().decide(tool, event.args, cwd=event.cwd)
        if decision.decision == "allow":
            return PASS
        if decision.decision == "ask" and (
            _quiet(event.permission_mode, decision.risk) or event.attended is False
        ):
            return PASS  # nobody would see the prompt: the host's own rules decide
        detail = {
            "decision": decision.decision,
            "risk": decision.risk,
            "rule": decision.rule,
            "operation": decision.operation,
        }
        self._audit("check", event, detail=detail)
        reason = f"antiloop approval policy: {decision.reason}."
        return Outcome(decision.decision, reason)

    # -- after a call ----------------------------------------------------------------------

    def _post(self, event: HookEvent) -> Outcome:
        if event.interrupted:
            return PASS  # the person stopped the call: its result says nothing about a loop
        from antiloop.core.step import Step, step_id

        states = {p: file_state(p, event.cwd) for p in event.files}
        tokens_in, tokens_out, cost = self._usage(event)
        step = Step(
            tool=event.tool or "",
            args=event.args,
            session=event.session,
            agent=event.agent,
            output=event.output,
            error=event.error,
            exit_code=event.exit_code,
            file_states=states,
            cwd=event.cwd,
            id=step_id(event.detail.get("tool_use_id")),  # a call delivered twice is judged once
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=cost,
        )
        verdict = self.guard.record(step)
        outcome = self._after(verdict, event)
        if outcome.action == "pass":
            feedback = self._feedback(event.session)
            if feedback:
                return Outcome("context", feedback)
        return outcome

    def _budget_check_in(self, event: HookEvent) -> Outcome | None:
        """A passed soft budget: the host's prompt asks the person before the next call."""
        from antiloop.budgets import take_pending

        if _quiet(event.permission_mode, "budget") or event.attended is False:
            return None  # nobody would see the prompt: the run goes on to its hard limit
        reason = take_pending(self.guard.store, event.session)
        if reason is None:
            return None
        self._audit("check", event, detail={"decision": "ask", "rule": "budget:soft"})
        text = f"antiloop budget: {reason} Allow this call to go on?"
        return Outcome("ask", text, notice=f"antiloop: {reason}")

    def _usage(self, event: HookEvent) -> tuple[int | None, int | None, float | None]:
        """The usage of the model turn that made the call, when budgets are on (Claude Code)."""
        from antiloop.hooks.usage import NO_USAGE, claude_code_usage

        if self.config.budgets is None or event.dialect != "claude-code":
            return NO_USAGE
        transcript, call = event.detail.get("transcript_path"), event.detail.get("tool_use_id")
        return claude_code_usage(
            transcript if isinstance(transcript, str) else None,
            call if isinstance(call, str) else None,
        )

    def _after(self, verdict: Verdict, event: HookEvent) -> Outcome:
        from antiloop.core.verdict import Action

        _raise_if_unguarded(verdict)
        action = verdict.action
        if action is Action.CONTINUE:
            return PASS
        if action is Action.NUDGE or (action is Action.ASK and verdict.detector == "budget"):
            return Outcome("context", f"antiloop: {verdict.hint or verdict.reason}")
        if action is Action.STOP:
            text = _loop_text(verdict, refused=False)
            notice = f"antiloop stopped the session: {verdict.reason}"
            if verdict.fingerprint:
                notice += f" ({verdict.fingerprint})"
            return Outcome("halt", text, notice=notice, fingerprint=verdict.fingerprint)
        text = _loop_text(verdict, refused=False)
        repeat = verdict.detector in ("repeat", "cycle")
        if action is Action.BLOCK and repeat:
            text += " Calling it again the same way will be refused until the person speaks."
        return Outcome("block", text, fingerprint=verdict.fingerprint, repeat=repeat)

    # -- people and turns ------------------------------------------------------------------

    def _prompt(self, event: HookEvent) -> Outcome:
        guard = self.guard
        guard.reset(event.session, reason=f"{event.name}: the person spoke")
        with guard.store.transaction(event.session) as state:
            if event.prompt:
                state.goal = event.prompt.strip()[:_GOAL_LIMIT]
                state.goal_vector = None
            self._audit("reset", event, detail={"reason": "user prompt", "hook": event.name})
        return PASS

    def _stop(self, event: HookEvent) -> Outcome:
        if event.message is None:
            return PASS
        from antiloop.core.step import Step
        from antiloop.core.verdict import Action

        step = Step(
            tool=TURN_END,
            session=event.session,
            agent=event.agent,
            message=event.message,
            cwd=event.cwd,
        )
        verdict = self.guard.record(step)
        _raise_if_unguarded(verdict)
        if verdict.action < Action.BLOCK or verdict.detector == "goal":
            return PASS
        notice = f"antiloop ended the turn: {verdict.reason}"
        if event.stop_hook_active:
            notice += " (a Stop hook kept the agent going)"
        return Outcome("halt", f"antiloop: {verdict.hint or verdict.reason}", notice=notice)

    # -- the store's other rooms ---------------------------------------------------------------

    def _audit(
        self,
        kind: str,
        event: HookEvent,
        verdict: Verdict | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        from antiloop.audit import AuditEvent

        sink = getattr(self.guard.store, "append_audit", None)
        if sink is None:
            return
        sink(
            AuditEvent(
                kind=kind,
                session=event.session,
                at=self.clock(),
                agent=event.agent,
                tool=event.tool,
                args=event.args if event.tool else None,
                verdict=verdict,
                detail={"agent_cli": event.dialect, **(detail or {})},
            )
        )

    def _stop_requested(self, session: str) -> str | None:
        ask = getattr(self.guard.store, "stop_requested", None)
        return ask(session) if ask is not None else None

    def _feedback(self, session: str) -> str:
        pop = getattr(self.guard.store, "pop_feedback", None)
        if pop is None:
            return ""
        messages = pop(session)
        return "\n".join(f"A person says: {m}" for m in messages)


_OPEN_TRIES = 3


def _open(store: Store) -> None:
    """Connect now, trying again when a parallel hook process was creating the database.

    The first hook processes of a fresh install (a parallel tool batch) race to create the
    schema; one that looks in the middle of another's creation can see tables without the
    ``application_id`` and take the file for another program's. A second look sees it whole.
    """
    from antiloop.core.errors import StoreError

    for attempt in range(_OPEN_TRIES):
        try:
            store.peek("")
            return
        except StoreError:
            if attempt == _OPEN_TRIES - 1:
                raise


class StoreFailed(RuntimeError):
    """The store failed while recording (the guard went on unguarded)."""


_UNGUARDED = "unguarded: "


def _raise_if_unguarded(verdict: Verdict) -> None:
    """Turn the guard's ``on_store_error="allow"`` verdict into an error the runner reports."""
    if verdict.detector is None and verdict.reason.startswith(_UNGUARDED):
        raise StoreFailed(verdict.reason[len(_UNGUARDED) :])


def _quiet(mode: str | None, risk: str) -> bool:
    """The person said not to be asked: the agent's permission mode covers this risk."""
    if mode in _QUIET_MODES:
        return True
    return mode == "acceptEdits" and risk == "write"


def _loop_text(verdict: Verdict, *, refused: bool) -> str:
    """The reason the model reads: what happened, the fingerprint, what to do instead."""
    parts = [f"antiloop: {verdict.reason}"]
    fp = verdict.fingerprint
    if fp and fp not in verdict.reason and fp not in verdict.hint:
        parts.append(f"Fingerprint: {fp}.")
    if verdict.hint:
        parts.append(verdict.hint)
    if refused:
        parts.append("Try a different approach, or ask the person for help.")
    return " ".join(parts)
