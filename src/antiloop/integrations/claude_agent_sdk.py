"""antiloop inside the Claude Agent SDK (``claude-agent-sdk``) through its Python hooks.

    from claude_agent_sdk import ClaudeAgentOptions, query
    from antiloop.integrations.claude_agent_sdk import antiloop_hooks

    options = ClaudeAgentOptions(allowed_tools=["Bash"], hooks=antiloop_hooks())
    async for message in query(prompt="...", options=options):
        ...

``antiloop_hooks()`` returns ``HookMatcher`` callbacks for PreToolUse, PostToolUse,
PostToolUseFailure, UserPromptSubmit, Stop and SubagentStop (the events the Python SDK
takes). Each callback hands the SDK's hook input, which is the JSON Claude Code gives a
command hook, to the same runner as ``antiloop hook claude-code``: the same normaliser, guard,
deadline and fail-safe rules, and the same answers, with the SDK's ``continue_`` for
``continue``. So a repeated call is blocked with its fingerprint, the next try is denied before
it runs, and a failure streak gets its hint. The defaults are the hooks': loops guarded, and
permissions left to the SDK's own (``allowed_tools``, ``can_use_tool``); an opted-in approval
policy (``[approval]``) never answers ``ask`` here, as nobody sees a prompt in the SDK: only its
``deny`` rules refuse a call.

Budgets: the hooks charge each tool call the tokens of the model message that made it (from
the session's transcript); the SDK's ``ResultMessage`` brings the rest, the run's cost
(``total_cost_usd``, which the transcripts of current Claude Code releases no longer carry) and
the tokens of the turns without a tool call. Pass the messages through ``antiloop_messages``::

    async for message in antiloop_messages(query(prompt="...", options=options)):
        ...

and each ``ResultMessage`` is charged to the session's ``[budgets]`` (the same config and store
as the hooks): past a hard limit the session stops, and its next tool call is denied. Written
against claude-agent-sdk 0.2.189; install with ``pip install -e '.[claude-agent-sdk]'``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from antiloop.integrations._common import framework

with framework("claude-agent-sdk", "claude-agent-sdk", "antiloop.integrations.claude_agent_sdk"):
    from claude_agent_sdk import HookMatcher, ResultMessage, SystemMessage

if TYPE_CHECKING:
    from antiloop.core.verdict import Verdict
    from antiloop.guard import Guard
    from antiloop.stores import Store

__all__ = ["EVENTS", "ResultBudget", "antiloop_hooks", "antiloop_messages"]

#: the events antiloop judges, as the Python SDK names them
EVENTS = (
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "UserPromptSubmit",
    "Stop",
    "SubagentStop",
)
_TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})
_RENAMED: dict[str, str] = {"continue": "continue_", "async": "async_"}


def antiloop_hooks(
    *,
    store: str | None = None,
    config: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = 30.0,
) -> dict[str, list[HookMatcher]]:
    """``ClaudeAgentOptions.hooks`` that run antiloop on every tool call of a session.

    Args:
        store: a store URL (default ``ANTILOOP_STORE``, else ``~/.antiloop/antiloop.db``).
        config: an ``antiloop.toml`` (default: ``ANTILOOP_CONFIG``, then the session's cwd).
        env: the environment the hook reads (default ``os.environ``).
        timeout: the SDK's timeout for one callback, in seconds.
    """
    base = dict(os.environ if env is None else env)
    base["CLAUDE_CODE_ENTRYPOINT"] = "sdk-py"  # nobody answers an ask here
    callback = _callback(base, store, config)
    return {
        event: [HookMatcher(matcher="*" if event in _TOOL_EVENTS else None, hooks=[callback])]
        for event in EVENTS
    }


def _callback(env: dict[str, str], store: str | None, config: str | None) -> Any:
    from antiloop.hooks.runner import run_hook

    async def judge(input_data: Mapping[str, Any], tool_use_id: str | None, context: Any) -> Any:
        payload = dict(input_data)
        if tool_use_id and "tool_use_id" not in payload:
            payload["tool_use_id"] = tool_use_id
        answer = await asyncio.to_thread(
            run_hook,
            "claude-code",
            json.dumps(payload, default=str),
            env=env,
            config_path=config,
            store=store,
        )
        return sdk_output(answer.stdout)

    return judge


def sdk_output(stdout: str) -> dict[str, Any]:
    """The hook's JSON answer in the SDK's Python form (``continue_``); ``{}`` for none.

    Example:
        >>> sdk_output('{"continue": false, "stopReason": "loop"}')
        {'continue_': False, 'stopReason': 'loop'}
        >>> sdk_output("")
        {}
    """
    if not stdout.strip():
        return {}
    data = json.loads(stdout)
    if not isinstance(data, dict):
        return {}
    return {_RENAMED.get(str(k), str(k)): v for k, v in data.items()}


_INPUT = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


class ResultBudget:
    """Charges each ``ResultMessage``'s cost and untold tokens to the session's budgets.

    ``observe()`` every message of a session (``antiloop_messages`` does): a ``SystemMessage``
    ``init`` marks the start of a query, and its ``ResultMessage`` is charged with the cost
    since the session's last result and the tokens of its ``usage`` the hooks did not charge.
    The SDK's ``total_cost_usd`` is a running total of the CLI process (it adds up over the
    queries of a ``ClaudeSDKClient``); a total below the last one is a new process (a resumed
    session), charged whole.

    Args:
        store: a store URL or Store (default ``ANTILOOP_STORE``, as the hooks).
        config: an ``antiloop.toml`` (default ``ANTILOOP_CONFIG``, then the session's cwd).
        env: the environment to read those from (default ``os.environ``).
        agent: the agent the spend is charged to (the hooks' name of the main conversation).
    """

    def __init__(
        self,
        *,
        store: Store | str | None = None,
        config: str | None = None,
        env: Mapping[str, str] | None = None,
        agent: str = "main",
    ) -> None:
        self.env = dict(os.environ if env is None else env)
        self.store, self.config, self.agent = store, config, agent
        self._cwd: str | None = None
        self._start: dict[str, tuple[int, int]] = {}  # session -> its tokens when a query began

    def observe(self, message: object) -> Verdict | None:
        """Note a query's start; charge a result. The budgets' verdict on a result, else None."""
        if isinstance(message, SystemMessage) and message.subtype == "init":
            session = message.data.get("session_id")
            if isinstance(message.data.get("cwd"), str):
                self._cwd = message.data["cwd"]
            if isinstance(session, str) and session:
                guard = self._guard()
                if guard is not None:
                    with self._closing(guard):
                        self._start[session] = _tokens(guard, session)
            return None
        if isinstance(message, ResultMessage):
            return self._charge(message)
        return None

    def _charge(self, result: ResultMessage) -> Verdict | None:
        session = result.session_id
        guard = self._guard()
        if guard is None or guard.budgets is None:
            return None
        from antiloop.core.verdict import Action

        cost = _new_cost(session, result.total_cost_usd)
        usage = result.usage or {}
        told_in = sum(_count(usage.get(k)) for k in _INPUT)
        told_out = _count(usage.get("output_tokens"))
        with self._closing(guard):
            was_in, was_out = self._start.pop(session, _tokens(guard, session))
            now_in, now_out = _tokens(guard, session)
            step = guard.step(
                "ResultMessage",
                session=session,
                agent=self.agent,
                tokens_in=max(0, told_in - (now_in - was_in)),
                tokens_out=max(0, told_out - (now_out - was_out)),
                cost_usd=cost,
            )
            with guard.store.transaction(session) as state:
                verdict = guard.budgets.judge(state, step, None)
                if verdict is not None and verdict.action is Action.STOP and state.ended is None:
                    state.ended = verdict  # the next tool call of the session is refused
        return verdict

    def _guard(self) -> Guard | None:
        from antiloop.hooks.config import load_hook_config
        from antiloop.hooks.handler import HookHandler
        from antiloop.hooks.runner import open_split, store_url

        config = load_hook_config(self.config, self.env, self._cwd)
        if config.budgets is None:
            return None
        store = self.store or open_split(self.env) or store_url(self.env)
        return HookHandler(config, store).guard

    def _closing(self, guard: Guard) -> _Closing:
        return _Closing(guard, own=self.store is None or isinstance(self.store, str))


async def antiloop_messages(
    messages: AsyncIterable[Any],
    *,
    store: Store | str | None = None,
    config: str | None = None,
    env: Mapping[str, str] | None = None,
) -> AsyncIterator[Any]:
    """Pass the SDK's messages through, charging each ``ResultMessage`` to the budgets."""
    budget = ResultBudget(store=store, config=config, env=env)
    async for message in messages:
        if isinstance(message, SystemMessage | ResultMessage):
            await asyncio.to_thread(budget.observe, message)
        yield message


class _Closing:
    """Close a guard's store after use when it was opened here (from a URL)."""

    def __init__(self, guard: Guard, *, own: bool) -> None:
        self.guard, self.own = guard, own

    def __enter__(self) -> Guard:
        return self.guard

    def __exit__(self, *exc: object) -> None:
        if self.own:
            self.guard.store.close()


_COSTS_KEPT = 1024
_last_total: dict[str, float] = {}  # session -> the last total_cost_usd charged


def _new_cost(session: str, total: object) -> float | None:
    """The part of a running ``total_cost_usd`` not charged yet (all of it after a restart)."""
    if not isinstance(total, int | float) or isinstance(total, bool) or not total >= 0:
        return None
    last = _last_total.pop(session, None)
    _last_total[session] = float(total)
    while len(_last_total) > _COSTS_KEPT:
        del _last_total[next(iter(_last_total))]
    return float(total) if last is None or total < last else float(total) - last


def _tokens(guard: Guard, session: str) -> tuple[int, int]:
    from antiloop.budgets import spent

    now = spent(guard.store, session)
    return now.tokens_in, now.tokens_out


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
