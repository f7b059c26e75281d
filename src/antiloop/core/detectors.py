"""Detectors: small pure callables that judge a ``History`` and return a ``Verdict`` or None.

They compose: ``a | b`` keeps the worst verdict of both, ``a & b`` fires only when both fire,
and ``d.with_action(Action.ASK)`` remaps what a detector decides::

    policy = Repeat(2) | Cycle(max_period=4) | FailStreak(3) | MaxSteps(100)
"""

from __future__ import annotations

import operator
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from antiloop.core import fingerprint, semantic
from antiloop.core.history import History, MessageRecord
from antiloop.core.semantic import Embedder
from antiloop.core.text.engine import in_words
from antiloop.core.verdict import Action, Verdict, worst

DetectorFn = Callable[[History], Verdict | None]


class Detector:
    """Base of the detectors: ``(history) -> Verdict | None`` with ``|``, ``&`` and remapping."""

    def __call__(self, history: History) -> Verdict | None:
        raise NotImplementedError

    def __or__(self, other: Detector | DetectorFn) -> AnyOf:
        return AnyOf((self, other))

    def __ror__(self, other: DetectorFn) -> AnyOf:
        return AnyOf((other, self))

    def __and__(self, other: Detector | DetectorFn) -> AllOf:
        return AllOf((self, other))

    def __rand__(self, other: DetectorFn) -> AllOf:
        return AllOf((other, self))

    def with_action(self, action: Action) -> WithAction:
        """This detector, deciding ``action`` whenever it fires."""
        return WithAction(self, action)


def _flatten(kind: type, parts: Iterable[Detector | DetectorFn]) -> tuple[DetectorFn, ...]:
    out: list[DetectorFn] = []
    for part in parts:
        if isinstance(part, kind):
            out.extend(part.detectors)  # type: ignore[attr-defined]
        else:
            out.append(part)
    return tuple(out)


def _bound(detector: DetectorFn) -> DetectorFn:
    return detector.__call__ if isinstance(detector, Detector) else detector


@dataclass(frozen=True, slots=True, init=False)
class AnyOf(Detector):
    """Fires when any part fires; the worst verdict wins (``stop`` beats ``ask``)."""

    detectors: tuple[DetectorFn, ...]
    # each part's ``__call__``, bound once: a bound method is cheaper to call than an instance
    _calls: tuple[DetectorFn, ...] = field(init=False, repr=False, compare=False)
    # the parts that can fire on a step without a message (Goal and Stagnation judge only
    # messages): most steps have none, and a step without one makes two Python calls fewer
    _plain: tuple[DetectorFn, ...] = field(init=False, repr=False, compare=False)

    def __init__(self, detectors: Iterable[Detector | DetectorFn]) -> None:
        parts = _flatten(AnyOf, detectors)
        object.__setattr__(self, "detectors", parts)
        object.__setattr__(self, "_calls", tuple(_bound(d) for d in parts))
        plain = tuple(_bound(d) for d in parts if type(d) not in _MESSAGES_ONLY)
        object.__setattr__(self, "_plain", plain)

    def __call__(self, history: History) -> Verdict | None:
        fired = None
        for detector in self._calls if history.message is not None else self._plain:
            verdict = detector(history)
            if verdict is not None:
                fired = [verdict] if fired is None else [*fired, verdict]
        return None if fired is None else fired[0] if len(fired) == 1 else worst(fired)

    def __repr__(self) -> str:
        return " | ".join(repr(d) for d in self.detectors)


@dataclass(frozen=True, slots=True, init=False)
class AllOf(Detector):
    """Fires only when every part fires; the verdict is the worst of theirs."""

    detectors: tuple[DetectorFn, ...]

    def __init__(self, detectors: Iterable[Detector | DetectorFn]) -> None:
        object.__setattr__(self, "detectors", _flatten(AllOf, detectors))

    def __call__(self, history: History) -> Verdict | None:
        fired = []
        for d in self.detectors:
            v = d(history)
            if v is None:
                return None
            fired.append(v)
        return worst(fired)

    def __repr__(self) -> str:
        return "(" + " & ".join(repr(d) for d in self.detectors) + ")"


