"""Token and cost budgets: a soft limit asks a person, a hard limit stops (issue 18).

Steps carry usage (``tokens_in``, ``tokens_out``, ``cost_usd``: docs/protocol.md section 2);
the guard adds it up per session and per agent of the session, in the session's state::

    [budgets.session]        # the whole session, all its agents together
    soft_usd = 1.0           # past this a person is asked whether the run goes on
    hard_usd = 5.0           # past this the session stops (``BudgetExceeded``)
    soft_tokens = 200000     # tokens_in + tokens_out
    hard_tokens = 1000000

    [budgets.agent]          # each agent of a session on its own
    soft_usd = 0.5

A soft limit is a check-in: when the spend passes it the guard answers ``ask`` (detector
``budget``, outcome ``budget``) once, and the next check-in is one more allowance (the soft
value) further on. With ``Guard(approvals=...)`` the run pauses there for a person: approving
goes on to the next check-in; editing the request's ``session_soft_usd``, ``agent_hard_tokens``
(and so on) sets those limits; denying stops the session. ``raise_limits`` does the same from
code. A hard limit stops the session; raising it past the spend lets a stopped run go on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from antiloop.core.errors import ConfigError
from antiloop.core.verdict import Action, Verdict

if TYPE_CHECKING:
    from antiloop.core.history import SessionState
    from antiloop.core.step import Step
    from antiloop.stores import Store

__all__ = ["Budgets", "Limit", "Spent", "raise_limits", "spent", "take_pending"]

DETECTOR = "budget"
SCOPES = ("session", "agent")
_LIMIT_KEYS = ("soft_usd", "hard_usd", "soft_tokens", "hard_tokens")
_SESSION = ""
_PENDING = "?"  # the check-in no person has answered yet: (reason,)


@dataclass(frozen=True, slots=True)
class Limit:
    """The limits of one scope; None means no limit of that kind.

    Attributes:
        soft_usd: dollars after which a person is asked (and every such allowance again).
        hard_usd: dollars after which the session stops.
        soft_tokens: tokens (in + out) after which a person is asked.
        hard_tokens: tokens after which the session stops.
    """

    soft_usd: float | None = None
    hard_usd: float | None = None
    soft_tokens: int | None = None
    hard_tokens: int | None = None

    def __bool__(self) -> bool:
        return any(getattr(self, k) is not None for k in _LIMIT_KEYS)


@dataclass(frozen=True, slots=True)
class Spent:
    """What one scope spent, and the limits now in force for it.

    ``soft_*`` is the next check-in (it moves on at each one); ``hard_*`` the stop, as
    configured or as a person raised it.
    """

    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    soft_tokens: int | None = None
    soft_usd: float | None = None
    hard_tokens: int | None = None
    hard_usd: float | None = None

    @property
    def tokens(self) -> int:
        """Tokens in and out together."""
        return self.tokens_in + self.tokens_out

    def to_tuple(self) -> tuple[Any, ...]:
        """The plain tuple the session state keeps."""
        return (
            self.tokens_in,
            self.tokens_out,
            self.cost_usd,
            self.soft_tokens,
            self.soft_usd,
            self.hard_tokens,
            self.hard_usd,
        )

    @classmethod
    def from_tuple(cls, data: tuple[Any, ...] | None, limit: Limit) -> Spent:
        """The stored tuple (None: nothing spent yet, the configured limits)."""
        if data is None:
            return cls(
                0, 0, 0.0, limit.soft_tokens, limit.soft_usd, limit.hard_tokens, limit.hard_usd
            )
        return cls(*data)

    def with_step(self, step: Step) -> Spent:
        """This spend and one step's usage."""
        from dataclasses import replace

        return replace(
            self,
            tokens_in=self.tokens_in + (step.tokens_in or 0),
            tokens_out=self.tokens_out + (step.tokens_out or 0),
            cost_usd=self.cost_usd + (step.cost_usd or 0.0),
        )


