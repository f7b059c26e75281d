"""install / uninstall: our entries in, exactly our entries out, everything else as found."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.hooks.conftest import ANTILOOP

from antiloop.core.errors import ConfigError
from antiloop.hooks import installer

COMMAND = "/opt/antiloop/bin/antiloop hook claude-code"

# A settings file as a person keeps it: their own hooks, permissions, odd formatting.
SETTINGS = (
    "{\n"
    '    "model": "opus",\n'
    '    "permissions": {"allow": ["Bash(npm test)", "Read(~/notes/**)"], "deny": []},\n'
    '    "hooks": {\n'
    '        "PreToolUse": [\n'
    '            {"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh"}]}\n'
    "        ],\n"
    '        "Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}]\n'
    "    },\n"
    '    "env": {"GREETING": "h\\u00e9llo"}\n'
    "}\n"
)


def _load(path: Path) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(path.read_text())
    return value


def test_install_then_uninstall_leaves_the_file_byte_identical(tmp_path: Path) -> None:
    """Uninstall after install gives back the very bytes that were there."""
    path = tmp_path / "settings.json"
    path.write_text(SETTINGS)
    result = installer.install("claude-code", path, COMMAND)
    assert result.changed
    assert result.backup is not None
    assert result.backup.read_text() == SETTINGS
    assert installer.uninstall("claude-code", path).restored
    assert path.read_text() == SETTINGS
    assert not result.backup.exists()


def test_install_keeps_every_other_setting_and_hook(tmp_path: Path) -> None:
    """The person's settings and hooks stay; each event gets one antiloop group of its own."""
    path = tmp_path / "settings.json"
    path.write_text(SETTINGS)
    installer.install("claude-code", path, COMMAND)
    data = _load(path)
    before = json.loads(SETTINGS)
    assert data["model"] == "opus"
    assert data["permissions"] == before["permissions"]
    assert data["env"] == before["env"]
    assert data["hooks"]["PreToolUse"][0] == before["hooks"]["PreToolUse"][0]
    assert data["hooks"]["Notification"] == before["hooks"]["Notification"]
    ours = installer.find_ours(data, "claude-code")
    assert sorted(ours) == sorted(installer.EVENTS["claude-code"])
    assert data["hooks"]["PreToolUse"][1] == {
        "matcher": "*",
        "hooks": [{"type": "command", "command": COMMAND, "timeout": 30}],
    }
    assert data["hooks"]["Stop"] == [
        {"hooks": [{"type": "command", "command": COMMAND, "timeout": 30}]}
    ]


def test_install_is_idempotent(tmp_path: Path) -> None:
    """A second install changes nothing, not even the formatting."""
    path = tmp_path / "settings.json"
    path.write_text(SETTINGS)
    installer.install("claude-code", path, COMMAND)
    once = path.read_bytes()
    assert not installer.install("claude-code", path, COMMAND).changed
    assert path.read_bytes() == once


def test_install_keeps_the_files_indentation(tmp_path: Path) -> None:
    """The file is written with its own indentation and line ending."""
    path = tmp_path / "settings.json"
    path.write_text(SETTINGS)
    installer.install("claude-code", path, COMMAND)
    text = path.read_text()
    assert text.startswith('{\n    "model": "opus",\n')
    assert text.endswith("}\n")
    assert "\\u00e9" in text  # escapes stay escapes


def test_uninstall_keeps_changes_made_since(tmp_path: Path) -> None:
    """A setting changed after install survives uninstall; only our entries go."""
    path = tmp_path / "settings.json"
    path.write_text(SETTINGS)
    installer.install("claude-code", path, COMMAND)
    data = _load(path)
    data["model"] = "sonnet"
    data["hooks"]["Stop"][0]["hooks"].append({"type": "command", "command": "say done"})
    path.write_text(json.dumps(data, indent=4) + "\n")
    result = installer.uninstall("claude-code", path)
    assert result.changed
    assert not result.restored
    after = _load(path)
    expected = json.loads(SETTINGS)
    expected["model"] = "sonnet"
    expected["hooks"]["Stop"] = [{"hooks": [{"type": "command", "command": "say done"}]}]
    assert after == expected
    assert installer.find_ours(after, "claude-code") == {}


def test_a_missing_file_is_created_and_removed_again(tmp_path: Path) -> None:
    """Install into no file creates it (and its directory); uninstall removes it again."""
    path = tmp_path / ".claude" / "settings.json"
    result = installer.install("claude-code", path, COMMAND)
    assert result.changed
    assert result.backup is None
    assert path.is_file()
    assert installer.uninstall("claude-code", path).removed
    assert not path.exists()


