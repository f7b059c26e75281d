"""A real MCP server (the mcp package's FastMCP) whose tools carry annotations, for the proxy."""

from __future__ import annotations

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

server = FastMCP("annotated", log_level="WARNING")
_PROGRESS = ["queued", "running", "finished"]
_seen: dict[str, int] = {}
_ran: list[str] = []


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True))
def status(job: str) -> str:
    """A job's status: job "stuck" never changes, any other makes progress on each call."""
    _ran.append(f"status {job}")
    if job == "stuck":
        return f"job {job}: pending"
    step = _seen[job] = _seen.get(job, -1) + 1
    return f"job {job}: {_PROGRESS[min(step, len(_PROGRESS) - 1)]}"


@server.tool(annotations=ToolAnnotations(destructiveHint=True, readOnlyHint=False))
def remove(path: str) -> str:
    """Delete a file (pretend)."""
    _ran.append(f"remove {path}")
    return f"removed {path}"


@server.tool(
    annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)
)
def write_note(text: str) -> str:
    """Add a note (changes local state, destroys nothing)."""
    _ran.append(f"write_note {text}")
    return "noted"


@server.tool()
def plain(x: str) -> str:
    """A tool that says nothing about itself."""
    _ran.append(f"plain {x}")
    return x


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def calls() -> list[str]:
    """The calls that reached this server (for tests)."""
    return list(_ran)


if __name__ == "__main__":
    server.run("stdio")
