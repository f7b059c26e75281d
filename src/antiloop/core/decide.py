"""The pure decision core: ``observe`` a step into its stream, ``decide`` the verdict on it.

    history = observe(state, step, policy)  # sameness, runs, failure streaks, messages
    verdict = decide(history, policy)       # detectors, budgets, then what the verdict leaves

This is the one place where sameness (procedure and result: ``same``), runs, failure streaks
and the allowed-to-repeat rule (docs/protocol.md section 5) are decided; the detectors read the
complete ``History`` it builds, as tenacity's stop strategies read one call state, and their
verdicts combine by action, then by the precedence of ``antiloop.core.verdict.PRECEDENCE`` (repeat,
cycle, goal, stagnation, max-steps). ``judge`` is both in one call, with the session's end and
retried step ids; ``refuse`` is the judgement before a call (a stopped procedure is not run
again). Everything here is standard library and the pure core: no store, no embedder import
(the semantic detectors get theirs injected), no I/O; the state passed in is changed in place.

A step's result is read (``antiloop.core.result``) only where it can change a verdict: when a step
of the same procedure compares with it, when it failed, or when a detector or a store asks for
its readings; until then only its exact digest is made (``antiloop.core.deferred``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from antiloop.core import fingerprint, semantic
from antiloop.core.deferred import Deferred, is_fallback
from antiloop.core.history import History, MessageRecord, SessionState, StepRecord, StreamState
from antiloop.core.history import key_digest as key_digest
from antiloop.core.procedure import Procedure, canonical_path, procedure_of
from antiloop.core.redact import redact_text
from antiloop.core.result import (
    Readings,
    SameResult,
    _error_line,  # the error line alone, for failure streaks
    same_result,
    scrub,
)
from antiloop.core.rules.ruleset import BUILTIN, Rules
from antiloop.core.verdict import Action, Verdict

if TYPE_CHECKING:
    from antiloop.core.step import FileState, Step

__all__ = ["Policy", "allowed", "decide", "judge", "observe", "refuse", "same", "same_readings"]

DetectorFn = Callable[[History], Verdict | None]
BudgetFn = Callable[[SessionState, "Step", Verdict | None], Verdict | None]

READS_ONLY = frozenset({"read", "list", "grep"})
SEEN_KEPT = 32  # step ids remembered per session: a retry is recognised among the last 32
STOPPED_KEPT = 64  # stopped procedures remembered per stream
_OK = Verdict()
_NONE = tuple((None,) * n for n in range(17))  # same_as of a step like none of the last n


@dataclass(frozen=True, slots=True)
class Policy:
    """What ``observe`` and ``decide`` need to know: the detectors, the rules, the windows.

    ``antiloop.defaults.policy_of`` makes the one a config describes.

    Attributes:
        detector: the detectors, composed (``Repeat(2) | Cycle(4) | ...``).
        allow: tool names, operations and programs allowed to repeat, lower-cased.
        lookback: how many steps back a step is compared with (the longest cycle period).
        window: the step records a stream keeps.
        messages: the messages a stream keeps (the stagnation window and the current one).
        failure_streak: the failures a streak counts; its evidence keeps 16 at least.
        mode: ``enforce``, or ``shadow`` (judge, never block).
        escalate_to: who hears of asks and stops (``human``, ``supervisor``), or None.
        budgets: token and cost limits (``Budgets.judge``), or None.
        ladder: what a nudge the agent ignores becomes, in turn (``escalation``): the stream's
            next step running the nudged procedure again gets the first (``ask``), and again
            right after that, the next (``stop``); empty: no ladder.
        rules: the rows procedures and results are read by (``antiloop.core.rules``).
    """

    detector: DetectorFn
    allow: frozenset[str] = frozenset()
    lookback: int = 1
    window: int = 2
    messages: int = 4
    failure_streak: int = 3
    mode: str = "enforce"
    escalate_to: str | None = None
    budgets: BudgetFn | None = None
    ladder: tuple[Action, ...] = ()
    rules: Rules = BUILTIN


# -- the judgement of a recorded step ---------------------------------------------------------


def judge(
    state: SessionState, step: Step, policy: Policy, step_id: str | None = None
) -> tuple[Verdict, bool]:
    """The verdict on a step, and whether it is new (False: its id was judged before).

    A step id seen among the session's last ``SEEN_KEPT`` is answered as it was then, and
    counts once (docs/protocol.md section 2).
    """
    if step_id is not None and step_id in state.seen:
        first = state.seen[step_id]
        return (_OK if first is None else first), False  # type: ignore[return-value]
    if state.ended is not None:
        verdict = terminated(state.ended)  # type: ignore[arg-type]
    else:
        verdict = decide(observe(state, step, policy), policy)
    if step_id is None:
        return verdict, True
    seen = state.seen
    seen[step_id] = None if verdict is _OK else verdict
    if len(seen) > SEEN_KEPT:
        del seen[next(iter(seen))]
    return verdict, True


def decide(history: History, policy: Policy) -> Verdict:
    """The verdict of the detectors (and the budgets) on an observed step.

    A verdict that goes beyond ``continue`` has its texts redacted and, for asks and stops,
    its ``escalate_to``; in shadow mode it is only reported. A blocking repeat or cycle
    remembers its procedure (``refuse`` then denies it), and a stop ends the session.
    """
    verdict = policy.detector(history)
    state = history.session
    if policy.budgets is not None:
        verdict = policy.budgets(state, history.step, verdict)
    if policy.ladder:
        verdict = escalated(history, verdict, policy.ladder)
    if verdict is None:
        return _OK
    if verdict.action is Action.CONTINUE:
        return verdict
    escalate = verdict.escalate_to
    if verdict.action >= Action.ASK and verdict.detector != "goal":
        escalate = policy.escalate_to
    verdict = replace(
        verdict,
        reason=redact_text(verdict.reason),
        hint=redact_text(verdict.hint),
        escalate_to=escalate,
    )
    if policy.mode == "shadow":
        return shadowed(verdict, policy.mode)
    if verdict.action >= Action.BLOCK and verdict.detector in ("repeat", "cycle"):
        stopped = history.stream.stopped
        stopped[key_digest(history.procedure.key)] = verdict.fingerprint or ""
        while len(stopped) > STOPPED_KEPT:
            del stopped[next(iter(stopped))]
    if verdict.action is Action.STOP:
        state.ended = verdict
    return verdict


NOT_ESCALATED = frozenset({"goal", "budget"})
"""Nudges the ladder leaves alone: a goal reached is a success, a budget warns of spend."""


def escalated(
    history: History, verdict: Verdict | None, ladder: tuple[Action, ...]
) -> Verdict | None:
    """The verdict after the escalation ladder: an ignored nudge asks, then stops.

    A nudge (of any detector but goal and budget) on a procedure is remembered in its stream;
    when the stream's very next step runs that procedure again, the nudge was ignored, and the
    step gets the ladder's first action (with the nudge's detector, fingerprint and hint),
    unless its own verdict is already at least that; the next step running it once more gets
    the next action. Any other step in between forgets the nudge: the agent heeded it.
    """
    stream = history.stream
    pending = stream.nudged
    stream.nudged = None
    record = history.record
    if record is None:  # a step allowed to repeat: the ladder neither sees nor forgets it
        stream.nudged = pending
        return verdict
    if pending is not None and pending[0] == record.procedure:
        rung, nudge = pending[1], pending[2]
        action = ladder[rung]
        if verdict is None or verdict.action < action:
            ignored = "ignored" if rung == 0 else f"ignored {rung + 1} times"
            verdict = replace(
                nudge,
                action=action,
                reason=f"The nudge was {ignored}: the same procedure ran again. {nudge.reason}",
                evidence=tuple(sorted({*nudge.evidence, record.index})),
            )
        if rung + 1 < len(ladder) and verdict.action < Action.STOP:
            stream.nudged = (record.procedure, rung + 1, nudge)
        return verdict
    if (
        verdict is not None
        and verdict.action is Action.NUDGE
        and verdict.detector not in NOT_ESCALATED
    ):
        stream.nudged = (record.procedure, 0, verdict)
    return verdict


# -- observing a step -------------------------------------------------------------------------


def observe(state: SessionState, step: Step, policy: Policy) -> History:
    """Count the step and add it to its stream's windows; returns the history detectors judge."""
    state.steps += 1
    if state.goal is None and step.goal:
        state.goal = step.goal
    agent = step.agent.lower()
    stream = state.streams.get(agent)
    if stream is None:  # one string per agent name as the key, however many sessions
        stream = state.streams[sys.intern(agent)] = StreamState([], [])
    index = state.steps - 1
    proc = procedure_of(step.tool, step.args, step.paths, step.cwd, policy.rules)
    tool = sys.intern(step.tool.lower())  # one string per tool name, however many steps
    record = None
    if not policy.allow or not allowed(tool, proc, policy.allow):
        record = _add_record(index, tool, proc, step, stream, policy)
    if step.failed:
        error = _error_digest(record, step, proc.runs_something, policy.rules)
        _failed(stream, tool, index, error, policy.failure_streak)
    elif stream.fails:
        stream.fail_tool, stream.fails, stream.fail_steps, stream.fail_errors = "", 0, (), ()
    message = None
    if step.message is not None:
        message = _add_message(stream, index, step.message, policy.messages)
    return History(step, record, proc, stream, state, message, policy.rules)


