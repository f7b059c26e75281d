"""The rows readings are read by, and the rows a config adds (``[readings]`` in antiloop.toml)."""

from __future__ import annotations

from pathlib import Path

import pytest

from antiloop.config import read_settings
from antiloop.core.errors import ConfigError
from antiloop.core.result import read_result, same_result, scrub
from antiloop.core.rules.readings import rows_of_table
from antiloop.core.rules.ruleset import BUILTIN, Rules, load_rules
from antiloop.core.text.engine import Engine, engine_for

TAP = """
[[readings.test_runners]]
name = "tap"
summary = '# fail +\\d+'
failing = '(\\d+)'
starts = "#"

[[readings.scrubbers]]
name = "build id"
pattern = 'build-[0-9a-f]{8}'
placeholder = "<build>"

[[readings.error_lines]]
name = "panic"
pattern = '^panic: '

[[readings.error_lines]]
name = "quiet"
pattern = 'error budget'
no_error = true
"""


def _rules(tmp_path: Path, text: str = TAP) -> Rules:
    path = tmp_path / "antiloop.toml"
    path.write_text(text, encoding="utf-8")
    return read_settings(path).rules


def test_a_config_row_adds_a_test_runner(tmp_path: Path) -> None:
    """A runner row read from antiloop.toml gives the failing count of its summaries."""
    rules = _rules(tmp_path)
    assert read_result("test", True, "1..4\n# fail  2\n", None, 1, {}).failing is None
    assert read_result("test", True, "1..4\n# fail  2\n", None, 1, {}, rules).failing == 2
    assert read_result("test", True, "=== 3 failed in 1s ===\n", None, 1, {}, rules).failing == 3


def test_a_config_scrubber_masks_its_value(tmp_path: Path) -> None:
    """Two outputs that differ only in a value a config scrubber masks are the same text."""
    rules = _rules(tmp_path)
    assert scrub("deployed BUILD-0a1b2c3d in 3ms", rules) == "deployed <build> in <dur>"
    assert scrub("deployed BUILD-0a1b2c3d in 3ms") == "deployed BUILD-0a1b2c3d in <dur>"
    a = read_result("bash", True, "deployed build-0a1b2c3d\n", None, 0, {}, rules)
    b = read_result("bash", True, "deployed build-99ffee00\n", None, 0, {}, rules)
    assert a.exact != b.exact
    assert same_result(a, b) is not None


def test_config_error_line_rows(tmp_path: Path) -> None:
    """An error-line row makes error lines; a no-error row skips the lines it matches."""
    rules = _rules(tmp_path)
    text = "error budget: 3 left\npanic: runtime error\n"
    assert read_result("bash", True, "ok\npanic: nil map\n", None, 2, {}, rules).error_line == (
        "panic: nil map"
    )
    assert read_result("bash", True, text, None, 2, {}, rules).error_line == "panic: runtime error"


def test_the_cache_keeps_each_rule_set_apart(tmp_path: Path) -> None:
    """A text read by one rule set, then by another, is read by each set's own rows."""
    rules = _rules(tmp_path)
    for _ in range(2):
        assert read_result("test", True, "# fail 5\n", None, 1, {}).failing is None
        assert read_result("test", True, "# fail 5\n", None, 1, {}, rules).failing == 5


def test_reading_a_config_installs_nothing(tmp_path: Path) -> None:
    """After a file with rows is read, the built-in rule set reads as it did."""
    _rules(tmp_path)
    assert read_result("test", True, "# fail 5\n", None, 1, {}).failing is None
    assert scrub("deployed build-0a1b2c3d") == "deployed build-0a1b2c3d"


def test_a_config_without_readings_reads_by_the_built_in_set(tmp_path: Path) -> None:
    """A file without ``[canonical]`` or ``[readings]`` gives the built-in rule set itself."""
    assert _rules(tmp_path, 'embedder = "ngram"\n') is BUILTIN
    assert engine_for(BUILTIN) is engine_for(BUILTIN)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"test_runner": []}, "unknown key 'test_runner' (did you mean 'test_runners'?)"),
        ({"scrubbers": {"name": "x"}}, "scrubbers must be a list of tables"),
        ({"scrubbers": ["x"]}, "scrubbers[0] must be a table"),
        (
            {"scrubbers": [{"name": "id", "pattern": "id-("}]},
            "scrubbers[0] 'id': 'pattern' is not a valid regex",
        ),
        ({"scrubbers": [{"name": "id", "pattern": "id"}]}, "'id': 'placeholder' is required"),
        (
            {"test_runners": [{"name": "t", "summary": "x", "fail": "y"}]},
            "test_runners[0] 't': unknown key 'fail' (known: count, failing",
        ),
        (
            {"test_runners": [{"name": "t", "summary": 3}]},
            "'summary' must be a str, not 3",
        ),
        (
            {"error_lines": [{"name": "e", "pattern": "x", "no_error": "yes"}]},
            "'no_error' must be true or false",
        ),
        (
            {"error_lines": [{"name": "e", "pattern": "(?P<x>a)"}]},
            "'pattern' has a named group",
        ),
        (
            {"error_lines": [{"name": "e", "pattern": "a(?i)b"}]},
            "'pattern' is not a valid regex",
        ),
    ],
)
def test_a_bad_row_is_one_line_naming_it(table: dict[str, object], message: str) -> None:
    """A bad row is a ConfigError of one line that names the file, the table and the row."""
    with pytest.raises(ConfigError) as info:
        rows_of_table(table, "antiloop.toml")
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith("antiloop.toml: [readings]")
    assert message in text


def test_a_bad_row_in_a_file_is_named(tmp_path: Path) -> None:
    """Reading a file with a bad row fails, naming the file, the table and the row."""
    text = '[[readings.scrubbers]]\nname = "x"\npattern = "("\nplaceholder = "<x>"\n'
    with pytest.raises(ConfigError, match=r"antiloop.toml: \[readings\] scrubbers\[0\] 'x'"):
        _rules(tmp_path, text)


def test_every_built_in_row_compiles() -> None:
    """The built-in rows compile into one engine (each table on first use)."""
    engine = Engine(BUILTIN)
    assert engine.scrub_view(b"x 12ms", b"x 00ms") == b"x <dur>"
    assert engine.finder().first_line("ok\nerror: x\n") == "error: x"
    assert engine.failing(["3 examples, 1 failure\n"]) == 1


def test_a_runner_row_without_groups_counts_each_match() -> None:
    """A failing regex without groups counts one failing test per match."""
    rules = load_rules(
        {
            "readings": {
                "test_runners": [
                    {"name": "tap", "summary": r"1\.\.\d+[^\x00]*", "failing": "not ok"}
                ]
            }
        }
    )
    engine = Engine(rules)
    assert engine.failing(["1..3\nok 1\nnot ok 2\nnot ok 3\n"]) == 2
