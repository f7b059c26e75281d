r"""Approval policy: which calls need a person's yes, by risk tier, tool, operation or command.

A call gets a **risk tier** from its canonical procedure (docs/protocol.md section 3.1)::

    read     read, grep, list: nothing changes            (default: allow)
    write    edit, or a shell command that redirects into a file
    delete   rm, rmdir, unlink, shred, find -delete, git clean ...
    exec     bash, test, build and tools outside the table
    network  fetch, search, curl, wget, ssh, git push ...

Custom rules are tried first, in order; the first that matches decides. Otherwise the tier's
decision applies (read → allow; every other tier → ask).

An MCP server the config trusts may describe its tools with annotations (``ToolHints``); the
tier then comes from them, with the MCP spec's defaults for a hint left out: ``readOnlyHint``
→ read; otherwise ``destructiveHint`` (default true) → delete; not destructive but
``openWorldHint`` (default true) → network; else write. Annotations of other servers are never
read (the spec: clients must not trust them). They decide who is asked, never what a loop is.

    [approval]
    escalate_to = "human"          # or "supervisor": who a loop stop goes to
    timeout = 300                  # seconds a request waits; then it expires, which denies
    required = 1                   # k of k-of-n: approvals needed before a call goes on

    [approval.tiers]
    exec = "ask"

    [[approval.rules]]
    command = "^(git (status|diff|log)|pytest)\\b"
    decision = "allow"
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from antiloop.core.errors import ConfigError
from antiloop.core.procedure import procedure_of

DECISIONS = ("allow", "ask", "deny")
TIERS = ("read", "write", "delete", "exec", "network")
DEFAULT_TIERS: Mapping[str, str] = {
    "read": "allow",
    "write": "ask",
    "delete": "ask",
    "exec": "ask",
    "network": "ask",
}


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_OPERATION_TIER = {
    "read": "read",
    "grep": "read",
    "list": "read",
    "edit": "write",
    "bash": "exec",
    "test": "exec",
    "build": "exec",
    "fetch": "network",
    "search": "network",
}
_READ_PROGRAMS = _words(
    "cat head tail less more nl wc grep egrep fgrep rg ag ack ls tree find fd fdfind pwd echo "
    "printf stat file du df which whoami date true diff sort uniq cut tr basename dirname "
    "realpath readlink jq"
)
_DELETE_PROGRAMS = _words("rm rmdir unlink shred truncate")
_NETWORK_PROGRAMS = _words(
    "curl wget ssh scp sftp rsync nc ncat netcat telnet ftp http https aria2c"
)
_GIT_NETWORK = frozenset({"push", "pull", "fetch", "clone", "ls-remote"})
_RANK = {"read": 0, "write": 1, "exec": 2, "network": 3, "delete": 4}
_SHELL_KEYS = ("command", "cmd", "script", "input")
_RULE_KEYS = ("name", "tool", "operation", "risk", "command", "decision")
_POLICY_KEYS = ("escalate_to", "timeout", "required", "tiers", "rules")


@dataclass(frozen=True, slots=True)
class ToolHints:
    """An MCP tool's annotations, with the spec's defaults (2025-03-26 and later).

    Example:
        >>> ToolHints.from_annotations({"readOnlyHint": True}).tier
        'read'
        >>> ToolHints().tier  # nothing said: the spec assumes the worst
        'delete'
    """

    read_only: bool = False
    destructive: bool = True
    idempotent: bool = False
    open_world: bool = True

    @classmethod
    def from_annotations(cls, annotations: object) -> ToolHints:
        """The hints of a ``tools/list`` entry's ``annotations`` (absent or odd: the defaults)."""
        data = annotations if isinstance(annotations, Mapping) else {}

        def hint(key: str, default: bool) -> bool:
            value = data.get(key)
            return value if isinstance(value, bool) else default

        return cls(
            read_only=hint("readOnlyHint", False),
            destructive=hint("destructiveHint", True),
            idempotent=hint("idempotentHint", False),
            open_world=hint("openWorldHint", True),
        )

    @property
    def tier(self) -> str:
        """The risk tier the hints give."""
        if self.read_only:
            return "read"
        if self.destructive:
            return "delete"
        return "network" if self.open_world else "write"

    @property
    def rule(self) -> str:
        """The hint that decided the tier, as approval records name it."""
        if self.read_only:
            return "annotation:readOnlyHint"
        if self.destructive:
            return "annotation:destructiveHint"
        return "annotation:openWorldHint" if self.open_world else "annotation:not-destructive"


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """What the policy says about one call.

    Attributes:
        decision: ``allow``, ``ask`` or ``deny``.
        risk: the call's risk tier.
        operation: its canonical operation.
        rule: the name of the custom rule that decided, or ``tier:<risk>``.
        reason: one sentence for people.
    """

    decision: str
    risk: str
    operation: str
    rule: str
    reason: str


