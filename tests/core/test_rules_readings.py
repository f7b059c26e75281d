"""The rows readings are read by, and the rows a config adds (``[readings]`` in antiloop.toml)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from antiloop.config import read_settings
from antiloop.core.errors import ConfigError
from antiloop.core.result import read_result, same_result, scrub
from antiloop.core.rules.readings import BUILTIN, Rules, rules_from_table
from antiloop.core.text.engine import Engine, current, install

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


@pytest.fixture(autouse=True)
def _builtin_rows() -> Iterator[None]:
    """Each test ends with the built-in rows in use again."""
    yield
    install(Rules((), (), ()))


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "antiloop.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_config_row_adds_a_test_runner(tmp_path: Path) -> None:
    """A runner row read from antiloop.toml gives the failing count of its summaries."""
    assert read_result("test", True, "1..4\n# fail  2\n", None, 1, {}).failing is None
    read_settings(_config(tmp_path, TAP))
    assert read_result("test", True, "1..4\n# fail  2\n", None, 1, {}).failing == 2
    assert read_result("test", True, "=== 3 failed in 1s ===\n", None, 1, {}).failing == 3


def test_a_config_scrubber_masks_its_value(tmp_path: Path) -> None:
    """Two outputs that differ only in a value a config scrubber masks are the same text."""
    read_settings(_config(tmp_path, TAP))
    assert scrub("deployed BUILD-0a1b2c3d in 3ms") == "deployed <build> in <dur>"
    a = read_result("bash", True, "deployed build-0a1b2c3d\n", None, 0, {})
    b = read_result("bash", True, "deployed build-99ffee00\n", None, 0, {})
    assert a.exact != b.exact
    assert same_result(a, b) is not None


def test_config_error_line_rows(tmp_path: Path) -> None:
    """An error-line row makes error lines; a no-error row skips the lines it matches."""
    read_settings(_config(tmp_path, TAP))
    text = "error budget: 3 left\npanic: runtime error\n"
    assert read_result("bash", True, "ok\npanic: nil map\n", None, 2, {}).error_line == (
        "panic: nil map"
    )
    assert read_result("bash", True, text, None, 2, {}).error_line == "panic: runtime error"


def test_the_cache_keeps_the_rows_a_text_was_read_with(tmp_path: Path) -> None:
    """A text read again after a config added rows is read with the new rows."""
    before = current()
    assert read_result("test", True, "# fail 5\n", None, 1, {}).failing is None
    read_settings(_config(tmp_path, TAP))
    assert current() is not before
    assert read_result("test", True, "# fail 5\n", None, 1, {}).failing == 5


def test_a_config_without_readings_keeps_the_rows() -> None:
    """The rows in use stay the built-in ones unless a config adds some."""
    assert current().rules == BUILTIN


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
        rules_from_table(table, "antiloop.toml")
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith("antiloop.toml: [readings]")
    assert message in text


def test_a_bad_row_in_a_file_is_named_and_nothing_is_installed(tmp_path: Path) -> None:
    """Reading a file with a bad row fails before any of its rows is put in use."""
    path = _config(
        tmp_path, '[[readings.scrubbers]]\nname = "x"\npattern = "("\nplaceholder = "<x>"\n'
    )
    before = current()
    with pytest.raises(ConfigError, match=r"antiloop.toml: \[readings\] scrubbers\[0\] 'x'"):
        read_settings(path)
    assert current() is before


def test_every_built_in_row_compiles() -> None:
    """The built-in rows compile into one engine (each table on first use)."""
    engine = Engine(BUILTIN)
    assert engine.scrub_view(b"x 12ms", b"x 00ms") == b"x <dur>"
    assert engine.finder().first_line("ok\nerror: x\n") == "error: x"
    assert engine.failing(["3 examples, 1 failure\n"]) == 1


def test_a_runner_row_without_groups_counts_each_match() -> None:
    """A failing regex without groups counts one failing test per match."""
    rows = rules_from_table(
        {"test_runners": [{"name": "tap", "summary": r"1\.\.\d+[^\x00]*", "failing": "not ok"}]}
    )
    engine = Engine(Rules(BUILTIN.runners + rows.runners, BUILTIN.errors, BUILTIN.scrubbers))
    assert engine.failing(["1..3\nok 1\nnot ok 2\nnot ok 3\n"]) == 2
