"""The MCP proxy and the spec the mcp package implements: annotations of trusted servers, batches.

A real server (the mcp package's FastMCP, ``annotated_server.py``) behind the real proxy
process; the client is the mcp package's own, or raw JSON-RPC lines for the batches.
"""

from __future__ import annotations

import asyncio
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

from antiloop.approval.policy import ApprovalPolicy, ToolHints

pytestmark = pytest.mark.integration
SERVER = [sys.executable, str(Path(__file__).resolve().parent / "annotated_server.py")]
POLICY = "[approval]\n"  # the default tiers: read allows, everything else asks


def test_the_proxy_speaks_the_revision_the_mcp_package_implements() -> None:
    """The proxy's newest revision is the installed mcp package's LATEST_PROTOCOL_VERSION."""
    from antiloop.integrations import mcp_proxy

    assert types.LATEST_PROTOCOL_VERSION == "2025-11-25"
    assert types.LATEST_PROTOCOL_VERSION in mcp_proxy.__doc__
    assert {"2025-03-26"} == mcp_proxy.BATCH_VERSIONS  # 2025-06-18 removed batches


def _config(tmp_path: Path, trusted: bool) -> Path:
    path = tmp_path / "antiloop.toml"
    text = 'repeat_action = "block"\ndetectors = ["repeat", "cycle"]\n' + POLICY
    if trusted:
        text += "[mcp]\ntrust_annotations = true\n"
    path.write_text(text)
    return path


def _params(config: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "antiloop", "mcp-proxy", "--config", str(config), "--", *SERVER],
    )


