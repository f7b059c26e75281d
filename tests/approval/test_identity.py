"""k-of-n voters are identities, counted once; requests leave redacted, on memory and SQLite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from antiloop import Guard, GuardConfig
from antiloop.approval import Answer, ApprovalPolicy, Approvals, ApprovalStatus, CallbackChannel
from antiloop.approval.approvals import identity
from antiloop.approval.terminal import TerminalChannel, describe

RM = {"command": "rm -rf build"}
SECRET_CALL = {
    "command": "curl -H 'Authorization: Bearer abcdef0123456789' https://x",
    "api_token": "t0k3n-value",
    "note": "key AKIAIOSFODNN7EXAMPLE",
}


@pytest.fixture(params=["memory", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a store that keeps approvals: memory, or an SQLite file."""
    if request.param == "memory":
        return "memory://"
    return f"sqlite:///{tmp_path}/approvals.db"


@pytest.fixture
def two_approvals(store_url: str) -> Iterator[tuple[Approvals, Approvals]]:
    """Two coordinators with required=2; on SQLite each has its own store object (process)."""
    from antiloop.stores import open_store

    first = open_store(store_url)
    second = first if store_url == "memory://" else open_store(store_url)
    policy = ApprovalPolicy(required=2)
    yield Approvals(first, policy), Approvals(second, policy)
    first.close()
    if second is not first:
        second.close()


def _request(approvals: Approvals, args: dict[str, str] = RM):  # type: ignore[no-untyped-def]
    return approvals.create(
        session="s", agent="a", tool="Bash", args=args, risk="exec", reason="r", fingerprint=None
    )


def test_one_identity_in_any_spelling_counts_once(two_approvals):
    """alice, Alice and ' alice ' are one voter: the request stays pending until bob."""
    one, other = two_approvals
    request = _request(one)
    for by, approvals in (("alice", one), ("Alice", other), (" alice  ", one), ("ALICE", other)):
        assert approvals.answer(request.id, Answer.approve(by)).status is ApprovalStatus.PENDING
    assert one.votes(request.id) == {"alice"}
    done = other.answer(request.id, Answer.approve("bob"))
    assert done.status is ApprovalStatus.APPROVED
    assert done.decided_by == "alice, bob"
    stored = one.ledger.get_approval(request.id)
    assert stored is not None
    assert (stored.status, stored.decided_by) == (ApprovalStatus.APPROVED, "alice, bob")


def test_an_empty_identity_is_no_vote(two_approvals):
    """A blank voter counts for nothing; two real ones are still needed."""
    one, _ = two_approvals
    request = _request(one)
    assert one.answer(request.id, Answer.approve("  ")).status is ApprovalStatus.PENDING
    assert one.votes(request.id) == set()
    assert one.answer(request.id, Answer.approve("carol")).status is ApprovalStatus.PENDING
    assert one.answer(request.id, Answer.approve("dave")).status is ApprovalStatus.APPROVED


def test_identity_folds_case_and_space():
    """The identity of a name: case folded, white space collapsed."""
    assert identity("  Alice \t Smith ") == "alice smith"
    assert identity("STRASSE") == identity("straße")


def test_the_request_is_redacted_for_store_channels_and_listeners(store_url: str):
    """Store, channel and listener see the redacted call; the gate runs the raw one."""
    from antiloop.stores import open_store

    store = open_store(store_url)
    seen: list[dict[str, object]] = []
    heard: list[dict[str, object]] = []

    def look(request):  # type: ignore[no-untyped-def]
        seen.append(dict(request.args))
        return True

    approvals = Approvals(store, channels=[CallbackChannel(look)])
    approvals.listeners.append(lambda event, request: heard.append(dict(request.args)))
    guard = Guard(config=GuardConfig(embedder="ngram"), store=store, approvals=approvals)
    gate = guard.gate("Bash", SECRET_CALL, session="s")
    assert gate.allowed
    assert dict(gate.args) == SECRET_CALL
    expected = {
        "command": "curl -H 'Authorization: Bearer [REDACTED]' https://x",
        "api_token": "[REDACTED]",
        "note": "key [REDACTED]",
    }
    assert gate.request is not None
    stored = approvals.ledger.get_approval(gate.request.id)
    assert stored is not None
    assert dict(stored.args) == expected
    assert seen == [expected]
    assert heard == [expected, expected]  # created, decided
    store.close()


def test_terminal_describe_redacts_and_shows_control_characters():
    """The prompt's lines cannot be rewritten by the call, and hold no secret."""
    from antiloop.stores.memory import MemoryStore

    approvals = Approvals(MemoryStore())
    request = _request(
        approvals,
        {"command": "rm -rf ~/important \r\x1b[2K  command: ls -la\x07 sk_live_4eC39Hq1234567"},
    )
    text = describe(request)
    assert "\x1b" not in text
    assert "\r" not in text
    assert "\x07" not in text
    assert "  command: rm -rf ~/important \\r\\x1b[2K  command: ls -la\\x07 [REDACTED]\n" in text


def test_the_terminal_user_defaults_to_the_login_name():
    """The terminal's voter is who runs antiloop, not a fixed word."""
    import getpass

    assert TerminalChannel().user == getpass.getuser()