def test_an_empty_settings_object_is_restored(tmp_path: Path) -> None:
    """A file holding only {} comes back as {} (from the backup), not deleted."""
    path = tmp_path / "settings.json"
    path.write_text("{}")
    installer.install("claude-code", path, COMMAND)
    installer.uninstall("claude-code", path)
    assert path.read_text() == "{}"


def test_a_new_command_replaces_ours(tmp_path: Path) -> None:
    """Installing with another command path replaces our entries instead of adding more."""
    path = tmp_path / "settings.json"
    path.write_text(SETTINGS)
    installer.install("claude-code", path, COMMAND)
    installer.install("claude-code", path, "/new/venv/bin/antiloop hook claude-code")
    ours = installer.find_ours(_load(path), "claude-code")
    assert all(len(h) == 1 for h in ours.values())
    assert {h[0]["command"] for h in ours.values()} == {"/new/venv/bin/antiloop hook claude-code"}
    installer.uninstall("claude-code", path)
    assert path.read_text() == SETTINGS  # the backup was kept from before the first install


def test_uninstall_without_our_entries_changes_nothing(tmp_path: Path) -> None:
    """Uninstalling from a file without antiloop hooks leaves it untouched."""
    path = tmp_path / "settings.json"
    path.write_text(SETTINGS)
    assert not installer.uninstall("claude-code", path).changed
    assert path.read_text() == SETTINGS
    assert not installer.uninstall("claude-code", tmp_path / "none.json").changed


def test_other_agents_hooks_are_not_ours(tmp_path: Path) -> None:
    """Uninstalling Claude Code's hooks leaves a Codex hook of antiloop alone (and vice versa)."""
    path = tmp_path / "hooks.json"
    installer.install("codex", path, "antiloop hook codex")
    installer.install("claude-code", path, COMMAND)
    installer.uninstall("claude-code", path)
    data = _load(path)
    assert installer.find_ours(data, "claude-code") == {}
    assert sorted(installer.find_ours(data, "codex")) == sorted(installer.EVENTS["codex"])


@pytest.mark.parametrize(
    "text", ["{not json", "[1, 2]", '{"hooks": []}', '{"hooks": {"Stop": {}}}']
)
def test_a_file_it_cannot_read_is_left_alone(tmp_path: Path, text: str) -> None:
    """Invalid JSON, a non-object, or hooks of the wrong shape: refused, file untouched."""
    path = tmp_path / "settings.json"
    path.write_text(text)
    with pytest.raises(ConfigError):
        installer.install("claude-code", path, COMMAND)
    assert path.read_text() == text


def test_gemini_entries(tmp_path: Path) -> None:
    """Gemini gets named handlers, millisecond timeouts and a regex matcher for tools."""
    path = tmp_path / "settings.json"
    installer.install("gemini", path, "antiloop hook gemini")
    hooks = _load(path)["hooks"]
    assert sorted(hooks) == sorted(installer.EVENTS["gemini"])
    assert hooks["BeforeTool"] == [
        {
            "matcher": ".*",
            "hooks": [
                {
                    "name": "antiloop",
                    "type": "command",
                    "command": "antiloop hook gemini",
                    "timeout": 30000,
                }
            ],
        }
    ]


def test_codex_entries(tmp_path: Path) -> None:
    """Codex gets hooks.json with one group per event and a timeout in seconds."""
    path = tmp_path / "hooks.json"
    installer.install("codex", path, "antiloop hook codex")
    hooks = _load(path)["hooks"]
    assert sorted(hooks) == sorted(installer.EVENTS["codex"])
    assert hooks["PreToolUse"] == [
        {"hooks": [{"type": "command", "command": "antiloop hook codex", "timeout": 30}]}
    ]


def test_settings_paths(tmp_path: Path) -> None:
    """User and project files of each agent; CLAUDE_CONFIG_DIR and CODEX_HOME are honoured."""
    env = {"CLAUDE_CONFIG_DIR": "/cfg/claude", "CODEX_HOME": "/cfg/codex"}
    path = installer.settings_path
    assert path("claude-code", "user", env=env) == Path("/cfg/claude/settings.json")
    assert path("claude-code", "project", cwd=tmp_path) == tmp_path / ".claude/settings.json"
    assert path("claude-code", "local", cwd=tmp_path) == tmp_path / ".claude/settings.local.json"
    assert path("gemini", "project", cwd=tmp_path) == tmp_path / ".gemini/settings.json"
    assert path("codex", "user", env=env) == Path("/cfg/codex/hooks.json")
    assert path("codex", "project", cwd=tmp_path) == tmp_path / ".codex/hooks.json"
    with pytest.raises(ConfigError):
        path("gemini", "local")


