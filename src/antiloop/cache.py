"""The query cache: identical read-only calls are answered from the store, for a while.

An agent that searches, fails and searches again asks the same question twice; a cached answer
costs nothing and comes back the same. ``cached`` wraps a tool function: calls are keyed by their
canonical procedure (docs/protocol.md section 3: ``grep -rn x src`` and ``grep -nr 'x' src/``
are one key), only calls whose tool or operation is read-only are cached, results must be JSON
values, and exceptions are never cached. A hit is written to the audit log as a ``cache`` event.

    guard = Guard(store="sqlite:///~/.antiloop/antiloop.db")

    @guard.wrap                  # loop detection sees every call, cached or not
    @cached(guard, ttl=300)
    def grep(pattern: str, path: str = ".") -> str: ...

The store must have the ``ResultCache`` capability (all built-in stores do). A store failure
never breaks the tool: the call then simply runs.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import logging
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from antiloop.audit import AuditEvent
from antiloop.core.errors import ConfigError, StoreError
from antiloop.core.procedure import procedure_of
from antiloop.stores import AuditLog, ResultCache

if TYPE_CHECKING:
    from antiloop.guard import Guard

__all__ = ["READ_ONLY", "cache_key", "cached"]

log = logging.getLogger("antiloop")
P = ParamSpec("P")
R = TypeVar("R")

READ_ONLY = frozenset({"read", "grep", "list", "search", "fetch"})
"""The operations (docs/protocol.md section 3.1) cached by default."""

_MISS = object()


def cache_key(tool: str, args: dict[str, Any]) -> str:
    """The cache key of a call: a digest of its canonical procedure key."""
    return _key(procedure_of(tool, args).key)


def _key(procedure_key: str) -> str:
    return "cache:" + hashlib.sha256(procedure_key.encode("utf-8", "surrogatepass")).hexdigest()


def cached(
    guard: Guard,
    *,
    ttl: float = 300.0,
    tools: Collection[str] = READ_ONLY,
    tool: str | None = None,
    agent: str = "agent",
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A decorator that answers repeated read-only calls from ``guard.store``.

    Args:
        guard: the guard whose store keeps the cache and the audit log.
        ttl: seconds a result stays valid.
        tools: tool names or operations that may be cached (lower case); a call whose tool
            name and operation are both outside it always runs.
        tool: the tool name (default: the function's name).
        agent: the agent name written to the audit log.

    Returns:
        The decorator; it keeps the function's signature.

    Raises:
        ConfigError: the guard's store keeps no cache.

    Example:
        >>> from antiloop import Guard
        >>> guard = Guard()
        >>> calls = []
        >>> @cached(guard, ttl=60)
        ... def grep(pattern: str) -> str:
        ...     calls.append(pattern)
        ...     return "a.py:1: x"
        >>> grep("x"), grep("x"), len(calls)
        ('a.py:1: x', 'a.py:1: x', 1)
    """
    store = guard.store
    if not isinstance(store, ResultCache):
        raise ConfigError(f"the store {store.url} keeps no cache: use a built-in store")
    allowed = frozenset(t.lower() for t in tools)
    audit = store if isinstance(store, AuditLog) else None

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        name = tool or func.__name__
        signature = inspect.signature(func)
        if inspect.iscoroutinefunction(func):
            raise ConfigError(f"cached() does not take coroutine functions ({name})")

        def lookup(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str | None, Any]:
            try:
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                call_args = {k: _plain(v) for k, v in bound.arguments.items()}
            except (TypeError, ValueError):
                return None, _MISS
            proc = procedure_of(name, call_args)
            if name.lower() not in allowed and proc.operation not in allowed:
                return None, _MISS
            key = _key(proc.key)
            try:
                hit = store.cache_get(key)
            except StoreError as exc:
                log.warning("antiloop: cache read failed (%s); running %s", exc, name)
                return None, _MISS
            if hit is None:
                return key, _MISS
            value = json.loads(hit)
            if audit is not None:
                session = guard._session_id(None)  # the session bound by guard.session()
                event = AuditEvent(
                    kind="cache",
                    session=session,
                    at=guard.clock(),
                    agent=agent,
                    tool=name,
                    args=call_args,
                    output=value if isinstance(value, str) else hit,
                    detail={"key": key[6:22], "ttl": ttl},
                )
                try:
                    audit.append_audit(event)
                except StoreError as exc:
                    log.warning("antiloop: could not log a cache hit (%s)", exc)
            return key, value

        @functools.wraps(func)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            key, value = lookup(args, kwargs)
            if value is not _MISS:
                return value  # type: ignore[no-any-return]
            result = func(*args, **kwargs)
            if key is not None:
                try:
                    text = json.dumps(result, ensure_ascii=False, allow_nan=False)
                except (TypeError, ValueError):
                    return result  # not a JSON value: not cached
                try:
                    store.cache_put(key, text, ttl)
                except StoreError as exc:
                    log.warning("antiloop: cache write failed (%s)", exc)
            return result

        return call

    return decorate


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return repr(value)
