"""``Guard.wrap``: a plain Python tool function, checked before and recorded after each call.

A call the guard refuses raises before the function runs; a loop found in its result raises
after it (``LoopDetected``, or the ``Halt`` the verdict calls for).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from antiloop.core.errors import ApprovalDenied, BudgetExceeded, GoalReached, Halt, LoopDetected
from antiloop.core.verdict import Action, Verdict

if TYPE_CHECKING:
    from antiloop.core.step import Step


class Guard(Protocol):
    """What a wrapped function needs of its guard (``antiloop.guard.Guard`` has it)."""

    def check(
        self, tool: str, args: Mapping[str, Any] | None = None, *, agent: str = "agent"
    ) -> Verdict: ...

    def record(self, step: Step) -> Verdict: ...

    def enforce(self, verdict: Verdict, session: str | None = None) -> Verdict: ...

    def step(self, tool: str, args: Mapping[str, Any] | None = None, **fields: Any) -> Step: ...


__all__ = ["halt_for", "wrapped"]


def wrapped(guard: Guard, func: Callable[..., Any], tool: str, agent: str) -> Any:
    """``func`` guarded by ``guard`` as tool ``tool`` of ``agent`` (sync or async)."""
    return _Wrapped(guard, func, tool, agent).build()


def halt_for(verdict: Verdict) -> type[Halt]:
    """The exception a blocking verdict raises."""
    if verdict.detector == "approval":
        return ApprovalDenied
    if verdict.detector == "person":
        return Halt
    if verdict.detector == "goal":
        return GoalReached
    if verdict.detector == "max-steps" or verdict.outcome == "budget":
        return BudgetExceeded
    return LoopDetected


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
            import asyncio

            @functools.wraps(func)
            async def async_call(*args: Any, **kwargs: Any) -> Any:
                # The guard's store calls and a person's approval must not stall the loop.
                call = await asyncio.to_thread(self._before, args, kwargs)
                try:
                    result = await func(*args, **kwargs)
                except Exception as exc:
                    await asyncio.to_thread(self._after, call, None, exc)
                    raise
                await asyncio.to_thread(self._after, call, result, None)
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
            raise halt_for(verdict)(verdict, step.session) from exc
        guard.enforce(verdict, step.session)


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
