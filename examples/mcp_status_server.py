"""A small MCP server over stdio, for the antiloop MCP proxy demo and tests.

Run it behind the proxy: ``antiloop mcp-proxy -- python examples/mcp_status_server.py``.
Needs ``pip install -e '.[mcp]'`` (the ``mcp`` package, 1.x).
"""

from __future__ import annotations

from mcp.server.fastmcp import FastMCP

server = FastMCP("job-status", log_level="WARNING")
_PROGRESS = ["queued", "running", "finished"]
_seen: dict[str, int] = {}
_ran: list[str] = []


@server.tool()
def job_status(job: str) -> str:
    """The status of a job (always the same: the job is stuck)."""
    _ran.append(f"job_status {job}")
    return f"job {job}: pending"


@server.tool()
def moving_status(job: str) -> str:
    """The status of a job that makes progress on each call."""
    step = _seen[job] = _seen.get(job, -1) + 1
    return f"job {job}: {_PROGRESS[min(step, len(_PROGRESS) - 1)]}"


@server.tool()
def delete_file(path: str) -> str:
    """Delete a file (pretend)."""
    _ran.append(f"delete_file {path}")
    return f"deleted {path}"


@server.tool()
def ran() -> list[str]:
    """The calls that reached this server and changed something (for tests)."""
    return list(_ran)


if __name__ == "__main__":
    server.run("stdio")
