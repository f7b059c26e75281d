"""``antiloop mcp-proxy``: guard every ``tools/call`` between an MCP client and its server.

    antiloop mcp-proxy [--config antiloop.toml] [--ask 'delete_*'] -- python my_server.py

Point the MCP client at this command instead of the server's; it starts the server itself.
"""

from __future__ import annotations

import argparse
import logging
import sys

from antiloop.config import load_config
from antiloop.guard import Guard

EXIT_USAGE = 2


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``antiloop mcp-proxy``."""
    parser.add_argument(
        "--config",
        help="a JSON or TOML guard config (docs/protocol.md section 7); without one, a repeat "
        "refuses the looping call only and there is no step budget",
    )
    parser.add_argument("--store", help="where sessions live, as a URL (in memory by default)")
    parser.add_argument("--session", help="the antiloop session id (a new one by default)")
    parser.add_argument("--agent", default="mcp", help="the agent name in fingerprints")
    parser.add_argument(
        "--ask",
        action="append",
        default=[],
        metavar="TOOL",
        help="a tool (shell pattern) that needs a person's approval, asked by elicitation",
    )
    parser.add_argument(
        "--deny",
        action="append",
        default=[],
        metavar="TOOL",
        help="a tool (shell pattern) that is always refused",
    )
    parser.add_argument(
        "--approval-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="how long to wait for a person's answer before refusing (default 300)",
    )
    parser.add_argument(
        "server",
        nargs=argparse.REMAINDER,
        help="the MCP server's command line, after --",
    )
    parser.set_defaults(handler=run)


def run(ns: argparse.Namespace) -> int:
    """Run ``antiloop mcp-proxy``; returns the server's exit status."""
    from antiloop.integrations.mcp_proxy import PROXY_CONFIG, McpProxy, name_policy

    command = list(ns.server)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("antiloop mcp-proxy: give the server command after --", file=sys.stderr)
        return EXIT_USAGE
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
    config = load_config(ns.config) if ns.config else PROXY_CONFIG
    guard = Guard(config=config, store=ns.store)
    policy = name_policy(ask=ns.ask, deny=ns.deny) if ns.ask or ns.deny else None
    proxy = McpProxy(
        command,
        guard,
        session=ns.session,
        agent=ns.agent,
        needs_approval=policy,
        approval_timeout=ns.approval_timeout if ns.approval_timeout > 0 else None,
    )
    try:
        return proxy.run()
    except FileNotFoundError as exc:
        print(f"antiloop mcp-proxy: cannot start {command[0]!r}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
