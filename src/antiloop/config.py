"""Configuration: ``antiloop.toml`` or the JSON config of docs/protocol.md section 7.

Every key is optional. An unknown key, or a value of the wrong kind, is a ``ConfigError`` that
names it; nothing is silently ignored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from antiloop.core.errors import ConfigError
from antiloop.core.rules.ruleset import BUILTIN, Rules, load_rules
from antiloop.core.text.suggest import unknown

TASK_BUDGETS = {"simple": 25, "research": 100, "coding": 250}
DEFAULT_BUDGET = 100
DETECTOR_NAMES = ("repeat", "cycle", "fail-streak", "max-steps", "goal", "stagnation")
"""The detectors on by default."""
OPT_IN_DETECTORS = ("hidden-repeat", "cosmetic-rerun")
"""Detectors that run only when ``detectors`` names them (``antiloop.core.extra.detectors``)."""
KNOWN_DETECTORS = DETECTOR_NAMES + OPT_IN_DETECTORS
ACTIONS = ("continue", "nudge", "ask", "block", "stop")
#: Tables antiloop.toml may hold beside the guard's keys; each is read by the part it configures.
TABLES = (
    "approval",
    "hooks",
    "audit",
    "telemetry",
    "budgets",
    "mcp",
    "fleet",
    "canonical",
    "readings",
    "outage",
)


@dataclass(frozen=True, slots=True)
class GuardConfig:
    """The guard's settings; see docs/protocol.md section 7 for the meaning of each key.

    ``rules`` is no key: it is the rule set of the file's ``[canonical]`` and ``[readings]``
    tables (``antiloop.core.rules.ruleset.load_rules``), the built-in rows by default.

    Example:
        >>> GuardConfig(max_steps=50).budget
        50
    """

    max_steps: int | None = None
    min_steps: int = 5
    task_type: str | None = None
    repeat_threshold: int = 2
    cycle_max_period: int = 4
    failure_streak: int = 3
    goal_threshold: float | None = None
    stagnation_threshold: float | None = 0.95  # None: the embedder's calibrated value
    stagnation_window: int = 3
    allow_repeat_tools: tuple[str, ...] = ("sleep", "wait")
    embedder: str = "auto"
    escalate_to: str = "human"
    mode: str = "enforce"
    detectors: tuple[str, ...] = DETECTOR_NAMES
    repeat_action: str = "stop"
    on_store_error: str = "allow"
    hidden_repeat_threshold: int = 3
    cosmetic_rerun_threshold: int = 2
    max_sessions: int = 100_000  # antiloop check: sessions kept; the least recent go first
    escalation: tuple[str, ...] = ("ask", "stop")  # what an ignored nudge becomes, in turn
    rules: Rules = field(default=BUILTIN, repr=False)

    @property
    def budget(self) -> int:
        """The step budget: ``max_steps``, else the default for ``task_type``."""
        if self.max_steps is not None:
            return self.max_steps
        return TASK_BUDGETS.get(self.task_type or "", DEFAULT_BUDGET)

    @classmethod
    def from_mapping(
        cls, data: Mapping[str, Any], source: str = "config", rules: Rules = BUILTIN
    ) -> GuardConfig:
        """Build a config from a mapping, naming any unknown key or bad value."""
        if not isinstance(data, Mapping):
            raise ConfigError(
                f"{source}: expected an object of settings, got {type(data).__name__}"
            )
        known = {f.name for f in fields(cls)} - {"rules"}
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                raise ConfigError(f"{source}: {unknown('key', key, known)}")
            values[key] = _check(key, value, source)
        return cls(**values, rules=rules)


def _positive_int(key: str, value: Any, source: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{source}: {key!r} must be an integer >= {minimum}, not {value!r}")
    return value


def _unit_float(key: str, value: Any, source: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ConfigError(f"{source}: {key!r} must be a number between 0 and 1, not {value!r}")
    return float(value)


def _choice(key: str, value: Any, source: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(f"{source}: {key!r} must be one of {', '.join(choices)}, not {value!r}")
    return str(value)


def _check(key: str, value: Any, source: str) -> Any:
    if key == "max_steps":
        return None if value is None else _positive_int(key, value, source)
    if key in ("min_steps", "cycle_max_period", "failure_streak"):
        return _positive_int(key, value, source, minimum=0 if key != "min_steps" else 1)
    if key == "max_sessions":
        return _positive_int(key, value, source)
    if key in ("repeat_threshold", "stagnation_window"):
        return _positive_int(key, value, source, minimum=2 if key == "repeat_threshold" else 1)
    if key in ("hidden_repeat_threshold", "cosmetic_rerun_threshold"):
        return _positive_int(key, value, source, minimum=2)
    if key in ("goal_threshold", "stagnation_threshold"):
        return None if value is None else _unit_float(key, value, source)
    if key == "task_type":
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{source}: 'task_type' must be a string, not {value!r}")
        return value
    if key in ("allow_repeat_tools", "detectors"):
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{source}: {key!r} must be a list of strings, not {value!r}")
        if key == "detectors":
            for name in value:
                _choice("detectors", name, source, KNOWN_DETECTORS)
        return tuple(v.lower() for v in value)
    if key == "embedder":
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{source}: 'embedder' must be a name, not {value!r}")
        return value
    if key == "escalate_to":
        return _choice(key, value, source, ("human", "supervisor"))
    if key == "escalation":
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{source}: 'escalation' must be a list of actions, not {value!r}")
        return tuple(_choice(key, v, source, ("ask", "block", "stop")) for v in value)
    if key == "mode":
        return _choice(key, value, source, ("enforce", "shadow"))
    if key == "on_store_error":
        return _choice(key, value, source, ("allow", "block"))
    return _choice(key, value, source, ACTIONS)  # repeat_action


@dataclass(frozen=True, slots=True)
class FleetConfig:
    """The ``[fleet]`` table: kill switch and cross-session knowledge (``antiloop.fleet``).

    Attributes:
        known_after: a fingerprint that stopped this many sessions is known.
        nudge: nudge a session at its first step of a known procedure (off by default: it
            makes a verdict depend on other sessions).
        live_window: seconds since its last step a session counts as live.
        ttl: seconds the counts of a fingerprint live after its last stop.
        max_known: fingerprints counted at most (the least recently stopped go first).
        refresh: seconds between full reloads of the kills and counts (pub/sub between).
    """

    known_after: int = 3
    nudge: bool = False
    live_window: float = 300.0
    ttl: float = 7 * 86400.0
    max_known: int = 10_000
    refresh: float = 5.0

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "config") -> FleetConfig:
        """Build it from ``[fleet]``, naming any unknown key or bad value in one line."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source}: [fleet] must be a table, not {data!r}")
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                raise ConfigError(f"{source}: [fleet] {unknown('key', key, known)}")
            where = f"{source}: [fleet]"
            if key in ("known_after", "max_known"):
                values[key] = _positive_int(key, value, where)
            elif key == "nudge":
                if not isinstance(value, bool):
                    raise ConfigError(f"{where} 'nudge' must be true or false, not {value!r}")
                values[key] = value
            else:
                bad = isinstance(value, bool) or not isinstance(value, int | float)
                if bad or not value > 0:
                    raise ConfigError(
                        f"{where} {key!r} must be a number of seconds > 0, not {value!r}"
                    )
                values[key] = float(value)
        return cls(**values)


