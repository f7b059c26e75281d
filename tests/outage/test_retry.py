"""``antiloop.outage``: the [outage] settings, ride_out's backoff and deadline, the journal file."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from antiloop.core.errors import ConfigError, StoreError
from antiloop.outage import OutageConfig, StoreOutage, deadline, ride_out, time_left
from antiloop.outage.journal import Journal, JournalFull


def test_the_default_window_is_ten_seconds_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTILOOP_RETRY_WINDOW", raising=False)
    assert OutageConfig().retry_window == 10.0
    monkeypatch.setenv("ANTILOOP_RETRY_WINDOW", "2.5")
    assert OutageConfig().retry_window == 2.5
    monkeypatch.setenv("ANTILOOP_RETRY_WINDOW", "soon")
    assert OutageConfig().retry_window == 10.0


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ({"retry_windw": 3}, "retry_windw"),
        ({"retry_window": -1}, "retry_window"),
        ({"retry_window": True}, "retry_window"),
        ({"journal": 3}, "journal"),
        ({"journal_max_bytes": 10}, "journal_max_bytes"),
    ],
)
def test_a_bad_outage_table_is_named_in_one_line(table: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=named) as caught:
        OutageConfig.from_mapping(table, "antiloop.toml")
    assert "\n" not in str(caught.value)
    assert "[outage]" in str(caught.value)


def test_ride_out_backs_off_with_jitter_and_gives_up_after_the_window() -> None:
    slept: list[float] = []
    calls = 0

    def failing() -> None:
        nonlocal calls
        calls += 1
        raise StoreError("refused")

    with pytest.raises(StoreOutage) as caught:
        ride_out(failing, 0.5, backoff=0.1, max_backoff=0.3, sleep=slept.append)
    assert calls == len(slept) + 1
    assert all(0.05 <= s <= 0.3 for s in slept)  # each wait between half and all of its step
    assert slept[0] <= 0.1 and max(slept) > 0.1  # noqa: PT018 - the doubling, then the cap
    assert "refused" in str(caught.value) and f"{calls} attempts" in str(caught.value)  # noqa: PT018


def test_ride_out_returns_the_first_success() -> None:
    answers = iter([StoreError("down"), StoreError("down"), "ok"])

    def flaky() -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert ride_out(flaky, 5.0, backoff=0.001, sleep=lambda s: None) == "ok"


def test_a_window_of_zero_tries_once() -> None:
    calls = []
    with pytest.raises(StoreOutage):
        ride_out(lambda: calls.append(1) or (_ for _ in ()).throw(StoreError("x")), 0.0)
    assert calls == [1]


def test_deadlines_nest_to_the_sooner_and_bound_the_window() -> None:
    assert time_left() is None
    with deadline(5.0):
        with deadline(60.0):
            left = time_left()
            assert left is not None and left <= 5.0  # noqa: PT018
        started = time.monotonic()
        with deadline(0.5), pytest.raises(StoreOutage):
            ride_out(_refuse, 30.0, backoff=0.01, max_backoff=0.05)
        assert time.monotonic() - started < 0.5  # the deadline, not a speed figure


def _refuse() -> None:
    raise StoreError("refused")


def test_the_journal_is_private_fsynced_bounded_and_removed_when_replayed(tmp_path: Path) -> None:
    journal = Journal(tmp_path, "redis://h/0 prefix=p", 4096)
    journal.append({"id": "a", "at": 1.0, "step": {"tool": "t"}})
    journal.append({"id": "b", "at": 2.0, "step": {"tool": "t"}})
    assert journal.path is not None
    assert journal.path.stat().st_mode & 0o777 == 0o600
    assert journal.path.parent.stat().st_mode & 0o777 == 0o700
    assert [e["id"] for e in journal.pending()] == ["a", "b"]
    with pytest.raises(JournalFull):
        journal.append({"id": "c", "at": 3.0, "step": {"tool": "t" * 5000}})
    journal.done("a")
    lines = [json.loads(line) for line in journal.path.read_text().splitlines()]
    assert lines[-1] == {"done": "a"}
    path = journal.path
    journal.done("b")
    assert not path.exists()  # nothing pending: the file is gone
    journal.close()


def test_a_live_processes_journal_is_left_alone(tmp_path: Path) -> None:
    mine = Journal(tmp_path, "store", 1 << 20)
    mine.append({"id": "x", "at": 1.0, "step": {"tool": "t"}})
    other = Journal(tmp_path, "store", 1 << 20)
    assert other.adopt() == 0  # its lock is held: that process lives
    mine.close()  # the process ends: the lock goes with it
    assert other.adopt() == 1
    assert [e["id"] for e in other.pending()] == ["x"]
    assert len(list(other.folder.iterdir())) == 1  # the old file moved into the adopter's
    other.close()


def test_threads_failing_at_once_share_one_journal(tmp_path: Path) -> None:
    """Many threads journaling their first step at once: one journal holds every step."""
    import threading

    from antiloop.core.step import Step
    from antiloop.core.verdict import Verdict
    from antiloop.outage.rider import Rider
    from antiloop.stores.memory import MemoryStore

    def down(entry: object) -> None:  # the store stays down: nothing is replayed meanwhile
        raise StoreError("down")

    rider = Rider(OutageConfig(journal=str(tmp_path)), MemoryStore(), put=down)
    start = threading.Barrier(16)

    def fail(n: int) -> None:
        start.wait()
        step = Step(tool="read", args={"path": f"f{n}"}, session="s")
        rider.keep(step, f"id-{n}", Verdict.ok("unguarded"), StoreError("down"))

    threads = [threading.Thread(target=fail, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert rider.replayer is not None
    assert len(rider.replayer) == 16
    assert len(list(tmp_path.glob("*/*.jsonl"))) == 1
    rider.replayer.close()
