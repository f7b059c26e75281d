"""The webhook channel: POST the request as signed JSON; the answer comes back signed the same way.

Both directions carry two headers::

    X-Antiloop-Timestamp: 1718000000            (seconds since the epoch)
    X-Antiloop-Signature: sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>

A receiver refuses a message whose signature does not match, whose timestamp is outside the
replay window (default 300 s either way), or whose signature it has already seen. The answer
goes to the service's ``POST /v1/approvals/{id}/answer`` as
``{"id": ..., "decision": "approve"|"deny"|"edit", "by": ..., "comment": ..., "args": {...}}``
(``by`` is the user the relay authenticated; covered by the signature, it is the voter's
identity in k-of-n approvals);
a refused answer changes nothing, so the request ends expired (denied), never approved.

Templates shape the outgoing body: ``json`` (the request itself), ``slack`` (Block Kit text and
approve/deny buttons, for an incoming webhook or a relay) and ``telegram`` (``sendMessage`` with
an inline keyboard; set ``chat_id``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from antiloop.approval.channels import AnswerFn
from antiloop.approval.request import ApprovalRequest
from antiloop.core.errors import ChannelError
from antiloop.core.redact import redact_value

TIMESTAMP_HEADER = "X-Antiloop-Timestamp"
SIGNATURE_HEADER = "X-Antiloop-Signature"
TEMPLATES = ("json", "slack", "telegram")


def sign(secret: str | bytes, timestamp: str, body: bytes) -> str:
    """The signature header value for a body sent at ``timestamp``.

    Example:
        >>> sign("s3cret", "1700000000", b"{}")[:7]
        'sha256='
    """
    key = secret.encode() if isinstance(secret, str) else secret
    mac = hmac.new(key, timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def signed_headers(secret: str | bytes, body: bytes, now: float | None = None) -> dict[str, str]:
    """The headers of a signed message (timestamp, signature, JSON content type)."""
    timestamp = str(int(time.time() if now is None else now))
    return {
        "Content-Type": "application/json",
        TIMESTAMP_HEADER: timestamp,
        SIGNATURE_HEADER: sign(secret, timestamp, body),
    }


@dataclass
class Verifier:
    """Checks signed messages: signature, replay window and replays.

    Args:
        secret: the shared secret.
        window: seconds a timestamp may be off (either way).
        clock: seconds since the epoch.
    """

    secret: str | bytes
    window: float = 300.0
    clock: Callable[[], float] = time.time
    _seen: OrderedDict[str, float] = field(default_factory=OrderedDict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def verify(self, timestamp: str | None, signature: str | None, body: bytes) -> None:
        """Raise ``ChannelError`` saying why a message is refused; return when it is good."""
        if not timestamp or not signature:
            raise ChannelError("unsigned message: the timestamp or signature header is missing")
        try:
            sent = float(timestamp)
        except ValueError:
            raise ChannelError("bad timestamp") from None
        expected = sign(self.secret, timestamp, body)
        if not hmac.compare_digest(expected, signature):
            raise ChannelError("bad signature")
        now = self.clock()
        if abs(now - sent) > self.window:
            raise ChannelError(f"stale message: sent {now - sent:.0f} s from now")
        with self._lock:
            while self._seen and next(iter(self._seen.values())) < now - 2 * self.window:
                self._seen.popitem(last=False)
            if signature in self._seen:
                raise ChannelError("replayed message")
            self._seen[signature] = sent


def payload(
    request: ApprovalRequest,
    template: str = "json",
    *,
    answer_url: str | None = None,
    chat_id: str | int | None = None,
) -> dict[str, Any]:
    """The outgoing body of a request in a template: ``json``, ``slack`` or ``telegram``."""
    args = json.dumps(dict(request.args), ensure_ascii=False)
    if len(args) > 600:
        args = args[:600] + "..."
    text = (
        f"antiloop: approval needed [{request.risk}] session {request.session}, "
        f"agent {request.agent}\n{request.tool} {args}\nwhy: {request.reason}"
    )
    if request.fingerprint:
        text += f"\nloop: {request.fingerprint}"
    if template == "json":
        return {
            "type": "antiloop.approval",
            "request": request.to_dict(),
            "answer_url": answer_url,
            "text": text,
        }
    if template == "slack":
        return {
            "text": text,
            "blocks": [
                {"type": "section", "text": {"type": "mrkdwn", "text": f"```{text}```"}},
                {
                    "type": "actions",
                    "block_id": f"antiloop:{request.id}",
                    "elements": [
                        {
                            "type": "button",
                            "text": {"type": "plain_text", "text": "Approve"},
                            "style": "primary",
                            "action_id": "approve",
                            "value": request.id,
                        },
                        {
                            "type": "button",
                            "text": {"type": "plain_text", "text": "Deny"},
                            "style": "danger",
                            "action_id": "deny",
                            "value": request.id,
                        },
                    ],
                },
            ],
            "metadata": {"event_type": "antiloop_approval", "event_payload": {"id": request.id}},
        }
    if template == "telegram":
        return {
            "chat_id": chat_id,
            "text": text,
            "reply_markup": {
                "inline_keyboard": [
                    [
                        {"text": "Approve", "callback_data": f"approve:{request.id}"},
                        {"text": "Deny", "callback_data": f"deny:{request.id}"},
                    ]
                ]
            },
        }
    raise ChannelError(f"unknown webhook template {template!r} (known: {', '.join(TEMPLATES)})")


def answer_body(
    id: str,
    decision: str,
    by: str,
    comment: str | None = None,
    args: Mapping[str, Any] | None = None,
) -> bytes:
    """The JSON body of an answer, as a relay (or a test) sends it back to the service."""
    body: dict[str, Any] = {"id": id, "decision": decision, "by": by}
    if comment is not None:
        body["comment"] = comment
    if args is not None:
        body["args"] = dict(args)
    return json.dumps(body, ensure_ascii=False, sort_keys=True).encode()


@dataclass
class WebhookChannel:
    """POSTs each request, signed, to a URL (a relay, Slack, Telegram); answers come back signed.

    Args:
        url: where to POST.
        secret: the shared HMAC secret (the service verifies answers with the same one).
        template: ``json``, ``slack`` or ``telegram``.
        answer_url: the service's base URL, put in the ``json`` body so a relay knows where to
            answer (``{answer_url}/v1/approvals/{id}/answer``).
        chat_id: the Telegram chat, for the ``telegram`` template.
        timeout: seconds for the POST.
        clock: seconds since the epoch, for the timestamp.

    Example:
        >>> channel = WebhookChannel("https://relay.example/antiloop", secret="s3cret")
    """

    url: str
    secret: str | bytes
    template: str = "json"
    answer_url: str | None = None
    chat_id: str | int | None = None
    timeout: float = 10.0
    clock: Callable[[], float] = time.time
    name: str = "webhook"

    def __post_init__(self) -> None:
        if self.template not in TEMPLATES:
            raise ChannelError(f"unknown webhook template {self.template!r}")

    def message(self, request: ApprovalRequest) -> tuple[bytes, dict[str, str]]:
        """The signed body and headers for a request (redacted: it leaves for another host)."""
        body = json.dumps(
            redact_value(
                payload(request, self.template, answer_url=self.answer_url, chat_id=self.chat_id)
            ),
            ensure_ascii=False,
            sort_keys=True,
        ).encode()
        return body, signed_headers(self.secret, body, self.clock())

    def deliver(self, request: ApprovalRequest, answer: AnswerFn) -> None:
        body, headers = self.message(request)
        post = urllib.request.Request(self.url, data=body, headers=headers, method="POST")  # noqa: S310 - the URL is the user's
        try:
            with urllib.request.urlopen(post, timeout=self.timeout) as response:  # noqa: S310
                status = response.status
        except urllib.error.HTTPError as exc:
            raise ChannelError(f"webhook {self.url} answered {exc.code}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise ChannelError(f"webhook {self.url} unreachable: {exc}") from None
        if not 200 <= status < 300:
            raise ChannelError(f"webhook {self.url} answered {status}")