def _text(result: types.CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def _session(params: StdioServerParameters, scenario: Any, **kw: Any) -> Any:
    async with stdio_client(params) as (read, write), ClientSession(read, write, **kw) as s:
        await s.initialize()
        await s.list_tools()  # the client learns the tools, and the proxy their annotations
        return await scenario(s)


def test_trusted_annotations_decide_who_is_asked(tmp_path: Path) -> None:
    """Trusted: read-only runs unasked; destructive and unannotated (the defaults) ask."""
    asked: list[str] = []

    async def no(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": False})

    async def scenario(s: ClientSession) -> Any:
        out = [
            await s.call_tool("status", {"job": "a"}),
            await s.call_tool("remove", {"path": "x"}),
            await s.call_tool("plain", {"x": "y"}),
            await s.call_tool("write_note", {"text": "hi"}),
        ]
        return out, await s.call_tool("calls", {})

    config = _config(tmp_path, trusted=True)
    (status, remove, plain, note), calls = asyncio.run(
        _session(_params(config), scenario, elicitation_callback=no)
    )
    assert not status.isError
    assert _text(status) == "job a: queued"
    assert remove.isError
    assert plain.isError
    assert note.isError  # a write: the default tiers ask, and the person said no
    assert len(asked) == 3
    assert (calls.structuredContent or {}).get("result") == ["status a"]


def test_annotations_of_an_untrusted_server_are_never_read(tmp_path: Path) -> None:
    """Untrusted: the read-only hint counts for nothing; the policy judges the call as ever."""
    asked: list[str] = []

    async def yes(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async def scenario(s: ClientSession) -> Any:
        return await s.call_tool("status", {"job": "a"})

    result = asyncio.run(
        _session(_params(_config(tmp_path, trusted=False)), scenario, elicitation_callback=yes)
    )
    assert not result.isError
    assert asked == ['The agent wants to run status {"job": "a"}. Allow it?']


def test_annotations_never_change_the_loop_rule(tmp_path: Path) -> None:
    """An idempotent read-only status that returns new data is progress; the same data loops."""

    async def scenario(s: ClientSession) -> Any:
        moving = [await s.call_tool("status", {"job": "m"}) for _ in range(3)]
        stuck = [await s.call_tool("status", {"job": "stuck"}) for _ in range(2)]
        return moving, stuck

    moving, stuck = asyncio.run(_session(_params(_config(tmp_path, trusted=True)), scenario))
    assert [_text(r) for r in moving] == ["job m: queued", "job m: running", "job m: finished"]
    assert not any(r.isError for r in moving)
    assert not stuck[0].isError
    assert stuck[1].isError
    assert "Stop repeating status" in _text(stuck[1])


def test_the_spec_defaults_of_absent_hints() -> None:
    """No annotations: not read-only, destructive, not idempotent, open world (the spec)."""
    policy = ApprovalPolicy()
    assert ToolHints.from_annotations(None) == ToolHints(False, True, False, True)
    assert policy.decide("status", {}, hints=ToolHints(read_only=True)).decision == "allow"
    decided = policy.decide("anything", {}, hints=ToolHints.from_annotations({}))
    assert (decided.decision, decided.risk, decided.rule) == (
        "ask",
        "delete",
        "annotation:destructiveHint",
    )
    odd = ToolHints.from_annotations({"readOnlyHint": "yes", "destructiveHint": False})
    assert odd.tier == "network"  # a hint that is no boolean is absent; openWorld by default


class Wire:
    """The proxy process with the real server behind it, spoken to in raw JSON-RPC lines."""

    def __init__(self, config: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "antiloop", "mcp-proxy", "--config", str(config), "--", *SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def read(self) -> Any:
        assert self.proc.stdout is not None
        return json.loads(self.proc.stdout.readline())

    def start(self, version: str) -> Any:
        self.send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": {"name": "wire", "version": "1"},
                },
            }
        )
        answer = self.read()
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    def close(self) -> None:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(60)
        self.proc.stdout.close()


def _call(i: int, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    params = {"name": tool, "arguments": args}
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}


def test_a_batch_under_2025_03_26_is_guarded_call_by_call(tmp_path: Path) -> None:
    """Under the revision that has batches each call is judged; the answers come as one batch."""
    wire = Wire(_config(tmp_path, trusted=True))
    try:
        assert wire.start("2025-03-26")["result"]["protocolVersion"] == "2025-03-26"
        wire.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert wire.read()["id"] == 1
        stuck = {"job": "stuck"}
        wire.send([_call(2, "status", stuck), {"jsonrpc": "2.0", "id": 3, "method": "ping"}])
        first = wire.read()
        assert isinstance(first, list)
        assert sorted(r["id"] for r in first) == [2, 3]
        wire.send([_call(4, "status", stuck), _call(5, "remove", {"path": "x"})])
        second = {r["id"]: r for r in wire.read()}
        assert second[4]["result"]["isError"] is True  # the repeat, found inside a batch
        assert "Stop repeating status" in second[4]["result"]["content"][0]["text"]
        assert second[5]["result"]["isError"] is True  # destructive: no elicitation to ask
        wire.send(_call(6, "calls", {}))
        assert wire.read()["result"]["structuredContent"]["result"] == [
            "status stuck",
            "status stuck",
        ]
    finally:
        wire.close()


def test_a_batch_under_a_revision_without_batches_never_reaches_the_server(
    tmp_path: Path,
) -> None:
    """Under 2025-11-25 a batch is an Invalid Request: no call inside it slips past the guard."""
    wire = Wire(_config(tmp_path, trusted=True))
    try:
        assert wire.start("2025-11-25")["result"]["protocolVersion"] == "2025-11-25"
        wire.send({"jsonrpc": "2.0", "id": 0, "method": "tools/list"})
        assert wire.read()["id"] == 0
        wire.send([_call(1, "remove", {"path": "x"}), _call(2, "remove", {"path": "y"})])
        answer = wire.read()
        assert answer["id"] is None
        assert answer["error"]["code"] == -32600
        assert "MCP 2025-11-25 has no JSON-RPC batches" in answer["error"]["message"]
        wire.send(_call(3, "calls", {}))
        assert wire.read()["result"]["structuredContent"]["result"] == []
    finally:
        wire.close()