@dataclass(frozen=True, slots=True)
class WithAction(Detector):
    """A detector whose verdicts take another action."""

    detector: DetectorFn
    action: Action

    def __call__(self, history: History) -> Verdict | None:
        v = self.detector(history)
        return None if v is None else v.with_action(self.action)

    def __repr__(self) -> str:
        return f"{self.detector!r}.with_action(Action.{self.action.name})"


@dataclass(frozen=True, slots=True)
class Repeat(Detector):
    """The anti-loop rule: the same procedure with the same result ``threshold`` times in a row.

    Example:
        >>> Repeat(2)
        Repeat(threshold=2)
    """

    threshold: int = 2

    def __call__(self, history: History) -> Verdict | None:
        if history.stream.run < self.threshold:
            return None
        rec = history.record
        if rec is None or not rec.same_as:
            return None
        same = rec.same_as[0]
        if same is None:
            return None
        window = history.stream.window
        evidence = tuple(r.index for r in window[-self.threshold :])
        fp = fingerprint.build(history.agent, rec.operation, rec.context, same.label, same.digest)
        times = "twice" if self.threshold == 2 else f"{self.threshold} times"
        label = in_words(same.label, history.rules)
        return Verdict.stop(
            "repeat",
            f"{rec.operation} {rec.context!r} ran {times} in a row with the same result ({label}).",
            fingerprint=fp,
            hint=(
                f"Stop repeating {rec.operation} on {rec.context!r}: it gave the same result "
                f"({label}) {times}. Running it again changes nothing. Change the "
                "parameters, look somewhere else, or ask for help."
            ),
            evidence=evidence,
        )


@dataclass(frozen=True, slots=True)
class Cycle(Detector):
    """The last 2·p steps are two copies of a primitive p-step sequence, 2 <= p <= max_period.

    Example:
        >>> Cycle(max_period=4)
        Cycle(max_period=4)
    """

    max_period: int = 4

    def __call__(self, history: History) -> Verdict | None:
        record = history.record
        if record is None or not any(record.same_as[1 : self.max_period]):
            return None  # the step equals none of its possible copies: no cycle ends here
        window = history.stream.window
        for period in range(2, self.max_period + 1):
            if len(window) < 2 * period:
                break
            recs = [window[i] for i in range(len(window) - 2 * period, len(window))]
            copy = recs[period:]
            if not all(_same(r, period) for r in copy):
                continue
            if any(all(_same(copy[j], d) for j in range(d, period)) for d in _divisors(period)):
                continue  # the period is itself a repetition: not primitive
            first = recs[:period]
            ops = ">".join(r.operation for r in first)
            canon = "|".join(
                f"{r.procedure}/{r.same_as[period - 1].digest}"  # type: ignore[union-attr]
                for r in copy
            )
            fp = fingerprint.build(
                history.agent, "cycle", ops, f"period {period}", fingerprint.digest8(canon)
            )
            steps = " > ".join(f"{r.operation} {r.context}" for r in first)
            return Verdict.stop(
                "cycle",
                f"The same {period} steps ran twice in a row with the same results: {steps}.",
                fingerprint=fp,
                hint=(
                    f"You are going round in a circle ({ops}, twice, same results). "
                    "Step back and try a different approach, or ask for help."
                ),
                evidence=tuple(r.index for r in recs),
            )
        return None


def _same(record: Any, period: int) -> bool:
    same_as = record.same_as
    return len(same_as) >= period and same_as[period - 1] is not None


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n) if n % d == 0]


