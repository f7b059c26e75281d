"""Fleet controls in one process: kill switch, known loops, the view, the config and the API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from antiloop import Guard, GuardConfig
from antiloop.config import FleetConfig, read_settings
from antiloop.core.errors import ConfigError
from antiloop.core.step import Step
from antiloop.core.verdict import Action
from antiloop.fleet import Fleet, Kill, open_fleet
from antiloop.fleet.status import render


def _guard(**fleet: Any) -> Guard:
    return Guard(config=GuardConfig(embedder="ngram"), fleet=FleetConfig(**fleet))


def _grep(session: str, agent: str = "agent", **kw: Any) -> Step:
    return Step(
        tool="Grep", args={"pattern": "needle"}, output="a.py:3", session=session, agent=agent, **kw
    )


def _read(session: str, n: int, agent: str = "agent") -> Step:
    return Step(tool="Read", args={"path": f"f{n}"}, output=f"{n}", session=session, agent=agent)


def test_a_kill_of_an_agent_stops_its_sessions_and_ends_them() -> None:
    """Every step of the agent gets stop naming the kill and who set it; lifted, new ones go on."""
    guard = _guard()
    assert guard.fleet is not None
    assert guard.record(_read("s1", 0, "Explorer")).action is Action.CONTINUE
    guard.fleet.kill("agent", "EXPLORER", by="alice", reason="runaway spend")
    killed = guard.record(_read("s1", 1, "explorer"))
    assert (killed.action, killed.detector, killed.outcome) == (Action.STOP, "kill", "killed")
    assert "agent 'EXPLORER'" in killed.reason
    assert "by alice" in killed.reason
    assert "runaway spend" in killed.reason
    assert guard.record(_read("s2", 0, "writer")).action is Action.CONTINUE  # another agent
    refused = guard.check("Read", {"path": "x"}, session="s3", agent="explorer")
    assert refused.detector == "kill"
    lifted = guard.fleet.lift("agent", "explorer")
    assert lifted is not None
    assert lifted.by == "alice"
    assert guard.fleet.lift("agent", "explorer") is None
    assert guard.record(_read("s4", 0, "explorer")).action is Action.CONTINUE
    after = guard.record(_read("s1", 2, "explorer"))  # the killed session stays stopped
    assert (after.action, after.detector) == (Action.STOP, "terminated")


def test_a_kill_of_all_and_of_a_session() -> None:
    guard = _guard()
    assert guard.fleet is not None
    guard.fleet.kill("session", "s1", by="bob")
    assert guard.record(_read("s1", 0)).detector == "kill"
    assert guard.record(_read("s2", 0)).detector is None
    guard.fleet.kill("all", by="bob")
    assert guard.record(_read("s3", 0)).detector == "kill"
    assert [k.key for k in guard.fleet.kills()] == ["session:s1", "all"]


def test_a_kill_of_a_fingerprint_stops_its_procedure_only() -> None:
    """A fingerprint names an agent, an operation and a context: those steps stop."""
    guard = _guard()
    assert guard.fleet is not None
    guard.record(_grep("a"))
    fp = guard.record(_grep("a")).fingerprint
    assert fp is not None
    guard.fleet.kill("fingerprint", fp, by="carol")
    stopped = guard.record(_grep("b"))
    assert (stopped.detector, stopped.fingerprint) == ("kill", fp)
    assert guard.record(_grep("c", agent="other")).detector is None  # another agent's
    assert guard.record(_read("d", 0)).detector is None  # another procedure
    with pytest.raises(ValueError, match="not an antiloop fingerprint"):
        guard.fleet.kill("fingerprint", "grep x", by="carol")
    with pytest.raises(ValueError, match="needs a target"):
        Kill("agent", "")


def test_a_known_fingerprint_nudges_a_new_session_once_before_it_loops() -> None:
    """After K sessions stopped on it, a new session's first such step is nudged, once."""
    guard = _guard(known_after=2, nudge=True)
    for sid in ("a", "b"):
        guard.record(_grep(sid, tokens_in=50))
        assert guard.record(_grep(sid, tokens_in=50)).action is Action.STOP
    fp = guard.record(_grep("a")).fingerprint  # terminated: names the same fingerprint
    nudged = guard.record(_grep("c"))
    assert (nudged.action, nudged.detector) == (Action.NUDGE, "known")
    assert nudged.action.wire == "continue"
    assert fp is not None
    assert fp in nudged.reason
    assert "stopped 2 sessions" in nudged.reason
    assert guard.record(_read("c", 1)).detector is None
    assert guard.record(_grep("c")).detector is None  # once per session
    view = guard.fleet.status() if guard.fleet else {}
    row = view["fingerprints"][0]
    assert (row["fingerprint"], row["sessions"], row["known"]) == (fp, 2, True)
    assert row["steps_wasted"] == 3  # one per stop, and the step after a's stop
    assert row["tokens_wasted"] == 100
    assert view["stops_last_hour"] == 2
    assert fp in render(view)


