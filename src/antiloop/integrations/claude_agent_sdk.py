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
``deny`` rules refuse a call. Written against claude-agent-sdk 0.2.189; install with
``pip install 'antiloop[claude-agent-sdk]'``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from typing import Any

from antiloop.errors import MissingExtra

try:
    from claude_agent_sdk import HookMatcher
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtra(
        "claude-agent-sdk", "claude-agent-sdk", "antiloop.integrations.claude_agent_sdk"
    ) from exc

__all__ = ["EVENTS", "antiloop_hooks"]

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