@dataclass(frozen=True, slots=True)
class Settings:
    """A config file as every command reads it: the guard's keys and the other tables.

    Attributes:
        guard: the guard's keys (at the top of the file, or under ``[guard]``), not yet checked.
        tables: ``[approval]``, ``[hooks]``, ``[audit]``, ``[telemetry]``, ``[budgets]``,
            ``[mcp]``, ``[canonical]``, ``[readings]``, as given (each checked by the part it
            configures).
        source: the file read.
        rules: the rule set of ``[canonical]`` and ``[readings]``, checked as the file is read
            and installed nowhere (``config()`` gives it to the guard's settings).
    """

    guard: Mapping[str, Any]
    tables: Mapping[str, Mapping[str, Any]]
    source: str
    rules: Rules = BUILTIN

    def config(self) -> GuardConfig:
        """The guard's settings of the file, its rule set with them."""
        return GuardConfig.from_mapping(self.guard, source=self.source, rules=self.rules)


def read_settings(path: str | Path) -> Settings:
    """Read a JSON (``.json``) or TOML config: the one parser of every command and the hooks.

    The guard's keys stand at the top or under ``[guard]`` (not both); beside them only the
    tables of ``TABLES``. An unknown table or key is named, with the near name if there is one.

    Raises:
        ConfigError: the file cannot be read or parsed, or holds an unknown table or key.
    """
    file = Path(path).expanduser()
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config {file}: {exc.strerror or exc}") from None
    kind = "JSON" if file.suffix == ".json" else "TOML"
    import tomllib  # only when a TOML file is read: the hook path starts a process per call

    try:
        data = json.loads(raw) if kind == "JSON" else tomllib.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: not valid {kind}: {_first_line(exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: expected an object of settings, got {type(data).__name__}")
    data = dict(data)
    tables: dict[str, Mapping[str, Any]] = {}
    for name in TABLES:
        if name in data:
            table = data.pop(name)
            if not isinstance(table, dict):
                raise ConfigError(f"{file}: [{name}] must be a table, not {table!r}")
            tables[name] = table
    guard = data.pop("guard", None)
    if guard is not None:
        if not isinstance(guard, dict):
            raise ConfigError(f"{file}: [guard] must be a table, not {guard!r}")
        if data:
            extra = sorted(data)[0]
            raise ConfigError(
                f"{file}: {unknown('table or key', extra, ('guard', *TABLES))} beside [guard]"
            )
        data = guard
    return Settings(data, tables, str(file), load_rules(tables, str(file)))


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


CONFIG_NAME = "antiloop.toml"


def find_config(
    given: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
) -> tuple[Path | None, str]:
    """The config file a command reads, and how it was found (to say so on stderr).

    ``given`` (``--config``) first, then ``ANTILOOP_CONFIG``, then ``antiloop.toml`` in the
    working directory or the nearest parent that has one, as ruff and pytest find theirs.

    Example:
        >>> find_config("mine.toml", {})
        (PosixPath('mine.toml'), 'given')
    """
    import os

    if given:
        return Path(given).expanduser(), "given"
    env = os.environ if env is None else env
    named = env.get("ANTILOOP_CONFIG")
    if named:
        return Path(named).expanduser(), "ANTILOOP_CONFIG"
    here = Path.cwd() if cwd is None else Path(cwd)
    for folder in (here, *here.parents):
        candidate = folder / CONFIG_NAME
        if candidate.is_file():
            return candidate, "found"
    return None, "none"


def say_config(path: Path | None, how: str, command: str) -> None:
    """Name on stderr the config file a command read when it was not given on its line."""
    import sys

    if path is None or how == "given":
        return
    why = "ANTILOOP_CONFIG" if how == "ANTILOOP_CONFIG" else "the nearest antiloop.toml"
    print(
        f"antiloop {command}: config {path.resolve()} ({why}; --no-config for the defaults)",
        file=sys.stderr,
    )


def load_config(path: str | Path) -> GuardConfig:
    """The guard's settings of a config file and its rule set (see ``read_settings``)."""
    return read_settings(path).config()
