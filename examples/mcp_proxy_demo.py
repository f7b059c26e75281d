"""antiloop between an MCP client and server, offline: a real ``mcp`` client, our small server.

Run: ``pip install -e '.[mcp]'`` then ``python examples/mcp_proxy_demo.py``.

The client starts ``antiloop mcp-proxy --ask delete_file -- python examples/mcp_status_server.py``
as its server, exactly as an MCP client configured with that command would, then:

1. calls ``job_status`` twice with the same answer: the second answer is ``isError: true``
   with the hint and the loop's fingerprint; a third call never reaches the server;
2. calls ``moving_status`` three times, each answer different: progress, not a loop;
3. calls ``delete_file``, which needs approval: the proxy asks through MCP elicitation, the
   client's callback says yes, and the call runs.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

HERE = Path(__file__).resolve().parent


def proxy_command(*options: str) -> StdioServerParameters:
    """The proxy, wrapping our example server, as the client's server command."""
    server = [sys.executable, str(HERE / "mcp_status_server.py")]
    return StdioServerParameters(
        command=sys.executable, args=["-m", "antiloop", "mcp-proxy", *options, "--", *server]
    )


def text_of(result: types.CallToolResult) -> str:
    """The text blocks of a tool result."""
    return " ".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """The person at the client: prints the question and says yes."""
    print(f"approval: asked {params.message!r}")
    return types.ElicitResult(action="accept", content={"approve": True})


async def main() -> None:
    """Run the three scenes through the proxy and print what happened."""
    params = proxy_command("--ask", "delete_file")
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, elicitation_callback=approve) as session,
    ):
        await session.initialize()
        tools = await session.list_tools()
        print(f"tools: {', '.join(sorted(t.name for t in tools.tools))}")

        # 1. A loop: same call, same result.
        for attempt in range(1, 4):
            result = await session.call_tool("job_status", {"job": "42"})
            print(f"loop: call {attempt} isError={result.isError} {text_of(result)[:70]!r}")
        meta = (result.meta or {}).get("antiloop/verdict", {})
        print(f"loop: fingerprint {meta.get('fingerprint')}")

        # 2. Progress: same call, a different result each time.
        answers = [text_of(await session.call_tool("moving_status", {"job": "7"})) for _ in "abc"]
        print(f"progress: {answers}")

        # 3. Approval through elicitation.
        result = await session.call_tool("delete_file", {"path": "notes.txt"})
        print(f"approval: isError={result.isError} {text_of(result)!r}")


if __name__ == "__main__":
    asyncio.run(main())