def test_no_nudge_unless_asked_and_below_the_count() -> None:
    quiet = _guard(known_after=1)
    quiet.record(_grep("a"))
    quiet.record(_grep("a"))
    assert quiet.record(_grep("b")).detector is None
    few = _guard(known_after=3, nudge=True)
    for sid in ("a", "b"):
        few.record(_grep(sid))
        few.record(_grep(sid))
    assert few.record(_grep("c")).detector is None


def test_a_guard_without_fleet_has_none_and_open_fleet_is_local_off_redis(tmp_path: Path) -> None:
    assert Guard().fleet is None
    assert type(open_fleet("memory://")) is Fleet
    assert type(open_fleet(f"sqlite:///{tmp_path}/a.db")) is Fleet


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"known_after": 0}, "'known_after' must be an integer >= 1, not 0"),
        ({"nudge": "yes"}, "'nudge' must be true or false"),
        ({"live_window": -1}, "'live_window' must be a number of seconds > 0"),
        ({"knwon_after": 3}, "unknown key 'knwon_after'"),
    ],
)
def test_bad_fleet_settings_are_one_line_errors(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        FleetConfig.from_mapping(table, "antiloop.toml")
    assert "\n" not in str(caught.value)
    assert "[fleet]" in str(caught.value)


def test_the_fleet_table_is_read_from_the_config_file(tmp_path: Path) -> None:
    file = tmp_path / "antiloop.toml"
    file.write_text("max_steps = 40\n[fleet]\nknown_after = 5\nnudge = true\n")
    settings = read_settings(file)
    assert FleetConfig.from_mapping(settings.tables["fleet"]) == FleetConfig(5, True)
    from antiloop.commands.config import describe
    from antiloop.commands.serve import fleet_config, load

    assert "[fleet] 2 keys" in describe(file)
    assert fleet_config(str(file)).known_after == 5
    assert load(str(file))[0].max_steps == 40  # type: ignore[union-attr]


def test_the_fleet_routes() -> None:
    """Kill, list, lift and view over HTTP, in one process (a memory store)."""
    from starlette.testclient import TestClient

    from antiloop.server import Service, create_app
    from antiloop.stores.memory import MemoryStore

    service = Service(MemoryStore(), "fleet-token", config=GuardConfig(embedder="ngram"))
    headers = {"Authorization": "Bearer fleet-token"}
    with TestClient(create_app(service), headers=headers) as client:
        made = client.post("/v1/fleet/kill", json={"agent": "w", "reason": "why"})
        assert made.status_code == 200, made.text
        assert made.json()["key"] == "agent:w"
        assert made.json()["by"] == "dashboard"
        step = {"session": "s", "agent": "W", "tool": "Read", "args": {"path": "a"}}
        verdict = client.post("/v1/steps", json=step).json()
        assert (verdict["action"], verdict["detector"]) == ("stop", "kill")
        assert client.get("/v1/fleet/kills").json()["kills"][0]["target"] == "w"
        view = client.get("/v1/fleet").json()
        assert view["stops_last_hour"] == 1
        assert view["kills"][0]["reason"] == "why"
        both = client.post("/v1/fleet/kill", json={"agent": "w", "all": True})
        assert both.status_code == 400
        assert "exactly one" in both.json()["error"]
        bad = client.post("/v1/fleet/kill", json={"fingerprint": "nope"})
        assert bad.status_code == 400
        lifted = client.post("/v1/fleet/lift", json={"agent": "w"}).json()
        assert lifted["lifted"]["key"] == "agent:w"
        assert client.post("/v1/fleet/lift", json={"agent": "w"}).json()["lifted"] is None
        step["session"] = "s2"
        assert client.post("/v1/steps", json=step).json()["detector"] is None


def test_a_kill_stops_the_hooks_delivered_over_http() -> None:
    """Claude Code's hooks through /v1/hooks share the service's kills."""
    from starlette.testclient import TestClient

    from antiloop.server import Service, create_app
    from antiloop.stores.memory import MemoryStore

    service = Service(MemoryStore(), "fleet-token", config=GuardConfig(embedder="ngram"))
    headers = {"Authorization": "Bearer fleet-token"}
    pre = {
        "session_id": "cc-1",
        "hook_event_name": "PreToolUse",
        "cwd": "/work",
        "transcript_path": "/tmp/none.jsonl",
        "tool_name": "Grep",
        "tool_input": {"pattern": "x"},
    }
    with TestClient(create_app(service), headers=headers) as client:
        first = client.post("/v1/hooks/claude-code", json=pre).json()
        assert first.get("hookSpecificOutput", {}).get("permissionDecision") != "deny"
        assert client.post("/v1/fleet/kill", json={"all": True}).status_code == 200
        denied = client.post("/v1/hooks/claude-code", json=pre).json()
        assert denied["hookSpecificOutput"]["permissionDecision"] == "deny", denied
        assert "kill switch" in json.dumps(denied)