@dataclass(frozen=True, slots=True)
class FailStreak(Detector):
    """The same tool fails ``threshold`` times running in a stream (any arguments): ask.

    Example:
        >>> FailStreak(3)
        FailStreak(threshold=3)
    """

    threshold: int = 3

    def __call__(self, history: History) -> Verdict | None:
        stream = history.stream
        if stream.fails < self.threshold or stream.fails % self.threshold:
            return None
        step = history.step
        op = history.procedure.operation
        error = history.record.readings.error_line if history.record else None
        errors = "\n".join(stream.fail_errors[-self.threshold :])
        fp = fingerprint.build(
            history.agent,
            "fail-streak",
            op,
            f"{self.threshold} failures",
            fingerprint.digest8(f"{stream.fail_tool}\n{errors}"),
        )
        evidence = stream.fail_steps[-self.threshold :]
        return Verdict.ask(
            "fail-streak",
            f"{step.tool} failed {stream.fails} times running"
            + (f"; last error: {in_words(error, history.rules)}" if error else "."),
            fingerprint=fp,
            hint=(
                f"{step.tool} has failed {stream.fails} times in a row. Change strategy: read "
                "the error, check your assumptions, or ask for help."
            ),
            evidence=evidence,
        )


@dataclass(frozen=True, slots=True)
class MaxSteps(Detector):
    """The session's step count reaches ``limit``: stop (outcome ``budget``).

    Example:
        >>> MaxSteps(100)
        MaxSteps(limit=100)
    """

    limit: int = 100

    def __call__(self, history: History) -> Verdict | None:
        if history.session.steps < self.limit:  # history.count, without a property call
            return None
        return Verdict.stop(
            "max-steps",
            f"The session reached its budget of {self.limit} steps.",
            hint="The step budget is spent: summarise what you found and stop.",
        )


def _vector(embedder: Embedder, text: str) -> array[float]:
    single = getattr(embedder, "vector32", None)  # a scan's vectors keep them in this form
    if single is not None:
        found: array[float] = single(text)
        return found
    return array("f", embedder.embed([text])[0])


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    # map(mul) sums the same products in the same order as a generator, in half the time
    return float(sum(map(operator.mul, a, b)))


def _message_vector(embedder: Embedder, message: MessageRecord) -> array[float]:
    if message.vector is None:
        message.vector = _vector(embedder, message.masked)
    return message.vector


# Thresholds by embedder id, as ``antiloop calibrate`` chose them on the labelled set shipped in
# tests/data/labelled (bench/RESULTS.md has the figures). An id not listed falls back on its
# prefix ("minilm", "ngram"), then on the default.
GOAL_THRESHOLDS = {"minilm-l6-int8": 0.19, "ngram-v1": 0.12}
STAGNATION_THRESHOLDS = {"minilm-l6-int8": 0.84, "ngram-v1": 0.64}
DEFAULT_GOAL_THRESHOLD = 0.5
DEFAULT_STAGNATION_THRESHOLD = 0.95


def _by_id(table: dict[str, float], embedder: Embedder, default: float) -> float:
    ident = embedder.id
    if ident in table:
        return table[ident]
    for known, threshold in table.items():
        if ident.startswith(known.split("-")[0]):
            return threshold
    return default


def calibrated_goal_threshold(embedder: Embedder) -> float:
    """The goal threshold calibrated for an embedder, by its own attribute or by its id."""
    value = getattr(embedder, "goal_threshold", None)
    if isinstance(value, int | float):
        return float(value)
    return _by_id(GOAL_THRESHOLDS, embedder, DEFAULT_GOAL_THRESHOLD)


def calibrated_stagnation_threshold(embedder: Embedder) -> float:
    """The stagnation threshold calibrated for an embedder, by its own attribute or by its id."""
    value = getattr(embedder, "stagnation_threshold", None)
    if isinstance(value, int | float):
        return float(value)
    return _by_id(STAGNATION_THRESHOLDS, embedder, DEFAULT_STAGNATION_THRESHOLD)


