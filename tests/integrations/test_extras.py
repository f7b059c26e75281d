"""Each integration names its extra when the framework is missing; the proxy needs a command."""

from __future__ import annotations

import subprocess
import sys

import pytest

MISSING = """
import sys
sys.modules[{package!r}] = None  # importing it now raises ImportError
try:
    import antiloop.integrations.{module}
except ImportError as exc:
    print(type(exc).__name__, exc)
"""


@pytest.mark.parametrize(
    ("module", "package", "extra"),
    [
        ("langchain", "langchain", "langchain"),
        ("openai_agents", "agents", "openai-agents"),
        ("autogen", "autogen_agentchat", "autogen"),
        ("pydantic_ai", "pydantic_ai", "pydantic-ai"),
        ("google_adk", "google.adk", "google-adk"),
        ("litellm", "litellm", "litellm"),
        ("crewai", "crewai", "crewai"),
    ],
)
def test_missing_framework_raises_missing_extra_with_the_pip_line(module, package, extra):
    """Without its framework an integration raises MissingExtra naming the extra to install."""
    code = MISSING.format(package=package, module=module)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert proc.stdout.startswith("MissingExtra ")
    assert f"install antiloop with its [{extra}] extra (pip install -e '.[{extra}]'" in proc.stdout


def test_mcp_proxy_needs_the_server_command():
    """antiloop mcp-proxy without a command after -- exits 2 and says what is missing."""
    proc = subprocess.run(
        [sys.executable, "-m", "antiloop", "mcp-proxy", "--"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "give the server command after --" in proc.stderr


def test_mcp_proxy_reports_a_server_that_cannot_start():
    """A server command that does not exist is a clear error, not a traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "antiloop", "mcp-proxy", "--", "no-such-mcp-server-xyz"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "cannot start 'no-such-mcp-server-xyz'" in proc.stderr
