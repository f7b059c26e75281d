"""The approval policy: risk tiers, custom rules, the [approval] table."""

from __future__ import annotations

import pytest

from antiloop import ConfigError
from antiloop.approval import ApprovalPolicy, Rule, risk_of


@pytest.mark.parametrize(
    ("tool", "args", "risk"),
    [
        ("Read", {"file_path": "a.py"}, "read"),
        ("Grep", {"pattern": "x"}, "read"),
        ("Glob", {"pattern": "*.py"}, "read"),
        ("Bash", {"command": "cat a.py | head"}, "read"),
        ("Edit", {"file_path": "a.py", "old_string": "a", "new_string": "b"}, "write"),
        ("Bash", {"command": "cat a > b"}, "write"),
        ("Bash", {"command": "rm -rf build"}, "delete"),
        ("Bash", {"command": "ls && rm x"}, "delete"),
        ("Bash", {"command": "git clean -fdx"}, "delete"),
        ("Bash", {"command": "find . -name '*.pyc' -delete"}, "delete"),
        ("Bash", {"command": "pytest -q"}, "exec"),
        ("Bash", {"command": "cat a | sh"}, "exec"),
        ("mcp__db__query", {"sql": "select 1"}, "exec"),
        ("WebFetch", {"url": "https://x"}, "network"),
        ("WebSearch", {"query": "x"}, "network"),
        ("Bash", {"command": "curl https://x"}, "network"),
        ("Bash", {"command": "git push origin main"}, "network"),
    ],
)
def test_risk_tiers(tool, args, risk):
    """Each call gets the riskiest tier of what it does, over every program of a command."""
    assert risk_of(tool, args)[0] == risk


def test_default_policy_allows_reads_and_asks_for_the_rest():
    """By default read-only calls run and writes, deletes, exec and network ask."""
    policy = ApprovalPolicy()
    assert policy.decide("Read", {"file_path": "a"}).decision == "allow"
    for tool, args in [
        ("Write", {"file_path": "a", "content": "x"}),
        ("Bash", {"command": "rm a"}),
        ("Bash", {"command": "make"}),
        ("WebFetch", {"url": "u"}),
    ]:
        assert policy.decide(tool, args).decision == "ask"


def test_rules_first_match_wins():
    """Custom rules are tried in order before the tiers; the first match decides."""
    policy = ApprovalPolicy(
        rules=(
            Rule("deny", command=r"rm -rf /", name="no-root"),
            Rule("allow", command=r"^(pytest|git (status|diff))\b", name="safe"),
            Rule("allow", tools=("Write",), name="writes"),
            Rule("ask", operations=("read",), name="reads"),
        )
    )
    assert policy.decide("Bash", {"command": "rm -rf / --no-preserve-root"}).rule == "no-root"
    assert policy.decide("Bash", {"command": "rm -rf / --no-preserve-root"}).decision == "deny"
    assert policy.decide("Bash", {"command": "pytest -q"}).decision == "allow"
    assert policy.decide("write", {"file_path": "a"}).decision == "allow"
    assert policy.decide("Read", {"file_path": "a"}).decision == "ask"
    assert policy.decide("Bash", {"command": "make"}).rule == "tier:exec"


def test_from_mapping_reads_the_approval_table():
    """The [approval] table sets tiers, rules, escalation, timeout and quorum."""
    policy = ApprovalPolicy.from_mapping(
        {
            "escalate_to": "supervisor",
            "timeout": 60,
            "required": 2,
            "tiers": {"exec": "allow", "network": "deny"},
            "rules": [{"name": "tests", "tool": ["Bash"], "operation": "test", "decision": "ask"}],
        }
    )
    assert (policy.escalate_to, policy.timeout, policy.required) == ("supervisor", 60.0, 2)
    assert policy.decide("Bash", {"command": "make"}).decision == "allow"
    assert policy.decide("Bash", {"command": "pytest"}).rule == "tests"
    assert policy.decide("WebFetch", {"url": "u"}).decision == "deny"


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ({"escalate": "human"}, "'escalate'"),
        ({"escalate_to": "boss"}, "escalate_to"),
        ({"timeout": 0}, "timeout"),
        ({"required": 0}, "required"),
        ({"tiers": {"danger": "ask"}}, "'danger'"),
        ({"tiers": {"exec": "maybe"}}, "exec"),
        ({"rules": [{"tool": "Bash"}]}, "decision"),
        ({"rules": [{"decision": "allow", "tools": "Bash"}]}, "'tools'"),
        ({"rules": [{"decision": "allow", "command": "("}]}, "regex"),
        ({"rules": [{"decision": "allow", "risk": "scary"}]}, "risk"),
    ],
)
def test_from_mapping_names_bad_keys(data, named):
    """An unknown key or a bad value is a ConfigError that names it."""
    with pytest.raises(ConfigError, match=named):
        ApprovalPolicy.from_mapping(data)