@dataclass(frozen=True, slots=True)
class Budgets:
    """Per-session and per-agent token and cost limits (see the module docstring).

    Example:
        >>> from antiloop import Guard, Step
        >>> guard = Guard(budgets=Budgets(session=Limit(hard_usd=1.0)))
        >>> guard.record(Step(tool="ls", output="a", cost_usd=0.6)).action.wire
        'continue'
        >>> guard.record(Step(tool="ls", args={"x": 1}, output="b", cost_usd=0.6)).outcome
        'budget'
    """

    session: Limit = Limit()
    agent: Limit = Limit()

    def __bool__(self) -> bool:
        return bool(self.session) or bool(self.agent)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "config") -> Budgets:
        """Build budgets from the ``[budgets]`` table of ``source`` (a file name).

        Raises:
            ConfigError: naming an unknown key or a bad value.
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source} [budgets]: expected a table, got {type(data).__name__}")
        limits: dict[str, Limit] = {}
        for scope, table in data.items():
            if scope not in SCOPES:
                raise ConfigError(
                    f"{source} [budgets]: unknown table {scope!r} (known: session, agent)"
                )
            where = f"{source} [budgets.{scope}]"
            if not isinstance(table, Mapping):
                raise ConfigError(f"{where}: expected a table, got {type(table).__name__}")
            values: dict[str, Any] = {}
            for key, value in table.items():
                if key not in _LIMIT_KEYS:
                    known = ", ".join(_LIMIT_KEYS)
                    raise ConfigError(f"{where}: unknown key {key!r} (known: {known})")
                values[key] = _amount(where, key, value)
            limits[scope] = Limit(**values)
        return cls(**limits)

    def judge(self, state: SessionState, step: Step, verdict: Verdict | None) -> Verdict | None:
        """Add the step's usage to the session's spend; the worse of ``verdict`` and the budgets'.

        Called by the guard inside the session's transaction, after the detectors.
        """
        if step.tokens_in is None and step.tokens_out is None and step.cost_usd is None:
            return verdict
        spend = state.spend
        if spend is None:
            spend = state.spend = {}
        found: Verdict | None = None
        for scope, key, limit in self._scopes(step):
            if not limit:
                continue
            now = Spent.from_tuple(spend.get(key), limit).with_step(step)
            said, now = _check(scope, step.agent, now, limit)
            spend[key] = now.to_tuple()
            if said is not None and (found is None or said.action > found.action):
                found = said
        if found is not None and found.action is Action.ASK:
            spend[_PENDING] = (found.reason,)
        if found is None or (verdict is not None and verdict.action >= found.action):
            return verdict
        return found

    def _scopes(self, step: Step) -> tuple[tuple[str, str, Limit], ...]:
        return (
            ("session", _SESSION, self.session),
            ("agent", "a:" + step.agent.lower(), self.agent),
        )

    def report(self, state: SessionState | None, agent: str) -> dict[str, Any]:
        """The spend and limits of the session and of ``agent``, flat (an approval's args)."""
        out: dict[str, Any] = {"agent": agent}
        stored = (state.spend if state is not None else None) or {}
        for scope, key, limit in self._scopes(_agent_step(agent)):
            now = Spent.from_tuple(stored.get(key), limit)
            out[f"{scope}_spent_usd"] = round(now.cost_usd, 6)
            out[f"{scope}_spent_tokens"] = now.tokens
            for name in ("soft_usd", "hard_usd", "soft_tokens", "hard_tokens"):
                out[f"{scope}_{name}"] = getattr(now, name)
        return out


def _agent_step(agent: str) -> Step:
    from antiloop.core.step import Step

    return Step(tool="budget", agent=agent)


def _amount(where: str, key: str, value: Any) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"{where}: {key!r} must be a number > 0, not {value!r}")
    if key.endswith("_tokens"):
        if isinstance(value, float) and not value.is_integer():
            raise ConfigError(f"{where}: {key!r} must be a whole number of tokens, not {value!r}")
        return int(value)
    if not math.isfinite(value):
        raise ConfigError(f"{where}: {key!r} must be finite, not {value!r}")
    return float(value)


