"""Fleet controls across three real `antiloop serve` replicas over one Redis.

Sessions go round-robin over the replicas. A kill through one replica (or the command line,
straight into Redis) must stop a step on each of the others within 1 s of the kill: a
behavioural deadline of the kill switch (pub/sub), not a speed benchmark; set-up time is
generous. Then fingerprints that stopped sessions on some replicas are known on the others.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.server.conftest import TOKEN, Server, start_server, stop_server
from tests.stores.test_faults_redis import RedisServer

pytestmark = [pytest.mark.redis, pytest.mark.slow]

DEADLINE = 1.0  # seconds from a kill to a stopped step on every replica


def _post(server: Server, step: dict[str, Any]) -> dict[str, Any]:
    status, answer = server.call("POST", "/v1/steps", step)
    assert status == 200, answer
    return answer  # type: ignore[no-any-return]


def _until(ready: Any, what: str, limit: float = 30.0) -> None:
    """Wait for ``ready()``: a limit for a stuck test, not a timed assertion."""
    started = time.monotonic()
    while not ready():
        assert time.monotonic() - started < limit, f"timed out waiting for {what}"
        time.sleep(0.02)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "ANTILOOP_TOKEN": TOKEN, **(env or {})}
    done = subprocess.run(
        [sys.executable, "-m", "antiloop", "fleet", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
    )
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[list[Server], str, str]]:
    """Three replicas over a Redis of the test's own, nudges on after 2 stopped sessions."""
    redis = RedisServer(tmp_path)
    redis.start()
    config = tmp_path / "antiloop.toml"
    config.write_text("[fleet]\nknown_after = 2\nnudge = true\n")
    url = redis.url(prefix="fleet")
    replicas: list[Server] = []
    try:
        replicas.extend(
            start_server(tmp_path, "--store", url, "--config", str(config)) for _ in range(3)
        )
        _ready(replicas)
        yield replicas, url, str(config)
    finally:
        for replica in replicas:
            stop_server(replica)
        redis.stop()


def _kills(server: Server) -> list[str]:
    status, body = server.call("GET", "/v1/fleet/kills")
    assert status == 200, body
    return [k["key"] for k in body["kills"]]


def _ready(replicas: list[Server]) -> None:
    """Every replica's subscriber listens: a probe kill is seen by all, then lifted by all."""
    probe = {"session": "probe"}
    assert replicas[0].call("POST", "/v1/fleet/kill", probe)[0] == 200
    _until(lambda: all(_kills(r) == ["session:probe"] for r in replicas), "the probe kill")
    assert replicas[1].call("POST", "/v1/fleet/lift", probe)[0] == 200
    _until(lambda: all(_kills(r) == [] for r in replicas), "the probe lift")


def _read(session: str, n: int, agent: str) -> dict[str, Any]:
    return {
        "session": session,
        "agent": agent,
        "tool": "Read",
        "args": {"path": f"f{n}"},
        "output": f"{n}",
    }


def _time_to_stop(replicas: list[Server], agent: str, kill: Callable[[], float]) -> list[float]:
    """For each replica, the seconds from a kill to its first step the kill stopped.

    Each replica gets steps of fresh sessions of ``agent`` in a thread of its own, one after
    another, from before the kill until one comes back stopped by the kill switch. ``kill()``
    sets the kill and returns its time (``at``, seconds since the epoch, as kept in Redis);
    a step's time is when its answer came back.
    """
    answered: list[float] = [float("inf")] * len(replicas)
    reasons: list[str] = [""] * len(replicas)
    going = threading.Event()

    def probe(i: int) -> None:
        n = 0
        going.wait()
        while not reasons[i] and n < 100_000:
            answer = _post(replicas[i], _read(f"{agent}-late-{i}-{n}", 0, agent))
            if answer["action"] == "stop":
                assert answer["detector"] == "kill", answer
                answered[i], reasons[i] = time.time(), answer["reason"]
            n += 1

    threads = [threading.Thread(target=probe, args=(i,), daemon=True) for i in range(3)]
    for t in threads:
        t.start()
    going.set()
    at = kill()
    for t in threads:
        t.join(timeout=60)
    assert all("fleet kill switch" in r for r in reasons), reasons
    return [t - at for t in answered]


