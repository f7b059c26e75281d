"""The Claude Agent SDK's Python hooks (``antiloop_hooks``), against the scripted model."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import need_module
from tests.hooks.model_server import Call, ModelServer, Say
from tests.hooks.payloads import ClaudeSession

pytestmark = [pytest.mark.integration, pytest.mark.slow]

need_module("claude_agent_sdk", "claude-agent-sdk")  # a skip on a laptop, a failure under CI=true
import claude_agent_sdk as sdk  # noqa: E402

from antiloop.budgets import spent  # noqa: E402
from antiloop.hooks.runner import run_hook  # noqa: E402
from antiloop.integrations.claude_agent_sdk import antiloop_hooks, antiloop_messages  # noqa: E402
from antiloop.stores import open_store  # noqa: E402

BASH = Call("Bash", {"command": "sh count.sh", "description": "count"})


async def _session(
    project: Path, home: Path, store: str, model: ModelServer, *, budget: bool = False
) -> list[Any]:
    node = shutil.which("node")
    path = os.pathsep.join(p for p in (str(Path(node).parent) if node else "", "/usr/bin") if p)
    options = sdk.ClaudeAgentOptions(
        cwd=str(project),
        allowed_tools=["Bash"],
        hooks=antiloop_hooks(store=store),  # type: ignore[arg-type]
        setting_sources=[],
        env={
            "HOME": str(home),
            "PATH": path,
            "ANTHROPIC_BASE_URL": model.url,
            "ANTHROPIC_API_KEY": "sk-ant-dummy",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
        },
    )
    messages = sdk.query(prompt="count the lines", options=options)
    if budget:
        messages = antiloop_messages(messages, store=store)
    return [m async for m in messages]


def test_the_sdk_hooks_block_a_repeat_and_refuse_the_next_try(tmp_path: Path) -> None:
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    (project / "count.sh").write_text("echo run >> calls.log\necho '<2 lines>'\n")
    store = f"sqlite:///{tmp_path / 'antiloop.db'}"
    with ModelServer("anthropic", [BASH, BASH, BASH, Say("finished")], "Bash") as model:
        messages = asyncio.run(asyncio.wait_for(_session(project, home, store, model), 120))
        sent = model.main_requests
    assert messages, "the SDK gave no messages"
    assert len((project / "calls.log").read_text().splitlines()) == 2  # the third was refused
    opened = open_store(store)
    try:
        audit = list(opened.audit_records())  # type: ignore[attr-defined]
    finally:
        opened.close()
    fps = {r.fingerprint for r in audit if r.fingerprint}
    assert len(fps) == 1, fps
    fp = fps.pop()
    after_block = next(s.text for s in sent if s.results == 2)
    after_deny = next(s.text for s in sent if s.results == 3)
    assert "ran twice in a row" in after_block
    assert fp in after_block
    assert "was stopped as a loop" in after_deny
    assert fp in after_deny


def test_the_result_messages_cost_reaches_the_budgets_and_stops_the_session(
    tmp_path: Path,
) -> None:
    """The SDK's ResultMessage brings the run's cost and the tokens no tool call was charged:
    past the hard limit the session stops, and its next tool call is denied."""
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    (project / "count.sh").write_text("echo run >> calls.log\necho '<2 lines>'\n")
    (project / "antiloop.toml").write_text("[budgets.session]\nhard_usd = 0.0001\n")
    store = f"sqlite:///{tmp_path / 'antiloop.db'}"
    with ModelServer("anthropic", [BASH, Say("finished")], "Bash") as model:
        messages = asyncio.run(
            asyncio.wait_for(_session(project, home, store, model, budget=True), 120)
        )
    (result,) = [m for m in messages if isinstance(m, sdk.ResultMessage)]
    assert result.total_cost_usd is not None
    assert result.total_cost_usd > 0.0001
    assert result.usage is not None
    opened = open_store(store)
    try:
        now = spent(opened, result.session_id)
        state = opened.peek(result.session_id)
    finally:
        opened.close()
    assert now.cost_usd == pytest.approx(result.total_cost_usd)
    # the hooks charged the tool call's message from the transcript, the result the rest: once
    assert now.tokens_in == result.usage["input_tokens"]
    assert now.tokens_out == result.usage["output_tokens"]
    assert state is not None
    assert state.ended is not None
    assert state.ended.detector == "budget"
    hook = ClaudeSession(result.session_id, cwd=str(project))
    answer = run_hook(
        "claude-code",
        json.dumps(hook.pre("Bash", {"command": "ls"})),
        env={"HOME": str(home), "CLAUDE_CODE_ENTRYPOINT": "sdk-py"},
        store=store,
    )
    said = json.loads(answer.stdout)["hookSpecificOutput"]
    assert said["permissionDecision"] == "deny"
    assert "hard limit" in said["permissionDecisionReason"]


def test_a_client_sessions_cost_is_charged_once_over_its_queries(tmp_path: Path) -> None:
    """total_cost_usd adds up over a ClaudeSDKClient session: each result is charged the
    difference, so the spend is the last total, and each query's tokens once."""
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    (project / "antiloop.toml").write_text("[budgets.session]\nhard_usd = 1.0\n")
    store = f"sqlite:///{tmp_path / 'antiloop.db'}"

    async def two_queries(model: ModelServer) -> list[Any]:
        node = shutil.which("node")
        path = os.pathsep.join(p for p in (str(Path(node).parent) if node else "", "/usr/bin") if p)
        options = sdk.ClaudeAgentOptions(
            cwd=str(project),
            allowed_tools=["Bash"],
            hooks=antiloop_hooks(store=store),  # type: ignore[arg-type]
            setting_sources=[],
            env={
                "HOME": str(home),
                "PATH": path,
                "ANTHROPIC_BASE_URL": model.url,
                "ANTHROPIC_API_KEY": "sk-ant-dummy",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1",
            },
        )
        results: list[Any] = []
        async with sdk.ClaudeSDKClient(options) as client:
            for prompt in ("hello", "hello again"):
                await client.query(prompt)
                messages = antiloop_messages(client.receive_response(), store=store)
                results += [m async for m in messages if isinstance(m, sdk.ResultMessage)]
        return results

    with ModelServer("anthropic", [Say("hi")], "Bash") as model:
        first, second = asyncio.run(asyncio.wait_for(two_queries(model), 120))
    assert first.session_id == second.session_id
    assert first.total_cost_usd is not None
    assert second.total_cost_usd is not None
    assert second.total_cost_usd > first.total_cost_usd  # a running total
    assert first.usage is not None
    assert second.usage is not None
    opened = open_store(store)
    try:
        now = spent(opened, first.session_id)
    finally:
        opened.close()
    assert now.cost_usd == pytest.approx(second.total_cost_usd)
    assert now.tokens_in == first.usage["input_tokens"] + second.usage["input_tokens"]
    assert now.tokens_out == first.usage["output_tokens"] + second.usage["output_tokens"]


def test_a_lower_running_total_is_a_new_cli_process_charged_whole() -> None:
    from antiloop.integrations.claude_agent_sdk import _new_cost

    session = "s-restart-test"
    assert _new_cost(session, 0.5) == 0.5
    assert _new_cost(session, 0.75) == pytest.approx(0.25)
    assert _new_cost(session, 0.25) == 0.25  # a resumed session in a new process
    assert _new_cost(session, None) is None
