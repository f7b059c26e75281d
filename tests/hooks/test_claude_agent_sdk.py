"""The Claude Agent SDK's Python hooks (``antiloop_hooks``), against the scripted model."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import need_module
from tests.hooks.model_server import Call, ModelServer, Say

pytestmark = [pytest.mark.integration, pytest.mark.slow]

need_module("claude_agent_sdk", "claude-agent-sdk")  # a skip on a laptop, a failure under CI=true
import claude_agent_sdk as sdk  # noqa: E402

from antiloop.integrations.claude_agent_sdk import antiloop_hooks  # noqa: E402
from antiloop.stores import open_store  # noqa: E402

BASH = Call("Bash", {"command": "sh count.sh", "description": "count"})


async def _session(project: Path, home: Path, store: str, model: ModelServer) -> list[Any]:
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
    return [m async for m in sdk.query(prompt="count the lines", options=options)]


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
