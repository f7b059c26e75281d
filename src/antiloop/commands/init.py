"""``antiloop init``: write a commented ``antiloop.toml`` for the agent found here (or named).

The file sets only what differs from the defaults and shows every other key commented out, so
a person can read what the guard does without opening the docs. It is checked with the parser
every command uses before the command says it is written.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from antiloop.core.errors import ConfigError

AGENTS = {"claude-code": ".claude", "codex": ".codex", "gemini": ".gemini"}
HOSTS = {"claude-code": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI"}

TEMPLATE = """\
# antiloop.toml, written by `antiloop init` for {host}.
# Every key is optional: a commented line shows its default. `antiloop config check` validates
# this file with the parser every antiloop command and hook uses.

# -- the guard: when a procedure is a loop -------------------------------------------------
# repeat_threshold = 2           # the same call with the same result N times in a row: a loop
# cycle_max_period = 4           # A-B-A-B cycles of up to this many steps
# failure_streak = 3             # the same tool failing N times running: change strategy
# escalation = ["ask", "stop"]   # a nudge the agent ignores asks, then stops ([]: never)
# allow_repeat_tools = ["sleep", "wait"]   # polling that may repeat
# task_type = "coding"           # a step budget: simple 25, research 100, coding 250
# min_steps = 5                  # no goal or stagnation stop before this step
# mode = "enforce"               # "shadow": judge and log everything, never block
# on_store_error = "allow"       # "block": refuse calls while the store is down
embedder = "ngram"               # fast in a process per call; "minilm" with antiloop[embed]

# -- approvals: off, so antiloop guards loops only and {host} keeps its own permissions ----
[approval]
# timeout = 300                  # seconds a request waits; unanswered, it is denied
# tiers = {{ exec = "ask", write = "ask", delete = "ask", network = "ask" }}

# -- the audit log -----------------------------------------------------------------------------
[audit]
# retention = "30d"              # `antiloop log prune` removes older records (a checkpoint stays)

# -- the hooks ---------------------------------------------------------------------------------
[hooks]
approval = "off"                 # "policy": ask a person before risky calls, as [approval] says
# deadline = 10                  # seconds: the hook answers by then, whatever happens
# fail = "open"                  # "closed": an internal error denies the call
"""


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``antiloop init``."""
    parser.add_argument(
        "--agent", choices=sorted(AGENTS), help="the coding agent (default: the one found here)"
    )
    parser.add_argument("--dir", default=".", help="the project directory (default: here)")
    parser.add_argument("--force", action="store_true", help="replace an existing antiloop.toml")
    parser.set_defaults(handler=run)


def find_agent(project: Path) -> str:
    """The agent whose settings folder the project has (Claude Code when none or several)."""
    found = [name for name, folder in AGENTS.items() if (project / folder).is_dir()]
    return found[0] if len(found) == 1 else "claude-code"


def run(ns: argparse.Namespace) -> int:
    """Write the file, check it, and say the next step."""
    from antiloop.commands.config import describe

    project = Path(ns.dir).expanduser()
    if not project.is_dir():
        raise ConfigError(f"no project directory {project}")
    target = project / "antiloop.toml"
    if target.exists() and not ns.force:
        raise ConfigError(f"{target} exists: edit it, or run again with --force to replace it")
    agent = ns.agent or find_agent(project)
    target.write_text(TEMPLATE.format(host=HOSTS[agent]), encoding="utf-8")
    describe(target)
    print(f"antiloop: wrote {target} for {HOSTS[agent]} (approvals off: loops only)")
    print(f"next: antiloop install {agent} --project && antiloop doctor {agent} --project")
    return 0