def test_a_kill_stops_every_replica_within_a_second_and_known_loops_nudge(
    fleet: tuple[list[Server], str, str],
) -> None:
    replicas, url, config = fleet
    # sessions round-robin: step n of session s goes to replica (s + n) % 3
    for n in range(3):
        for s in range(6):
            answer = _post(replicas[(s + n) % 3], _read(f"w{s}", n, "worker"))
            assert answer["action"] == "continue", answer

    # 1. the kill switch, through one replica's API
    def by_http() -> float:
        status, made = replicas[0].call(
            "POST", "/v1/fleet/kill", {"agent": "Worker", "reason": "runaway", "by": "alice"}
        )
        assert status == 200, made
        assert made["by"] == "alice", made
        return float(made["at"])

    http = _time_to_stop(replicas, "worker", by_http)
    for s in range(6):  # the sessions that ran before the kill stop at their next step
        answer = _post(replicas[(s + 1) % 3], _read(f"w{s}", 9, "worker"))
        assert answer["detector"] == "kill", answer
        assert "by alice" in answer["reason"], answer
    assert _post(replicas[2], _read("other", 0, "writer"))["action"] == "continue"
    _cli("lift", "--agent", "worker", "--server", replicas[2].url)
    _until(lambda: all(_kills(r) == [] for r in replicas), "the lift")
    assert _post(replicas[1], _read("w-new", 0, "worker"))["action"] == "continue"

    # 2. known loops: two sessions stop on one fingerprint, each across two replicas
    grep = {"agent": "searcher", "tool": "Grep", "args": {"pattern": "needle"}}
    grep |= {"output": "a.py:3", "tokens_in": 40, "tokens_out": 10}
    for k in range(2):
        _post(replicas[k], {**grep, "session": f"k{k}"})
        stopped = _post(replicas[k + 1], {**grep, "session": f"k{k}"})
        assert stopped["detector"] == "repeat", stopped
    fp = stopped["fingerprint"]
    nudged = _post(replicas[2], {**grep, "session": "k2", "agent": "helper"})
    assert (nudged["action"], nudged["detector"]) == ("continue", "known"), nudged
    assert fp in nudged["reason"]
    assert "stopped 2 sessions" in nudged["reason"]
    assert fp in nudged["hint"]
    _post(replicas[0], _read("k2", 1, "helper"))
    again = _post(replicas[1], {**grep, "session": "k2", "agent": "helper"})
    assert again["detector"] is None, again  # once per session, whatever the replica

    # 3. the kill switch from the command line, straight into Redis: the whole fleet
    def by_cli() -> float:
        done = _cli("kill", "--all", "--store", url, "--reason", "maintenance", "--json")
        return float(json.loads(done.stdout)["at"])

    cli = _time_to_stop(replicas, "anyone", by_cli)
    _cli("lift", "--all", "--store", url)
    _until(lambda: all(_kills(r) == [] for r in replicas), "the lift of all")

    # 4. the fleet view, the same through any replica and from the store
    view = json.loads(_cli("--json", "--server", replicas[1].url).stdout)
    assert view == json.loads(_cli("--json", "--store", url, "--config", config).stdout) | {
        "store": view["store"]
    }
    row = next(r for r in view["fingerprints"] if r["fingerprint"] == fp)
    assert (row["sessions"], row["steps_wasted"], row["tokens_wasted"], row["known"]) == (
        2,
        2,
        100,
        True,
    )
    assert view["stops_last_hour"] >= 6 + 3 + 2 + 3
    assert view["live_sessions"] >= 10
    assert view["shared"]
    text = _cli("--server", replicas[0].url).stdout
    assert fp in text
    assert "live sessions" in text
    print(
        "kill to first stopped step per replica: "
        f"HTTP kill {[round(s * 1000) for s in http]} ms, "
        f"CLI kill --all {[round(s * 1000) for s in cli]} ms"
    )
    assert max(http) < DEADLINE, http
    assert max(cli) < DEADLINE, cli