@dataclass(frozen=True, slots=True)
class Rule:
    """One custom rule: every condition given must match (an empty rule matches everything).

    Args:
        decision: ``allow``, ``ask`` or ``deny``.
        tools: tool names (case-insensitive).
        operations: canonical operations (``edit``, ``bash``, ``test``...).
        risks: risk tiers.
        command: a regular expression searched in a shell command (or a ``command`` argument).
        name: shown in reasons and the audit log.

    Example:
        >>> rule = Rule("allow", command="^pytest ")
        >>> rule.matches("Bash", {"command": "pytest -q"}, "exec", "test")
        True
    """

    decision: str
    tools: tuple[str, ...] = ()
    operations: tuple[str, ...] = ()
    risks: tuple[str, ...] = ()
    command: str | None = None
    name: str = ""
    _pattern: re.Pattern[str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.decision not in DECISIONS:
            raise ConfigError(f"rule decision must be one of {', '.join(DECISIONS)}")
        object.__setattr__(self, "tools", tuple(t.lower() for t in self.tools))
        if self.command is not None:
            try:
                object.__setattr__(self, "_pattern", re.compile(self.command))
            except re.error as exc:
                raise ConfigError(f"rule command {self.command!r} is no regex: {exc}") from None

    def matches(self, tool: str, args: Mapping[str, Any], risk: str, operation: str) -> bool:
        """True when every condition of the rule holds for the call."""
        if self.tools and tool.lower() not in self.tools:
            return False
        if self.operations and operation not in self.operations:
            return False
        if self.risks and risk not in self.risks:
            return False
        if self._pattern is not None:
            command = command_of(args)
            return command is not None and self._pattern.search(command) is not None
        return True


def command_of(args: Mapping[str, Any]) -> str | None:
    """The shell command in a call's arguments, if there is one."""
    for key in _SHELL_KEYS:
        value = args.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and value and all(isinstance(w, str) for w in value):
            return " ".join(value)
    return None


def risk_of(
    tool: str, args: Mapping[str, Any], paths: Sequence[str] = (), cwd: str | None = None
) -> tuple[str, str]:
    """The risk tier and canonical operation of a call.

    Every program of a shell command counts (``ls && rm x`` is a delete, ``cat a | sh`` is exec):
    the riskiest decides.

    Example:
        >>> risk_of("Bash", {"command": "ls && rm -rf build"})
        ('delete', 'list')
        >>> risk_of("Read", {"file_path": "a.py"})
        ('read', 'read')
    """
    proc = procedure_of(tool, args, paths, cwd)
    op = proc.operation
    tier = _OPERATION_TIER.get(op, "exec")
    if not proc.programs:
        return tier, op
    command = command_of(args) or ""
    for program in proc.programs:
        name = program.rsplit("/", 1)[-1].lower()
        if name in _DELETE_PROGRAMS:
            this = "delete"
        elif name in _NETWORK_PROGRAMS:
            this = "network"
        elif name == "git":
            words = set(command.split())
            if words & _GIT_NETWORK:
                this = "network"
            elif "clean" in words:
                this = "delete"
            else:
                this = "exec"
        elif name in _READ_PROGRAMS:
            this = "read"
            if name == "find" and ("-delete" in command or "-exec" in command):
                this = "delete" if "-delete" in command else "exec"
        else:
            this = "exec"
        if _RANK[this] > _RANK[tier]:
            tier = this
    if tier == "read" and op == "edit":
        tier = "write"
    return tier, op


@dataclass(frozen=True, slots=True)
class ApprovalPolicy:
    """Which calls need a person, and what a loop stop escalates to.

    Args:
        rules: custom rules, tried in order; the first match decides.
        tiers: decision per risk tier (read → allow, the rest → ask by default).
        escalate_to: ``human`` (ask a person about a loop stop) or ``supervisor``.
        timeout: seconds a request waits for an answer before it expires (and denies).
        required: approvals needed before a call goes on (k of k-of-n); one deny denies.

    Example:
        >>> policy = ApprovalPolicy()
        >>> policy.decide("Grep", {"pattern": "x"}).decision
        'allow'
        >>> policy.decide("Bash", {"command": "rm -rf /"}).decision
        'ask'
    """

    rules: tuple[Rule, ...] = ()
    tiers: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_TIERS))
    escalate_to: str = "human"
    timeout: float = 300.0
    required: int = 1

    def decide(
        self,
        tool: str,
        args: Mapping[str, Any] | None = None,
        paths: Sequence[str] = (),
        cwd: str | None = None,
        hints: ToolHints | None = None,
    ) -> PolicyDecision:
        """Allow, ask or deny one call; the first matching rule wins, then the tier.

        ``hints``: a trusted MCP server's annotations of the tool; they give the risk tier.
        """
        args = args or {}
        risk, op = risk_of(tool, args, paths, cwd)
        if hints is not None:
            risk = hints.tier
        for i, rule in enumerate(self.rules):
            if rule.matches(tool, args, risk, op):
                name = rule.name or f"rule {i + 1}"
                return PolicyDecision(
                    rule.decision, risk, op, name, f"{tool} ({risk}): {rule.decision} by {name}"
                )
        decision = self.tiers.get(risk, "ask")
        if hints is not None:
            return PolicyDecision(
                decision,
                risk,
                op,
                hints.rule,
                f"{tool} is a {risk} call ({hints.rule}): {decision}",
            )
        return PolicyDecision(
            decision, risk, op, f"tier:{risk}", f"{tool} is a {risk} call: {decision}"
        )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "[approval]") -> ApprovalPolicy:
        """Build a policy from the ``[approval]`` table; an unknown key or bad value is named."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source}: expected a table, got {type(data).__name__}")
        for key in data:
            if key not in _POLICY_KEYS:
                raise ConfigError(
                    f"{source}: unknown key {key!r} (known: {', '.join(sorted(_POLICY_KEYS))})"
                )
        kw: dict[str, Any] = {}
        if "escalate_to" in data:
            kw["escalate_to"] = _choice(
                source, "escalate_to", data["escalate_to"], ("human", "supervisor")
            )
        if "timeout" in data:
            value = data["timeout"]
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"{source}: 'timeout' must be seconds > 0, not {value!r}")
            kw["timeout"] = float(value)
        if "required" in data:
            value = data["required"]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{source}: 'required' must be an integer >= 1, not {value!r}")
            kw["required"] = value
        if "tiers" in data:
            tiers = data["tiers"]
            if not isinstance(tiers, Mapping):
                raise ConfigError(f"{source}: 'tiers' must be a table")
            merged = dict(DEFAULT_TIERS)
            for tier, decision in tiers.items():
                if tier not in TIERS:
                    raise ConfigError(
                        f"{source}.tiers: unknown tier {tier!r} (known: {', '.join(TIERS)})"
                    )
                merged[tier] = _choice(f"{source}.tiers", tier, decision, DECISIONS)
            kw["tiers"] = merged
        if "rules" in data:
            rules = data["rules"]
            if not isinstance(rules, list):
                raise ConfigError(f"{source}: 'rules' must be an array of tables")
            kw["rules"] = tuple(_rule(f"{source}.rules[{i}]", raw) for i, raw in enumerate(rules))
        return cls(**kw)


def _choice(source: str, key: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(f"{source}: {key!r} must be one of {', '.join(choices)}, not {value!r}")
    return str(value)


def _names(source: str, key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigError(f"{source}: {key!r} must be a string or a list of strings, not {value!r}")


def _rule(source: str, raw: Any) -> Rule:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: a rule must be a table")
    for key in raw:
        if key not in _RULE_KEYS:
            raise ConfigError(
                f"{source}: unknown key {key!r} (known: {', '.join(sorted(_RULE_KEYS))})"
            )
    if "decision" not in raw:
        raise ConfigError(f"{source}: 'decision' is required (allow, ask or deny)")
    decision = _choice(source, "decision", raw["decision"], DECISIONS)
    risks = _names(source, "risk", raw.get("risk", []))
    for risk in risks:
        _choice(source, "risk", risk, TIERS)
    command = raw.get("command")
    if command is not None and not isinstance(command, str):
        raise ConfigError(f"{source}: 'command' must be a regular expression string")
    name = raw.get("name", "")
    if not isinstance(name, str):
        raise ConfigError(f"{source}: 'name' must be a string")
    try:
        return Rule(
            decision,
            tools=_names(source, "tool", raw.get("tool", [])),
            operations=tuple(
                o.lower() for o in _names(source, "operation", raw.get("operation", []))
            ),
            risks=risks,
            command=command,
            name=name,
        )
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
