"""Config files and their errors."""

from __future__ import annotations

import json

import pytest

from antiloop import ConfigError, Guard, GuardConfig, load_config
from antiloop.config import read_settings


def test_json_config_builds_a_guard(tmp_path):
    """The section 7 JSON config sets the guard's thresholds."""
    path = tmp_path / "c.json"
    path.write_text(
        json.dumps({"max_steps": 7, "repeat_threshold": 3, "escalate_to": "supervisor"})
    )
    guard = Guard.from_config(path)
    assert guard.config.budget == 7
    assert "Repeat(threshold=3)" in repr(guard)


def test_toml_config_with_or_without_a_guard_table(tmp_path):
    """antiloop.toml may hold the keys at the top or under [guard]."""
    top = tmp_path / "a.toml"
    top.write_text('mode = "shadow"\nallow_repeat_tools = ["Sleep", "poll"]\n')
    assert load_config(top).allow_repeat_tools == ("sleep", "poll")
    table = tmp_path / "b.toml"
    table.write_text("[guard]\nmin_steps = 2\n")
    assert load_config(table).min_steps == 2


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"max_step": 5}, "unknown key 'max_step'"),
        ({"max_steps": 0}, "'max_steps' must be an integer >= 1"),
        ({"repeat_threshold": 1}, "'repeat_threshold' must be an integer >= 2"),
        ({"stagnation_threshold": 1.5}, "'stagnation_threshold' must be a number between 0 and 1"),
        ({"escalate_to": "boss"}, "'escalate_to' must be one of human, supervisor"),
        ({"allow_repeat_tools": "sleep"}, "'allow_repeat_tools' must be a list of strings"),
        ({"detectors": ["repeat", "magic"]}, "'detectors' must be one of"),
        ({"mode": "loud"}, "'mode' must be one of enforce, shadow"),
        ({"min_steps": True}, "'min_steps' must be an integer"),
    ],
)
def test_bad_keys_and_values_are_named(data, message):
    """An unknown key or a bad value is a ConfigError that names it."""
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        GuardConfig.from_mapping(data)


def test_unreadable_or_invalid_files(tmp_path):
    """A missing file or invalid JSON/TOML is a ConfigError naming the file."""
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(bad)
    other = tmp_path / "x.toml"
    other.write_text("[guard]\n[stores]\n")
    with pytest.raises(ConfigError, match="unknown table or key 'stores'"):
        load_config(other)


def test_other_tables_are_read_by_their_owners(tmp_path):
    """[approval] beside [guard] is accepted and handed over as it is."""
    path = tmp_path / "antiloop.toml"
    path.write_text("[guard]\nmin_steps = 3\n[approval]\ntimeout = 60\n")
    assert load_config(path).min_steps == 3
    settings = read_settings(path)
    assert settings.tables == {"approval": {"timeout": 60}}
    assert settings.guard == {"min_steps": 3}
    top = tmp_path / "top.toml"
    top.write_text("min_steps = 3\n[approval]\ntimeout = 60\n[hooks]\nfail = 'open'\n")
    assert load_config(top).min_steps == 3  # guard keys at the top, beside the tables
    assert set(read_settings(top).tables) == {"approval", "hooks"}