def _add_record(
    index: int, tool: str, proc: Procedure, step: Step, stream: StreamState, policy: Policy
) -> StepRecord:
    """The step's record, compared with the stream's last ``lookback`` steps and added."""
    states = _relative_states(step) if step.file_states else step.file_states
    result = Deferred(
        proc.operation,
        proc.runs_something,
        step.output,
        step.error,
        step.exit_code,
        states,
        policy.rules,
    )
    digest = key_digest(proc.key)
    record = StepRecord(index, tool, proc.operation, digest, proc, result)
    window = stream.window
    lookback = policy.lookback
    recent = window[-lookback:]
    for old in recent:
        if old.procedure == digest:  # a step of the same procedure: compare the results
            recent.reverse()
            same_as = tuple(
                [same(old, record) if old.procedure == digest else None for old in recent]
            )
            record.same_as = same_as
            stream.run = stream.run + 1 if same_as[0] is not None else 1
            break
    else:  # the common step: none of the last ones has its procedure; no list, no tuple
        record.same_as = _NONE[len(recent)] if len(recent) < len(_NONE) else (None,) * len(recent)
        stream.run = 1
    window.append(record)
    if len(window) > lookback:
        window[-lookback - 1].release()  # no later step compares with it: text can go
    if len(window) > policy.window:
        del window[0]
    return record