def test_the_default_command_is_this_antiloop() -> None:
    """The command names the antiloop script beside this interpreter by its absolute path."""
    assert installer.default_command("claude-code") == f"{ANTILOOP} hook claude-code"


@pytest.mark.parametrize(
    ("command", "ours"),
    [
        ("/home/a/.venv/bin/antiloop hook claude-code", True),
        ("antiloop hook claude-code --config x.toml", True),
        ("'/path with space/antiloop' hook claude-code", True),
        ("/usr/bin/python3 -m antiloop hook claude-code", True),
        ("antiloop hook codex", False),
        ("my-antiloop-wrapper hook claude-code", False),
        ("echo antiloop", False),
    ],
)
def test_ours_is_recognised_by_the_command(command: str, ours: bool) -> None:
    """Only handlers running ``antiloop hook <agent>`` are ours."""
    assert installer.is_ours({"type": "command", "command": command}, "claude-code") is ours


def test_the_install_command_line(tmp_path: Path) -> None:
    """``antiloop install`` and ``--uninstall`` through the CLI, byte-identical in the end."""
    path = tmp_path / "settings.json"
    path.write_text(SETTINGS)
    base = [str(ANTILOOP), "install", "claude-code", "--settings", str(path)]
    done = subprocess.run(base, capture_output=True, text=True, check=True)
    assert "added hooks for" in done.stdout
    assert "antiloop doctor" in done.stdout
    again = subprocess.run(base, capture_output=True, text=True, check=True)
    assert "already installed" in again.stdout
    undone = subprocess.run([*base, "--uninstall"], capture_output=True, text=True, check=True)
    assert "restored byte for byte" in undone.stdout
    assert path.read_text() == SETTINGS


def test_print_shows_the_entries_and_touches_nothing(tmp_path: Path) -> None:
    """``--print`` writes the settings snippet to stdout only."""
    done = subprocess.run(
        [str(ANTILOOP), "install", "claude-code", "--print", "--command", COMMAND],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    snippet = json.loads(done.stdout)
    assert snippet["hooks"]["PostToolUse"][0]["hooks"][0]["command"] == COMMAND
    assert list(tmp_path.iterdir()) == []


def test_http_hooks_skip_the_events_that_take_none(tmp_path: Path) -> None:
    """Claude Code takes no HTTP hook for SessionStart (or Setup): no entry is written."""
    path = tmp_path / "settings.json"
    url = installer.hook_url("http://127.0.0.1:8765", "claude-code")
    installer.install("claude-code", path, url)
    hooks = json.loads(path.read_text())["hooks"]
    assert "SessionStart" not in hooks
    assert all(g["hooks"][0]["type"] == "http" for groups in hooks.values() for g in groups)
    assert set(hooks) == set(installer.events_for("claude-code", url))
    installer.install("claude-code", path)  # back to command hooks: SessionStart again
    assert "SessionStart" in json.loads(path.read_text())["hooks"]


def test_shared_settings_carry_no_machine_path(tmp_path: Path) -> None:
    """install --project names antiloop by the PATH; --local and --user by its absolute path."""
    env = {k: v for k, v in os.environ.items() if k != "CLAUDE_CONFIG_DIR"}
    env["HOME"] = str(tmp_path / "home")
    for flag in ("--project", "--local", "--user"):
        subprocess.run(
            [str(ANTILOOP), "install", "claude-code", flag],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            check=True,
        )
    project = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    local = json.loads((tmp_path / ".claude" / "settings.local.json").read_text())
    user = json.loads((tmp_path / "home" / ".claude" / "settings.json").read_text())
    commands = {
        name: {h["command"] for gs in data["hooks"].values() for g in gs for h in g["hooks"]}
        for name, data in (("project", project), ("local", local), ("user", user))
    }
    assert commands["project"] == {"antiloop hook claude-code"}
    assert commands["local"] == commands["user"] == {f"{ANTILOOP} hook claude-code"}
    assert str(ANTILOOP.parent) not in (tmp_path / ".claude" / "settings.json").read_text()