@dataclass(frozen=True, slots=True)
class Goal(Detector):
    """The agent's message reaches the session goal: stop, outcome ``goal`` (a success).

    A message equal to the goal reaches it. Otherwise similarity of at least ``threshold``
    (None: calibrated per embedder) is necessary, not sufficient: a message that says the goal
    is not reached ("still not fixed", "failed to", "I will ... next", "the task is") never
    reaches it, and one that reports no finished work (a completion word, a goal verb told
    as done, a claim) does not either, however many of the goal's key terms it names, unless
    the goal asks for a fact (:func:`antiloop.core.semantic.goal_reached`). The goal is
    embedded once per session; a message with a blocker is never embedded for this check.
    """

    embedder: Embedder = field(repr=False)
    threshold: float | None = None
    min_steps: int = 5

    def __call__(self, history: History) -> Verdict | None:
        msg, session = history.message, history.session
        if msg is None or msg.blank or session.goal is None or history.count < self.min_steps:
            return None
        signals = semantic.goal_signals(session.goal, msg.text)
        if not signals.equal and signals.blocker is not None:
            return None
        threshold = self.threshold
        if threshold is None:
            threshold = calibrated_goal_threshold(self.embedder)
        similarity = 1.0
        if not signals.equal:
            if session.goal_vector is None:
                session.goal_vector = _vector(self.embedder, semantic.mask_digits(session.goal))
            similarity = _cosine(_message_vector(self.embedder, msg), session.goal_vector)
        if not semantic.goal_reached(similarity, signals, threshold):
            return None
        why = (
            "it is the goal itself"
            if signals.equal
            else f"similarity {similarity:.2f} >= {threshold:.2f}, "
            f"{signals.coverage:.0%} of the goal's key terms"
            + (f", says {signals.completion!r}" if signals.completion else "")
        )
        return Verdict.stop(
            "goal",
            f"The agent's message reaches the goal ({why}).",
            hint="The goal is reached: give your final answer.",
            evidence=(msg.index,),
        )


@dataclass(frozen=True, slots=True)
class Stagnation(Detector):
    """The message says nothing new: it is as similar as ``threshold`` to the last ``window``.

    Digits are masked first; a changed number that is a measure (a failing count going down)
    is progress, a counter (attempt 3 -> 4) is not. Recent messages weigh more than older ones
    (a time-decayed mean, :func:`antiloop.core.semantic.stalled`); ``threshold`` None takes the
    value calibrated for the embedder. Three blank messages in a row stagnate too.
    """

    embedder: Embedder = field(repr=False)
    threshold: float | None = None
    window: int = 3
    min_steps: int = 5
    decay: float = semantic.DECAY

    def __call__(self, history: History) -> Verdict | None:
        msg = history.message
        if msg is None or history.count < self.min_steps:
            return None
        stream = history.stream
        if msg.blank:
            if stream.blanks < 3:
                return None
            return self._verdict(history, msg, "3 blank messages", evidence=3)
        previous = stream.messages[-(self.window + 1) : -1]
        if len(previous) < self.window or any(p.blank for p in previous):
            return None
        recent_first = previous[::-1]
        if any(semantic.numbers_progress(p.text, msg.text) for p in recent_first):
            return None
        threshold = self.threshold
        if threshold is None:
            threshold = calibrated_stagnation_threshold(self.embedder)
        vec = _message_vector(self.embedder, msg)
        floor = threshold - semantic.FLOOR_MARGIN
        sims = []
        for p in recent_first:  # one below the floor cannot stall: the older need no vector
            sim = _cosine(vec, _message_vector(self.embedder, p))
            if sim < floor:
                return None
            sims.append(sim)
        if not semantic.stalled(sims, [False] * len(sims), threshold, self.decay):
            return None
        return self._verdict(history, msg, f"{self.window + 1} similar messages", self.window + 1)

    def _verdict(self, history: History, msg: MessageRecord, what: str, evidence: int) -> Verdict:
        recent = history.stream.messages[-evidence:]
        fp = fingerprint.build(
            history.agent, "stagnation", msg.masked, what, fingerprint.digest8(msg.masked)
        )
        return Verdict.stop(
            "stagnation",
            f"The agent is not moving: {what} in a row.",
            fingerprint=fp,
            hint="You keep saying the same thing. Report what blocks you, or ask for help.",
            evidence=tuple(m.index for m in recent),
        )


_MESSAGES_ONLY = (Goal, Stagnation)  # each returns None at once for a step without a message
