"""The hook's settings: guard config, approval policy and the hook's own switches.

Found, first match wins: ``--config PATH``; ``ANTILOOP_CONFIG``; ``antiloop.toml`` in the
project directory (``CLAUDE_PROJECT_DIR``, else the event's ``cwd``); none (the defaults).
One file holds the guard's keys (at the top or under ``[guard]``), ``[approval]`` and ``[hooks]``::

    repeat_action = "block"      # the default in hooks: refuse the looping procedure, go on
    [approval]                   # opt in to approvals: without this table the host decides
    tiers = { exec = "allow" }   # leave shell commands to the agent's own permission prompt
    [hooks]
    approval = "policy"          # the default once [approval] is there; "off" turns it off
    deadline = 10                # seconds: the hook answers by then, whatever happens
    fail = "open"                # or "closed": an internal error denies the call

Defaults that differ from the library's, because a coding agent's session is long and a person
is at hand: ``repeat_action = "block"`` (a repeat or cycle refuses that procedure until the
person speaks, the session goes on; ``stop`` ends the turn instead), the cycle detector follows
``repeat_action``, ``max-steps`` is on only when ``max_steps`` or ``task_type`` is set, and a goal
reached at a Stop is noted in the audit log without stopping anything.

Permissions stay the host's unless the person opts in: with no ``[approval]`` table (and no
``[hooks] approval = "policy"``) the hooks guard loops only, and never answer ``ask`` or ``deny``
for a call the host would allow, except a procedure stopped as a loop.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from antiloop.core.errors import ConfigError

if TYPE_CHECKING:
    from antiloop.approval.policy import ApprovalPolicy
    from antiloop.config import GuardConfig
    from antiloop.core.rules.ruleset import Rules

__all__ = [
    "AGENT_INTERNAL_TOOLS",
    "CONFIG_NAME",
    "HookConfig",
    "fail_mode",
    "find_config",
    "load_hook_config",
]

CONFIG_NAME = "antiloop.toml"
#: the agents' own bookkeeping tools: they change nothing outside the agent, so no one is asked
AGENT_INTERNAL_TOOLS = (
    "TodoWrite",
    "Task",
    "Agent",
    "AskUserQuestion",
    "ExitPlanMode",
    "EnterPlanMode",
    "BashOutput",
    "KillShell",
    "KillBash",
    "Skill",
    "SlashCommand",
    "ListMcpResourcesTool",
    "ReadMcpResourceTool",
    "NotebookRead",
    "write_todos",
    "update_plan",
    "view_image",
)
DEFAULT_DEADLINE = 10.0
_HOOK_KEYS = ("approval", "deadline", "fail")


@dataclass(frozen=True, slots=True)
class HookConfig:
    """What a hook invocation runs with.

    Attributes:
        guard: the guard's settings as given (hook defaults are applied by the handler).
        explicit: the guard keys the file set (the hook's own defaults yield to them).
        policy: the approval policy of ``[approval]``; None for the default policy.
        approval: ``policy`` (ask and deny as the policy says) or ``off`` (the default: the
            host's own permissions decide; on when the file has an ``[approval]`` table).
        deadline: seconds within which the hook answers.
        fail: ``open`` (an internal error lets the call go on, with a message) or ``closed``.
        source: the file read, or None.
        telemetry: the ``[telemetry]`` table as given (``antiloop.telemetry`` checks it).
        budgets: the ``[budgets]`` table as given (``antiloop.budgets`` checks it).
        rules: the rule set of ``[canonical]`` and ``[readings]``; None for the built-in one.
    """

    guard: Mapping[str, Any] = field(default_factory=dict)
    explicit: frozenset[str] = frozenset()
    policy: Mapping[str, Any] | None = None
    approval: str = "off"
    deadline: float = DEFAULT_DEADLINE
    fail: str = "open"
    source: str | None = None
    telemetry: Mapping[str, Any] | None = None
    budgets: Mapping[str, Any] | None = None
    rules: Rules | None = None

    def guard_config(self) -> GuardConfig:
        """The GuardConfig with the hook defaults applied where the file said nothing."""
        from antiloop.config import DETECTOR_NAMES, GuardConfig

        data = dict(self.guard)
        data.setdefault("repeat_action", "block")
        if "detectors" not in data and not {"max_steps", "task_type"} & self.explicit:
            data["detectors"] = [d for d in DETECTOR_NAMES if d != "max-steps"]
        source = self.source or "hook defaults"
        if self.rules is None:
            return GuardConfig.from_mapping(data, source)
        return GuardConfig.from_mapping(data, source, rules=self.rules)

    def approval_policy(self) -> ApprovalPolicy:
        """The approval policy (the shipped default unless ``[approval]`` says otherwise).

        After the file's own rules comes one more: the agents' bookkeeping tools
        (``AGENT_INTERNAL_TOOLS``: TodoWrite, Task, AskUserQuestion...) are allowed.
        """
        from dataclasses import replace

        from antiloop.approval.policy import ApprovalPolicy, Rule

        policy = (
            ApprovalPolicy()
            if self.policy is None
            else ApprovalPolicy.from_mapping(self.policy, f"{self.source} [approval]")
        )
        internal = Rule("allow", tools=AGENT_INTERNAL_TOOLS, name="agent bookkeeping")
        return replace(policy, rules=(*policy.rules, internal))


def fail_mode(env: Mapping[str, str], config: HookConfig | None = None) -> str:
    """``closed`` when ``ANTILOOP_FAIL=closed`` (or the config says so), else ``open``."""
    value = (env.get("ANTILOOP_FAIL") or "").strip().lower()
    if value in ("open", "closed"):
        return value
    return config.fail if config is not None else "open"


def find_config(path: str | None, env: Mapping[str, str], cwd: str | None) -> Path | None:
    """The config file a hook reads, or None."""
    if path:
        return Path(path).expanduser()
    named = env.get("ANTILOOP_CONFIG")
    if named:
        return Path(named).expanduser()
    for base in (env.get("CLAUDE_PROJECT_DIR"), env.get("GEMINI_PROJECT_DIR"), cwd):
        if base:
            candidate = Path(base) / CONFIG_NAME
            if candidate.is_file():
                return candidate
    return None


def load_hook_config(
    path: str | None = None, env: Mapping[str, str] | None = None, cwd: str | None = None
) -> HookConfig:
    """Read the hook's config (see the module docstring for where it is looked for).

    Raises:
        ConfigError: the file cannot be read or parsed, or a key or value is wrong.
    """
    env = os.environ if env is None else env
    file = find_config(path, env, cwd)
    if file is None:
        return HookConfig()
    from antiloop.config import read_settings  # the one parser every command uses

    settings = read_settings(file)
    guard = dict(settings.guard)
    policy = settings.tables.get("approval")
    switches = _hook_table(settings.tables.get("hooks", {}), settings.source)
    switches.setdefault("approval", "off" if policy is None else "policy")
    return HookConfig(
        guard=guard,
        explicit=frozenset(guard),
        policy=policy,
        source=settings.source,
        telemetry=settings.tables.get("telemetry"),
        budgets=settings.tables.get("budgets"),
        rules=settings.rules,
        **switches,
    )


def _hook_table(hooks: object, source: str) -> dict[str, Any]:
    if not isinstance(hooks, dict):
        raise ConfigError(f"{source}: [hooks] must be a table")
    out: dict[str, Any] = {}
    for key, value in hooks.items():
        if key not in _HOOK_KEYS:
            from antiloop.core.text.suggest import unknown

            raise ConfigError(f"{source} [hooks]: {unknown('key', key, _HOOK_KEYS)}")
        if key == "approval" and value not in ("policy", "off"):
            raise ConfigError(f"{source} [hooks]: 'approval' must be policy or off, not {value!r}")
        if key == "fail" and value not in ("open", "closed"):
            raise ConfigError(f"{source} [hooks]: 'fail' must be open or closed, not {value!r}")
        if key == "deadline" and (
            isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
        ):
            raise ConfigError(f"{source} [hooks]: 'deadline' must be seconds > 0, not {value!r}")
        out[key] = float(value) if key == "deadline" else value
    return out
