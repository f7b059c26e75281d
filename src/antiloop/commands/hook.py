"""``antiloop hook <agent>``: answer one hook event of a coding agent (JSON on stdin).

    antiloop hook claude-code     # Claude Code: every event of antiloop install claude-code
    antiloop hook gemini          # Gemini CLI: BeforeTool, AfterTool, BeforeAgent, AfterAgent...
    antiloop hook codex           # Codex CLI: PreToolUse, PostToolUse, UserPromptSubmit, Stop...

The process always answers by its deadline with exit 0 (or 2 under ``ANTILOOP_FAIL=closed``
when the input cannot be read); see ``antiloop.hooks.runner``.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``antiloop hook``."""
    parser.add_argument(
        "agent", metavar="AGENT", help="the agent calling: claude-code, gemini or codex"
    )
    parser.add_argument("--config", help="antiloop.toml or JSON ([guard], [approval], [hooks])")
    parser.add_argument(
        "--fail",
        choices=["open", "closed"],
        help="what an internal error does (ANTILOOP_FAIL): open lets the call go on, closed "
        "blocks it",
    )
    parser.set_defaults(handler=run)


def run(ns: argparse.Namespace) -> int:
    """Read stdin, answer, and exit at once if the deadline left the work running."""
    if ns.fail:
        os.environ["ANTILOOP_FAIL"] = ns.fail
    return answer(ns.agent, ns.config)


def answer(
    agent: str,
    config_path: str | None = None,
    *,
    data: bytes | None = None,
    start_daemon: bool = False,
    problem: str | None = None,
) -> int:
    """Answer the event for ``agent`` in this process; returns the exit status.

    ``data``: the event, when already read (else stdin is read). ``start_daemon``: also start
    the hook daemon in the background, so that it answers the next events
    (``antiloop.hooks.daemon``; ``ANTILOOP_HOOKD=0`` turns it off). ``problem``: why the daemon
    that took this event gave no answer; said on stderr, beside the answer judged here.
    """
    from antiloop.hooks.runner import run_hook

    if data is None:
        from antiloop._hook_client import read_stdin

        data = read_stdin()
    if start_daemon:
        from antiloop.hooks.daemon import start_in_background

        start_in_background()
    reply = run_hook(agent, data, config_path=config_path)
    err = reply.stderr
    if problem is not None:
        err = f"antiloop hook: {problem}; judged in the hook's own process\n{err}"
    try:
        sys.stdout.write(reply.stdout)
        sys.stdout.flush()
        if err:
            sys.stderr.write(err)
            sys.stderr.flush()
    except OSError:
        pass
    if not reply.finished:
        os._exit(reply.code)  # the worker may hold a lock: leave it to the OS
    return reply.code
