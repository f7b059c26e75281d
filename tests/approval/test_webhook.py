"""Webhook signing, verification and payload templates."""

from __future__ import annotations

import json

import pytest

from antiloop.approval import ApprovalRequest, Verifier, WebhookChannel, payload, sign
from antiloop.approval.webhook import SIGNATURE_HEADER, TIMESTAMP_HEADER, answer_body
from antiloop.core.errors import ChannelError

SECRET = "s3cret"  # noqa: S105 - a test secret

REQUEST = ApprovalRequest(
    id="r1",
    session="s",
    agent="a",
    tool="Bash",
    args={"command": "rm -rf build"},
    risk="delete",
    reason="Bash is a delete call: ask",
    created_at=1_700_000_000.0,
)


def test_good_message_passes_once(clock):
    """A correctly signed, fresh message passes; the same message again is a replay."""
    body = answer_body("r1", "approve", "alice")
    ts = str(int(clock.now))
    verifier = Verifier(SECRET, clock=clock)
    verifier.verify(ts, sign(SECRET, ts, body), body)
    with pytest.raises(ChannelError, match="replayed"):
        verifier.verify(ts, sign(SECRET, ts, body), body)


@pytest.mark.parametrize(
    ("ts_offset", "secret", "tamper", "why"),
    [
        (0, "wrong", False, "bad signature"),
        (0, SECRET, True, "bad signature"),
        (-301, SECRET, False, "stale"),
        (301, SECRET, False, "stale"),
    ],
)
def test_bad_messages_are_refused(clock, ts_offset, secret, tamper, why):
    """A wrong key, a changed body or a timestamp outside the window is refused."""
    body = answer_body("r1", "approve", "alice")
    ts = str(int(clock.now) + ts_offset)
    signature = sign(secret, ts, body)
    if tamper:
        body = answer_body("r2", "approve", "alice")
    with pytest.raises(ChannelError, match=why):
        Verifier(SECRET, clock=clock).verify(ts, signature, body)


def test_unsigned_message_is_refused(clock):
    """A message without the headers is refused."""
    with pytest.raises(ChannelError, match="unsigned"):
        Verifier(SECRET, clock=clock).verify(None, None, b"{}")


def test_channel_signs_what_it_sends(clock):
    """The channel's body verifies with the shared secret."""
    channel = WebhookChannel(
        "http://127.0.0.1:9/hook", SECRET, clock=clock, answer_url="http://svc"
    )
    body, headers = channel.message(REQUEST)
    Verifier(SECRET, clock=clock).verify(headers[TIMESTAMP_HEADER], headers[SIGNATURE_HEADER], body)
    data = json.loads(body)
    assert data["request"]["id"] == "r1"
    assert data["answer_url"] == "http://svc"


def test_unreachable_webhook_is_a_channel_error(clock):
    """A webhook nobody listens on fails delivery with a ChannelError."""
    channel = WebhookChannel("http://127.0.0.1:9/hook", SECRET, clock=clock, timeout=5)
    with pytest.raises(ChannelError, match="unreachable"):
        channel.deliver(REQUEST, lambda answer: REQUEST)


def test_slack_and_telegram_templates():
    """Slack gets blocks with approve/deny buttons; Telegram an inline keyboard for the chat."""
    slack = payload(REQUEST, "slack")
    actions = slack["blocks"][1]["elements"]
    assert [a["action_id"] for a in actions] == ["approve", "deny"]
    assert all(a["value"] == "r1" for a in actions)
    telegram = payload(REQUEST, "telegram", chat_id=42)
    assert telegram["chat_id"] == 42
    keys = telegram["reply_markup"]["inline_keyboard"][0]
    assert [k["callback_data"] for k in keys] == ["approve:r1", "deny:r1"]
    assert "rm -rf build" in telegram["text"]
    with pytest.raises(ChannelError):
        payload(REQUEST, "fax")
