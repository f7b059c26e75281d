"""k-of-n through a real service: the voter is the authenticated identity, not the body's name."""

# ruff: noqa: S106  (fixed test tokens)

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.server.conftest import SECRET, Server, start_server, stop_server

from antiloop.approval.webhook import SIGNATURE_HEADER, TIMESTAMP_HEADER, answer_body, sign

pytestmark = pytest.mark.slow

ALICE = "alice-token-0123"
BOB = "bob-token-4567"


@pytest.fixture(scope="module")
def quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A service that needs two approvals, with named tokens for alice and bob."""
    tmp = tmp_path_factory.mktemp("quorum")
    config = tmp / "antiloop.toml"
    config.write_text("[approval]\nrequired = 2\n")
    running = start_server(
        tmp,
        "--config",
        str(config),
        env={"ANTILOOP_TOKENS": f"alice={ALICE}, bob={BOB}"},
    )
    yield running
    stop_server(running)


def _ask(server: Server) -> str:
    session = "q-" + uuid.uuid4().hex[:8]
    status, gate = server.call(
        "POST", "/v1/check", {"tool": "Bash", "args": {"command": "rm -rf /x"}, "session": session}
    )
    assert (status, gate["action"]) == (200, "ask")
    return str(gate["approval"]["id"])


def _approve(server: Server, rid: str, by: str, token: str | None = None) -> dict[str, object]:
    body = {"decision": "approve", "by": by}
    if token is None:
        status, decided = server.call("POST", f"/v1/approvals/{rid}", body)
    else:
        status, decided = server.call("POST", f"/v1/approvals/{rid}", body, token=token)
    assert status == 200, decided
    return decided  # type: ignore[no-any-return]


def test_one_token_is_one_voter_whatever_the_body_says(quorum: Server):
    """Approving twice with the service token as "alice" and as "bob" is one vote."""
    rid = _ask(quorum)
    assert _approve(quorum, rid, "alice")["status"] == "pending"
    again = _approve(quorum, rid, "bob")
    assert (again["status"], again["votes"]) == ("pending", ["dashboard"])
    _, listed = quorum.call("GET", f"/v1/approvals/{rid}")
    assert listed["status"] == "pending"


def test_two_named_tokens_are_two_voters(quorum: Server):
    """alice's token and bob's token meet 2-of-n; alice twice does not."""
    rid = _ask(quorum)
    assert _approve(quorum, rid, "bob", token=ALICE)["status"] == "pending"
    assert _approve(quorum, rid, "mallory", token=ALICE)["status"] == "pending"
    done = _approve(quorum, rid, "alice", token=BOB)
    assert (done["status"], done["decided_by"]) == ("approved", "alice, bob")


def test_signed_webhook_users_are_voters_counted_once(quorum: Server):
    """Signed answers vote as the user the relay signed for; the same user twice counts once."""
    rid = _ask(quorum)

    def answer(by: str) -> dict[str, object]:
        body = answer_body(rid, "approve", by)
        ts = str(int(time.time()))
        status, decided = quorum.call(
            "POST",
            f"/v1/approvals/{rid}/answer",
            raw=body,
            token=None,
            headers={TIMESTAMP_HEADER: ts, SIGNATURE_HEADER: sign(SECRET, ts, body)},
        )
        assert status == 200, decided
        return decided  # type: ignore[no-any-return]

    assert answer("carol")["status"] == "pending"
    assert answer("Carol")["status"] == "pending"
    done = answer("dave")
    assert (done["status"], done["decided_by"]) == ("approved", "carol, dave")


def test_a_wrong_token_is_refused(quorum: Server):
    """A token that is none of the service's is refused before anything is read."""
    status, _ = quorum.call("GET", "/v1/approvals", token="not-a-token-at-all")
    assert status == 401


def test_named_tokens_parse_and_refuse_bad_items():
    """ANTILOOP_TOKENS is name=token,...; a bad item names its place, not the token."""
    from antiloop.server.app import parse_tokens

    assert parse_tokens(" alice=a-1234567 ,bob=b-1234567,") == {
        "alice": "a-1234567",
        "bob": "b-1234567",
    }
    with pytest.raises(ValueError, match="item 2 is not name=token") as caught:
        parse_tokens("alice=a-1234567,s3cr3t-t0ken")
    assert "s3cr3t" not in str(caught.value)


def test_the_service_refuses_a_short_named_token(tmp_path: Path):
    """A named token under 8 characters is refused when the service is made."""
    from antiloop.server import Service
    from antiloop.server.app import parse_tokens

    with pytest.raises(ValueError, match="at least 8"):
        Service(f"sqlite:///{tmp_path}/x.db", "main-token-123", tokens={"eve": "short"})
    assert json.dumps(parse_tokens("")) == "{}"


def test_a_check_of_a_stopped_call_answers_redacted(tmp_path: Path):
    """/v1/check of a call already stopped as a loop: the reason holds no secret of the call."""
    from starlette.testclient import TestClient

    from antiloop import GuardConfig
    from antiloop.server import Service, create_app

    service = Service(
        f"sqlite:///{tmp_path}/c.db",
        "main-token-123",
        config=GuardConfig(embedder="ngram", repeat_action="block"),
    )
    call = {"command": "mysql -pHunter2x -e 'select 1'"}
    headers = {"Authorization": "Bearer main-token-123"}
    with TestClient(create_app(service)) as client:
        step = {"tool": "Bash", "args": call, "output": "same", "session": "c"}
        for action in ("continue", "stop"):  # block is "stop" on the wire
            judged = client.post("/v1/steps", json=step, headers=headers).json()
            assert judged["action"] == action
        body = {"tool": "Bash", "args": call, "session": "c"}
        answer = client.post("/v1/check", json=body, headers=headers).json()
    assert answer["action"] == "stop"
    assert (
        answer["reason"]
        == "bash \"mysql -p[REDACTED] -e 'select 1'\" was stopped as a loop; it is not run again."
    )
    assert answer["args"] == call
