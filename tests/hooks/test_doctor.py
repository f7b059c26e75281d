"""``antiloop doctor``: an installation checked end to end, and what it finds when broken."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.hooks.conftest import ANTILOOP

from antiloop.hooks import installer
from antiloop.hooks.doctor import diagnose, installations, permissions_check
from antiloop.stores.sqlite import SQLiteStore


def _findings(checks: list) -> dict[str, bool | None]:  # type: ignore[type-arg]
    return {c.name: c.ok for c in checks}


def test_a_good_installation_passes_every_check(tmp_path: Path, env: dict[str, str]) -> None:
    """Settings, entries, command, a dry run that stops a repeat, store and config: all ok."""
    path = tmp_path / "settings.json"
    installer.install("claude-code", path)
    home = {**env, "HOME": str(tmp_path / "home")}
    checks = diagnose("claude-code", path, env=home, cwd=str(tmp_path))
    assert _findings(checks) == {
        "settings": True,
        "entries": True,
        "on failure": True,
        "command": True,
        "dry run": True,
        "store": True,
        "permissions": True,
        "config": True,
        "daemon": True,
    }
    assert "fingerprint" in next(c.detail for c in checks if c.name == "dry run")


def test_codex_and_gemini_installations_pass(tmp_path: Path, env: dict[str, str]) -> None:
    """The dry run speaks each agent's dialect."""
    env = {**env, "CODEX_HOME": str(tmp_path / "codex")}
    for agent in ("codex", "gemini"):
        path = tmp_path / f"{agent}.json"
        installer.install(agent, path)
        if agent == "codex":
            from antiloop.hooks.codex_trust import record_trust

            record_trust(path, env)
        checks = diagnose(agent, path, env=env, cwd=str(tmp_path))
        assert all(c.ok for c in checks), [c.line() for c in checks]


def test_a_command_that_does_not_exist_fails(tmp_path: Path, env: dict[str, str]) -> None:
    """A hook command pointing at a removed installation is a failure; no dry run is tried."""
    path = tmp_path / "settings.json"
    installer.install("claude-code", path, "/gone/venv/bin/antiloop hook claude-code")
    findings = _findings(diagnose("claude-code", path, env=env))
    assert findings["command"] is False
    assert "dry run" not in findings


def test_missing_entries_and_switched_off_hooks_fail(tmp_path: Path, env: dict[str, str]) -> None:
    """An event without our hook, or disableAllHooks, is a failure."""
    path = tmp_path / "settings.json"
    installer.install("claude-code", path)
    data = json.loads(path.read_text())
    del data["hooks"]["PostToolUse"]
    data["disableAllHooks"] = True
    path.write_text(json.dumps(data))
    findings = _findings(diagnose("claude-code", path, env=env, run=False))
    assert findings["entries"] is False
    assert findings["switch"] is False


def test_no_settings_or_no_entries_fail(tmp_path: Path, env: dict[str, str]) -> None:
    """A missing file, a broken file, or a file without our hooks is reported."""
    assert _findings(diagnose("claude-code", tmp_path / "none.json", env=env)) == {
        "settings": False
    }
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert _findings(diagnose("claude-code", broken, env=env)) == {"settings": False}
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    assert _findings(diagnose("claude-code", empty, env=env))["entries"] is False


def test_installations_are_found_in_every_scope(tmp_path: Path) -> None:
    """Project and user installations are found; a file without our hooks is not."""
    home = tmp_path / "home"
    project = tmp_path / "project"
    env = {"CLAUDE_CONFIG_DIR": str(home / ".claude"), "CODEX_HOME": str(home / ".codex")}
    installer.install("claude-code", installer.settings_path("claude-code", "user", env=env))
    installer.install("codex", installer.settings_path("codex", "project", cwd=project))
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text('{"model": "opus"}')
    found = installations(cwd=project, env=env)
    assert ("claude-code", home / ".claude" / "settings.json") in found
    assert ("codex", project / ".codex" / "hooks.json") in found
    assert all(agent != "gemini" for agent, _ in found)


def test_the_doctor_command_line(tmp_path: Path, env: dict[str, str]) -> None:
    """``antiloop doctor`` prints one line per finding and exits 0 when all is well, 1 if not."""
    path = tmp_path / "settings.json"
    installer.install("claude-code", path)
    ok = subprocess.run(
        [str(ANTILOOP), "doctor", "claude-code", "--settings", str(path)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert ok.returncode == 0, ok.stdout
    assert "all good" in ok.stdout
    installer.uninstall("claude-code", path)
    bad = subprocess.run(
        [str(ANTILOOP), "doctor", "claude-code", "--settings", str(path), "--no-run"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert bad.returncode == 1
    assert "FAIL" in bad.stdout


def test_permissions_fail_when_others_may_read_the_store_or_antiloops_directory(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """A store file, ``-wal`` or ``~/.antiloop`` open to others fails; a listable dir warns."""
    home = tmp_path / "home"
    db = home / ".antiloop" / "antiloop.db"
    here = {**env, "HOME": str(home), "ANTILOOP_STORE": f"sqlite:///{db}"}
    store = SQLiteStore(db)
    with store.transaction("s") as state:  # the -wal and -shm exist while it is open
        state.steps += 1
    assert permissions_check(here).ok is True
    db.chmod(0o644)
    found = permissions_check(here)
    assert found.ok is False
    assert f"{db} (644)" in found.detail
    db.chmod(0o600)
    Path(f"{db}-wal").chmod(0o640)
    assert permissions_check(here).ok is False
    Path(f"{db}-wal").chmod(0o600)
    db.parent.chmod(0o755)
    assert f"{db.parent} (755)" in permissions_check(here).detail
    db.parent.chmod(0o700)
    store.close()

    elsewhere = tmp_path / "shared" / "antiloop.db"
    SQLiteStore(elsewhere).sessions()
    elsewhere.parent.chmod(0o755)  # a directory the user chose, others may list: a warning
    db.chmod(0o644)  # in ~/.antiloop, which this configuration does not use: not looked at
    found = permissions_check({**here, "ANTILOOP_STORE": f"sqlite:///{elsewhere}"})
    assert (found.ok, "others may list the store's directory" in found.detail) == (None, True)
    assert str(db) not in found.detail


def test_doctor_reads_the_projects_config_as_the_hook_does(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """A misspelt key in the project's antiloop.toml fails doctor, wherever it is run from."""
    project = tmp_path / "game"
    path = project / ".claude" / "settings.json"
    installer.install("claude-code", path)
    (project / "antiloop.toml").write_text("repeat_treshold = 3\n")
    env = {**env, "HOME": str(tmp_path / "home")}
    checks = {c.name: c for c in diagnose("claude-code", path, env=env)}
    assert checks["config"].ok is False
    assert "repeat_treshold" in checks["config"].detail
    assert checks["dry run"].ok is False  # the hook itself answers "not checked" there
    (project / "antiloop.toml").write_text("repeat_threshold = 3\n")
    assert all(c.ok for c in diagnose("claude-code", path, env=env))