def same(old: StepRecord, new: StepRecord) -> SameResult | None:
    """How ``new`` is the same as ``old`` (procedure and result), or None when it is not.

    The results compare by their readings (``antiloop.core.result.same_result``), which are made
    here, and only here, for steps of the same procedure. When ``old``'s text is gone, only the
    exact digest can tell: the same exact result compares as if read again; another does not.
    """
    if old.procedure != new.procedure:
        return None
    return same_readings(old.readings, new.readings)


def same_readings(theirs: Readings, ours: Readings) -> SameResult | None:
    """How the results of two steps of one procedure are the same (``same``), or None."""
    if is_fallback(theirs):
        if theirs.exact != ours.exact:
            return None
        theirs = replace(ours, exit_code=theirs.exit_code, files=theirs.files)
    return same_result(theirs, ours)


def allowed(tool: str, proc: Procedure, allow: frozenset[str]) -> bool:
    """Whether a step may repeat (section 5).

    An allowed tool or operation, or a shell command of which one part is an allowed
    program and every other part only reads.
    """
    if not allow:
        return False
    if tool in allow:
        return True
    if not proc.parts:
        return proc.operation in allow
    found = False
    for program, op in proc.parts:
        if program in allow or op in allow:
            found = True
        elif op not in READS_ONLY:
            return False
    return found