def _check(scope: str, agent: str, now: Spent, limit: Limit) -> tuple[Verdict | None, Spent]:
    """The verdict one scope's spend earns, and the spend with its next check-in moved on."""
    from dataclasses import replace

    whose = "The session" if scope == "session" else f"Agent {agent}"
    if now.hard_usd is not None and now.cost_usd > now.hard_usd:
        return _stop(whose, f"${now.cost_usd:.4f}", f"${now.hard_usd:.4f}"), now
    if now.hard_tokens is not None and now.tokens > now.hard_tokens:
        return _stop(whose, f"{now.tokens} tokens", f"{now.hard_tokens} tokens"), now
    asked: list[str] = []
    if now.soft_usd is not None and now.cost_usd > now.soft_usd:
        asked.append(f"${now.cost_usd:.4f} (soft limit ${now.soft_usd:.4f})")
        step_usd = limit.soft_usd or now.soft_usd
        next_usd = now.soft_usd + step_usd * (1 + (now.cost_usd - now.soft_usd) // step_usd)
        now = replace(now, soft_usd=next_usd)
    if now.soft_tokens is not None and now.tokens > now.soft_tokens:
        asked.append(f"{now.tokens} tokens (soft limit {now.soft_tokens})")
        step_tokens = limit.soft_tokens or now.soft_tokens
        gone = (now.tokens - now.soft_tokens) // step_tokens
        now = replace(now, soft_tokens=now.soft_tokens + step_tokens * (1 + gone))
    if not asked:
        return None, now
    said = f"{whose} spent {' and '.join(asked)}"
    return (
        Verdict.ask(
            DETECTOR,
            f"{said}; a person decides whether it goes on.",
            outcome="budget",
            hint=f"{said}: a person is asked whether the run goes on. Spend carefully.",
        ),
        now,
    )


def _stop(whose: str, spent_text: str, limit_text: str) -> Verdict:
    return Verdict.stop(
        DETECTOR,
        f"{whose} spent {spent_text}, past its hard limit of {limit_text}.",
        outcome="budget",
        hint="The budget for this run is spent. Stop now and report what you have done.",
    )


def spent(store: Store, session: str, agent: str | None = None) -> Spent:
    """What the session (or one agent of it) spent so far, as the store keeps it."""
    state = store.peek(session)
    stored = (state.spend if state is not None else None) or {}
    key = _SESSION if agent is None else "a:" + agent.lower()
    return Spent.from_tuple(stored.get(key), Limit())


def raise_limits(
    store: Store, session: str, changes: Mapping[str, Any], budgets: Budgets
) -> dict[str, Any]:
    """Set limits of a session from ``session_soft_usd``-style keys (an edited approval).

    ``changes`` may name ``{session,agent}_{soft,hard}_{usd,tokens}`` and ``agent``; other
    keys are ignored. A session a budget stopped goes on when no hard limit is passed any more.

    Returns:
        The limits that were set.
    """
    agent = str(changes.get("agent") or "agent")
    applied: dict[str, Any] = {}
    with store.transaction(session) as state:
        spend = state.spend if state.spend is not None else {}
        for scope, key, limit in budgets._scopes(_agent_step(agent)):
            from dataclasses import replace

            now = Spent.from_tuple(spend.get(key), limit)
            for name in _LIMIT_KEYS:
                value = changes.get(f"{scope}_{name}")
                if value is None or value == getattr(now, name):
                    continue
                amount: Any = _amount("the approval", f"{scope}_{name}", value)
                now = replace(now, **{name: amount})
                applied[f"{scope}_{name}"] = getattr(now, name)
            if any(k.startswith(scope + "_") for k in applied):
                spend[key] = now.to_tuple()
        state.spend = spend
        ended = state.ended
        if applied and isinstance(ended, Verdict) and ended.detector == DETECTOR:
            kept = [Spent.from_tuple(v, Limit()) for k, v in spend.items() if k != _PENDING]
            if all(_under_hard(now) for now in kept):
                state.ended = None
    return applied


def take_pending(store: Store, session: str) -> str | None:
    """The reason of a check-in no person answered yet, taken (a host's prompt asks now)."""
    state = store.peek(session)
    if state is None or not state.spend or _PENDING not in state.spend:
        return None
    with store.transaction(session) as live:
        pending = (live.spend or {}).pop(_PENDING, None)
    return str(pending[0]) if pending else None


def _under_hard(now: Spent) -> bool:
    return (now.hard_usd is None or now.cost_usd <= now.hard_usd) and (
        now.hard_tokens is None or now.tokens <= now.hard_tokens
    )


def check_in(budgets: Budgets, store: Store, step: Step) -> dict[str, Any]:
    """What a person is shown at a soft-limit ``ask``: the step's session and agent spend.

    The pending check-in is taken: asked here, no host prompt asks again.
    """
    take_pending(store, step.session)
    return budgets.report(store.peek(step.session), step.agent)
