"""The service when its store fails: answers by ``on_store_error``, journaled, never a 503."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from antiloop.config import GuardConfig
from antiloop.core.errors import StoreError
from antiloop.core.history import SessionState
from antiloop.outage import OutageConfig
from antiloop.server import Service, create_app
from antiloop.stores.sqlite import SQLiteStore

TOKEN = "t0ken-for-outage"  # noqa: S105 - the test service's token
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


class DownStore(SQLiteStore):
    """A SQLite store whose session reads and writes fail while ``down`` (a server gone)."""

    down = False

    def peek(self, session: str) -> SessionState | None:
        if self.down:
            raise StoreError("could not read a session: Connection refused")
        return super().peek(session)

    def transaction(self, session: str) -> AbstractContextManager[SessionState]:
        if self.down:
            raise StoreError("could not judge a step: Connection refused")
        return super().transaction(session)


@pytest.mark.parametrize("policy", ["allow", "block"])
def test_check_and_steps_answer_by_the_policy_and_the_steps_are_journaled(
    tmp_path: Path, policy: str
) -> None:
    store = DownStore(tmp_path / "a.db")
    outage = OutageConfig(retry_window=0.2, backoff=0.01, journal=str(tmp_path / "journal"))
    config = GuardConfig(embedder="ngram", on_store_error=policy)
    service = Service(store, TOKEN, config=config, outage=outage)
    step: dict[str, Any] = {"session": "s", "tool": "Read", "args": {"path": "a"}, "output": "x"}
    with TestClient(create_app(service)) as client:
        store.down = True
        checked = client.post("/v1/check", json={"tool": "Read", "session": "s"}, headers=HEADERS)
        assert checked.status_code == 200
        answers = [client.post("/v1/steps", json=step, headers=HEADERS) for _ in range(2)]
        assert [a.status_code for a in answers] == [200, 200]
        for answer in (checked.json(), *(a.json() for a in answers)):
            if policy == "allow":
                assert (answer["action"], answer["reason"][:10]) == ("continue", "unguarded:")
            else:
                assert (answer["action"], answer["detector"]) == ("stop", "store")
                assert "the session is not ended" in answer["reason"]
        store.down = False
        later = {**step, "args": {"path": "b"}}
        after = client.post("/v1/steps", json=later, headers=HEADERS).json()
    # the two journaled steps went in first, the second a repeat of the first: the loop is
    # caught on replay, and the session's next step is stopped
    assert (after["action"], after["detector"]) == ("stop", "terminated")
    records = [r for r in store.audit_records("s") if r.kind == "step"]
    assert [bool(r.detail.get("unguarded")) for r in records[:2]] == [True, True]
    assert records[1].detail["judged"] == "stop"
    store.close()