def _failed(stream: StreamState, tool: str, index: int, error: str, streak: int) -> None:
    """Count a failure of ``tool``: the streak goes on for the same tool, else starts afresh."""
    if stream.fails and stream.fail_tool == tool:
        stream.fails += 1
        keep = 1 - max(16, streak)  # a streak's evidence: as many failures as the rule counts
        stream.fail_steps = (*stream.fail_steps[keep:], index)
        stream.fail_errors = (*stream.fail_errors[keep:], error)
    else:
        stream.fail_tool, stream.fails, stream.fail_steps = tool, 1, (index,)
        stream.fail_errors = (error,)


def _add_message(stream: StreamState, index: int, text: str, kept: int) -> MessageRecord:
    message = MessageRecord(index, text, semantic.mask_digits(text), semantic.is_blank(text))
    stream.blanks = stream.blanks + 1 if message.blank else 0
    messages = stream.messages
    messages.append(message)
    if len(messages) > kept:
        del messages[0]
    return message


def _relative_states(step: Step) -> Mapping[str, FileState]:
    """The step's file states keyed by canonical path: one digest on every machine (6)."""
    return {canonical_path(p, step.cwd) or p: s for p, s in step.file_states.items()}


def _error_digest(record: StepRecord | None, step: Step, runs_something: bool, rules: Rules) -> str:
    """A short digest of a failing step's scrubbed error line (section 6: failure streaks)."""
    if record is not None:
        line = _error_line_of(record, step, runs_something, rules) or ""
    else:
        line = scrub((step.error or "").strip().partition("\n")[0], rules)
    return fingerprint.digest8(line)


def _error_line_of(
    record: StepRecord, step: Step, runs_something: bool, rules: Rules
) -> str | None:
    """The readings' error line; read alone when the readings are not made yet.

    It is the scrubbed first error line of the error and, for a step that runs something, of
    the output, redacted (``antiloop.core.result.read_result``).
    """
    made = record.made
    if made is not None:
        return made.error_line
    err = step.error or ""
    line = _error_line((err, step.output or "") if runs_something else (err,), (), rules)
    return line and redact_text(line)


# -- before a call, and the verdicts that follow others ------------------------------------


def refuse(
    state: SessionState | None,
    tool: str,
    args: Mapping[str, Any] | None,
    agent: str,
    paths: Sequence[str],
    cwd: str | None,
    policy: Policy,
) -> Verdict:
    """The verdict before a call: refuse a stopped procedure, or any call of an ended session."""
    if state is None:
        return _OK
    if state.ended is not None:
        return terminated(state.ended)  # type: ignore[arg-type]
    stream = state.streams.get(agent.lower())
    if stream is None or not stream.stopped:
        return _OK
    proc = procedure_of(tool, args or {}, paths, cwd, policy.rules)
    fp = stream.stopped.get(key_digest(proc.key))
    if fp is None:
        return _OK
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
        escalate_to=policy.escalate_to,
    )
    return shadowed(verdict, policy.mode)


def terminated(ended: Verdict) -> Verdict:
    """The answer to any step of a session that ``ended`` stopped."""
    return Verdict(
        Action.STOP,
        "terminated",
        ended.outcome,
        ended.fingerprint,
        reason=f"The session already stopped ({ended.detector}): {ended.reason}",
        hint=ended.hint,
        escalate_to=ended.escalate_to,
    )


def shadowed(verdict: Verdict, mode: str) -> Verdict:
    """In shadow mode, a verdict beyond ``nudge`` reported as what it would have done."""
    if mode != "shadow" or verdict.action <= Action.NUDGE:
        return verdict
    return replace(
        verdict,
        action=Action.CONTINUE,
        reason=f"[shadow: would {verdict.action.name.lower()}] {verdict.reason}",
    )
