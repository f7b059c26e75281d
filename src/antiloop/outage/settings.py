"""The ``[outage]`` table: how long store calls are retried, and where the journal lives."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from antiloop.core.errors import ConfigError
from antiloop.core.text.suggest import unknown

DEFAULT_JOURNAL = "~/.antiloop/journal"
DEFAULT_WINDOW = 10.0


def _env_window() -> float:
    """``ANTILOOP_RETRY_WINDOW`` when it is a number of seconds >= 0, else 10."""
    raw = os.environ.get("ANTILOOP_RETRY_WINDOW", "")
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_WINDOW
    return value if 0 <= value < float("inf") else DEFAULT_WINDOW


@dataclass(frozen=True, slots=True)
class OutageConfig:
    """How a guard rides out a store outage.

    Attributes:
        retry_window: seconds a failing store call is retried (backoff with jitter) before
            ``on_store_error`` applies; 0 applies it at the first failure. Never past the
            request's own deadline (``antiloop serve --store-timeout``, the hook's deadline).
            By default ``ANTILOOP_RETRY_WINDOW``, else 10 (the hooks read no ``[outage]``).
        backoff: seconds before the first retry; each wait after doubles, up to ``max_backoff``,
            and is drawn at random between half of it and all of it (jitter).
        max_backoff: the longest wait between two attempts.
        journal: the directory of the journals (one file per process, per store); by default
            ``ANTILOOP_JOURNAL``, else ``~/.antiloop/journal``; ``""`` keeps no journal (a step
            answered without the store is then not recorded).
        journal_max_bytes: the most one process's journal holds; a step that would not fit
            is refused (``block``) rather than answered unrecorded.

    Example:
        >>> OutageConfig.from_mapping({"retry_window": 20}).retry_window
        20.0
    """

    retry_window: float = field(default_factory=lambda: _env_window())
    backoff: float = 0.05
    max_backoff: float = 1.0
    journal: str | None = None
    journal_max_bytes: int = 64 * 1024 * 1024

    @property
    def journal_dir(self) -> Path | None:
        """The journal directory, ``~`` expanded; None when journaling is off."""
        where = self.journal
        if where is None:
            where = os.environ.get("ANTILOOP_JOURNAL") or DEFAULT_JOURNAL
        return Path(where).expanduser() if where else None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "config") -> OutageConfig:
        """Build it from ``[outage]``, naming any unknown key or bad value in one line."""
        where = f"{source}: [outage]"
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where} must be a table, not {data!r}")
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                raise ConfigError(f"{where} {unknown('key', key, known)}")
            if key == "journal":
                if not isinstance(value, str):
                    raise ConfigError(f"{where} 'journal' must be a directory path, not {value!r}")
                values[key] = value
            elif key == "journal_max_bytes":
                if isinstance(value, bool) or not isinstance(value, int) or value < 4096:
                    raise ConfigError(f"{where} 'journal_max_bytes' must be >= 4096, not {value!r}")
                values[key] = value
            else:
                bad = isinstance(value, bool) or not isinstance(value, int | float)
                if bad or value < 0 or value != value or value == float("inf"):
                    raise ConfigError(
                        f"{where} {key!r} must be a number of seconds >= 0, not {value!r}"
                    )
                values[key] = float(value)
        return cls(**values)
