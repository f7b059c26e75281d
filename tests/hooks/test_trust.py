"""Codex's hook trust and Gemini's trusted folders: install records, doctor checks."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

from tests.hooks.conftest import ANTILOOP

from antiloop.hooks import codex_trust, installer
from antiloop.hooks.doctor import diagnose, trust_checks
from antiloop.hooks.gemini_trust import folder_trust


def _home(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEX_", "GEMINI_"))}
    env["HOME"] = str(tmp_path / "home")
    (tmp_path / "home").mkdir(exist_ok=True)
    return env


def test_the_hash_is_codexs_own() -> None:
    """sha256 of Codex's canonical identity (checked against Codex 0.171 in test_real_clis)."""
    handler = {"type": "command", "command": "antiloop hook codex", "timeout": 30}
    digest = codex_trust.handler_hash("PreToolUse", None, handler)
    identity = (
        '{"event_name":"pre_tool_use","hooks":[{"async":false,"command":"antiloop hook codex",'
        '"timeout":30,"type":"command"}]}'
    )
    import hashlib

    assert digest == "sha256:" + hashlib.sha256(identity.encode()).hexdigest()
    assert codex_trust.handler_hash("PreToolUse", None, {**handler, "timeout": 31}) != digest


def test_record_trust_keeps_the_rest_of_config_toml(tmp_path: Path) -> None:
    """Only our [hooks.state."…"] tables are added; a second run changes nothing."""
    env = _home(tmp_path)
    config = tmp_path / "home" / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('model = "o5"  # mine\n\n[projects."/x"]\ntrust_level = "trusted"\n')
    hooks = tmp_path / "project" / ".codex" / "hooks.json"
    installer.install("codex", hooks, "antiloop hook codex")
    assert codex_trust.untrusted_events(hooks, env) == list(installer.EVENTS["codex"])
    written = codex_trust.record_trust(hooks, env)
    assert len(written) == len(installer.EVENTS["codex"])
    text = config.read_text()
    assert text.startswith('model = "o5"  # mine\n\n[projects."/x"]\ntrust_level = "trusted"\n')
    state = tomllib.loads(text)["hooks"]["state"]
    assert set(state) == set(written)
    assert codex_trust.untrusted_events(hooks, env) == []
    assert codex_trust.record_trust(hooks, env) == []
    assert config.read_text() == text
    installer.install("codex", hooks, "antiloop hook codex --config other.toml")
    assert codex_trust.untrusted_events(hooks, env) == list(installer.EVENTS["codex"])


def test_install_asks_for_trust_and_doctor_fails_without_it(tmp_path: Path) -> None:
    """Without --trust (and no terminal) install prints the step; doctor fails until taken."""
    env = _home(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    run = {"cwd": project, "env": env, "capture_output": True, "text": True, "check": True}
    first = subprocess.run([str(ANTILOOP), "install", "codex"], stdin=subprocess.DEVNULL, **run)
    assert "antiloop install codex --trust" in first.stdout
    hooks = tmp_path / "home" / ".codex" / "hooks.json"
    checks = {c.name: c for c in trust_checks("codex", hooks, project, env)}
    assert checks["trust"].ok is False
    assert "--trust" in checks["trust"].detail
    second = subprocess.run([str(ANTILOOP), "install", "codex", "--trust"], **run)
    assert "Codex trusts the hooks now" in second.stdout
    assert [c.ok for c in trust_checks("codex", hooks, project, env)] == [True]


def test_a_codex_project_needs_the_project_trusted(tmp_path: Path) -> None:
    """Project hooks load only in a trusted project: doctor says how to trust it."""
    env = _home(tmp_path)
    project = tmp_path / "project"
    hooks = project / ".codex" / "hooks.json"
    installer.install("codex", hooks, "antiloop hook codex")
    codex_trust.record_trust(hooks, env)
    checks = {c.name: c for c in trust_checks("codex", hooks, project, env)}
    assert checks["trust"].ok is True
    assert checks["project"].ok is False
    assert "trust_level" in checks["project"].detail
    config = tmp_path / "home" / ".codex" / "config.toml"
    config.write_text(f'[projects."{project}"]\ntrust_level = "trusted"\n' + config.read_text())
    assert all(c.ok for c in trust_checks("codex", hooks, project, env))


def test_gemini_project_hooks_need_a_trusted_folder(tmp_path: Path) -> None:
    """No rule, or DO_NOT_TRUST, fails; TRUST_FOLDER of it or TRUST_PARENT of a child passes."""
    env = _home(tmp_path)
    project = tmp_path / "work" / "game"
    project.mkdir(parents=True)
    trusted, detail = folder_trust(project, env)
    assert trusted is False
    assert "--skip-trust" in detail
    assert "TRUST_FOLDER" in detail
    folders = tmp_path / "home" / ".gemini" / "trustedFolders.json"
    folders.parent.mkdir(parents=True)
    for rules, want in (
        ({str(project): "TRUST_FOLDER"}, True),
        ({str(tmp_path / "work"): "TRUST_FOLDER", str(project): "DO_NOT_TRUST"}, False),
        ({str(tmp_path / "work" / "other"): "TRUST_PARENT"}, True),
    ):
        folders.write_text(json.dumps(rules))
        assert folder_trust(project, env)[0] is want, rules
    settings = tmp_path / "home" / ".gemini" / "settings.json"
    settings.write_text(json.dumps({"security": {"folderTrust": {"enabled": False}}}))
    folders.write_text("{}")
    assert folder_trust(project, env)[0] is True


def test_doctor_fails_an_untrusted_gemini_project(tmp_path: Path) -> None:
    """The project's .gemini/settings.json in an untrusted folder: doctor fails."""
    env = _home(tmp_path)
    env["ANTILOOP_HOOKD"] = "0"
    env["ANTILOOP_STORE"] = f"sqlite:///{tmp_path / 'a.db'}"
    project = tmp_path / "game"
    path = project / ".gemini" / "settings.json"
    installer.install("gemini", path)
    checks = {c.name: c for c in diagnose("gemini", path, env=env, run=False)}
    assert checks["trust"].ok is False
