"""antiloop mcp-proxy between a real MCP client (the mcp package) and a small stdio server."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import need_module

need_module("mcp", "mcp")

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

from antiloop import Guard, GuardConfig
from antiloop.integrations.mcp_proxy import McpProxy

pytestmark = pytest.mark.integration
HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parents[1] / "examples"
SERVER = [sys.executable, str(EXAMPLES / "mcp_status_server.py")]


def proxied(*options: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "antiloop", "mcp-proxy", *options, "--", *SERVER]
    )


def text(result: types.CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, types.TextContent))


def verdict(result: types.CallToolResult) -> dict[str, Any]:
    return (result.meta or {}).get("antiloop/verdict", {})


async def session_run(params: StdioServerParameters, scenario: Any, **kw: Any) -> Any:
    async with stdio_client(params) as (read, write), ClientSession(read, write, **kw) as session:
        await session.initialize()
        return await scenario(session)


async def ran(session: ClientSession) -> list[str]:
    result = await session.call_tool("ran", {})
    return list((result.structuredContent or {}).get("result", []))


def test_loop_answered_with_is_error_at_the_second_identical_call():
    """Same call, same result: the 2nd answer is isError with the fingerprint; no 3rd run."""

    async def scenario(session: ClientSession) -> Any:
        results = [await session.call_tool("job_status", {"job": "42"}) for _ in range(3)]
        return results, await ran(session)

    (first, second, third), calls = asyncio.run(session_run(proxied(), scenario))
    assert not first.isError
    assert text(first) == "job 42: pending"
    assert second.isError
    assert "Stop repeating job_status" in text(second)
    assert verdict(second)["detector"] == "repeat"
    assert verdict(second)["fingerprint"].startswith("AGENT::mcp::job_status::")
    assert verdict(second)["fingerprint"] in text(second)
    assert third.isError
    assert "already stopped as a loop" in text(third)
    assert calls == ["job_status 42", "job_status 42"]


def test_changing_results_are_not_a_loop():
    """The same call with a new result each time passes through untouched."""

    async def scenario(session: ClientSession) -> Any:
        return [await session.call_tool("moving_status", {"job": "7"}) for _ in range(3)]

    results = asyncio.run(session_run(proxied(), scenario))
    assert [text(r) for r in results] == ["job 7: queued", "job 7: running", "job 7: finished"]
    assert not any(r.isError for r in results)
    assert all(not verdict(r) for r in results)


def test_approval_by_elicitation_lets_the_call_run():
    """A call flagged by --ask is put to the person through elicitation; yes runs it."""
    asked: list[str] = []

    async def approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async def scenario(session: ClientSession) -> Any:
        return await session.call_tool("delete_file", {"path": "a.txt"}), await ran(session)

    result, calls = asyncio.run(
        session_run(proxied("--ask", "delete_*"), scenario, elicitation_callback=approve)
    )
    assert asked == ['The agent wants to run delete_file {"path": "a.txt"}. Allow it?']
    assert not result.isError
    assert text(result) == "deleted a.txt"
    assert calls == ["delete_file a.txt"]


def test_declined_approval_answers_is_error_with_the_comment():
    """A person's no never reaches the server; the client gets isError with their words."""

    async def decline(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": False, "comment": "no"})

    async def scenario(session: ClientSession) -> Any:
        return await session.call_tool("delete_file", {"path": "a.txt"}), await ran(session)

    result, calls = asyncio.run(
        session_run(proxied("--ask", "delete_file"), scenario, elicitation_callback=decline)
    )
    assert result.isError
    assert "A person refused this delete_file call: no." in text(result)
    assert verdict(result)["detector"] == "approval"
    assert calls == []


def test_client_without_elicitation_is_refused_with_the_reason():
    """With no elicitation support the proxy cannot ask, so the flagged call is refused."""

    async def scenario(session: ClientSession) -> Any:
        return await session.call_tool("delete_file", {"path": "a.txt"})

    result = asyncio.run(session_run(proxied("--ask", "delete_file"), scenario))
    assert result.isError
    assert "does not support elicitation" in text(result)


def test_denied_tool_is_refused_without_asking():
    """--deny refuses the call outright."""

    async def scenario(session: ClientSession) -> Any:
        return await session.call_tool("delete_file", {"path": "a.txt"}), await ran(session)

    result, calls = asyncio.run(session_run(proxied("--deny", "delete_file"), scenario))
    assert result.isError
    assert "refused by policy" in text(result)
    assert calls == []


def test_stop_config_ends_the_session_for_every_tool(tmp_path: Path):
    """With the library's default config a loop stops the session: other tools are refused."""
    config = tmp_path / "stop.json"
    config.write_text("{}")

    async def scenario(session: ClientSession) -> Any:
        for _ in range(2):
            await session.call_tool("job_status", {"job": "42"})
        return await session.call_tool("moving_status", {"job": "7"})

    result = asyncio.run(session_run(proxied("--config", str(config)), scenario))
    assert result.isError
    assert "The session already stopped" in text(result)


def wire(requests: list[bytes], **kw: Any) -> list[bytes]:
    out = io.BytesIO()
    proxy = McpProxy(
        [sys.executable, str(HERE / "wire_server.py")],
        client_in=io.BytesIO(b"".join(requests)),
        client_out=out,
        **kw,
    )
    assert proxy.run() == 0
    return out.getvalue().splitlines(keepends=True)


def test_everything_but_tool_calls_passes_through_byte_for_byte():
    """Requests, responses and notifications other than tools/call are relayed unchanged."""
    requests = [
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{}}}\n',
        b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n',
        b'{"jsonrpc":"2.0","id":"r2","method":"resources/list","params":{"_meta":{"k":1}}}\n',
    ]
    lines = wire(requests)
    assert lines == [
        b'{"jsonrpc":"2.0", "id": 1, "result": {"echo": "initialize", "x": [1, 2]}}\n',
        b'{"jsonrpc": "2.0",  "method": "notifications/message", "params": '
        b'{"level": "info", "data": "saw a notification"}}\n',
        b'{"jsonrpc":"2.0", "id": "r2", "result": {"echo": "resources/list", "x": [1, 2]}}\n',
    ]


def test_tool_calls_with_one_id_type_or_another_are_matched():
    """A string id and an int id that print alike are different requests to the proxy."""

    def call(request_id: Any, say: str) -> bytes:
        params = {"name": "echo", "arguments": {"say": say}}
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        return json.dumps(message).encode() + b"\n"

    guard = Guard(config=GuardConfig(repeat_action="block"))
    lines = wire([call(7, "a"), call("7", "b"), call(8, "a")], guard=guard)
    replies = [json.loads(line) for line in lines]
    assert [(r["id"], r["result"].get("isError")) for r in replies] == [
        (7, False),
        ("7", False),
        (8, False),
    ]


def test_example_script_runs_offline():
    """examples/mcp_proxy_demo.py prints the refused repeat, the progress and the approval."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "mcp_proxy_demo.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    lines = proc.stdout.splitlines()
    assert lines[1].startswith("loop: call 1 isError=False")
    assert lines[2].startswith("loop: call 2 isError=True 'antiloop: Stop repeating job_status")
    assert lines[3].startswith("loop: call 3 isError=True")
    assert lines[4].startswith("loop: fingerprint AGENT::mcp::job_status::")
    assert "progress: ['job 7: queued', 'job 7: running', 'job 7: finished']" in lines
    assert "approval: isError=False 'deleted notes.txt'" in lines
