"""The webhook round trip against a real service: signed out, signed back, refusals deny."""

from __future__ import annotations

import json
import queue
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from tests.server.conftest import SECRET, start_server, stop_server

from antiloop.approval import Verifier
from antiloop.approval.webhook import SIGNATURE_HEADER, TIMESTAMP_HEADER, answer_body, sign

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def receiver():
    """A webhook receiver on loopback that queues what it gets."""
    got: queue.Queue[tuple[dict, bytes]] = queue.Queue()

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            got.put((dict(self.headers), body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/hook", got
    httpd.shutdown()
    httpd.server_close()


def _answer(server, rid: str, body: bytes, ts: str, signature: str):
    headers = {TIMESTAMP_HEADER: ts, SIGNATURE_HEADER: signature}
    return server.call("POST", f"/v1/approvals/{rid}/answer", raw=body, token=None, headers=headers)


def _ask(server, got):
    s = "w-" + uuid.uuid4().hex[:8]
    _, gate = server.call(
        "POST", "/v1/check", {"tool": "Bash", "args": {"command": "rm -rf /data"}, "session": s}
    )
    assert gate["action"] == "ask"
    headers, body = got.get(timeout=30)
    return gate["approval"]["id"], headers, body


def test_refused_answers_change_nothing_and_a_deny_stands(tmp_path, receiver):
    """Bad signature, stale or replayed answers are refused; the request ends denied."""
    url, got = receiver
    server = start_server(tmp_path, "--webhook", url)
    try:
        rid, headers, body = _ask(server, got)
        # What went out is signed with the shared secret and carries the request.
        Verifier(SECRET).verify(headers[TIMESTAMP_HEADER], headers[SIGNATURE_HEADER], body)
        assert json.loads(body)["request"]["id"] == rid

        now = str(int(time.time()))
        approve = answer_body(rid, "approve", "mallory")
        status, _ = _answer(server, rid, approve, now, sign("guess", now, approve))
        assert status == 401
        old = str(int(time.time()) - 3600)
        status, refused = _answer(server, rid, approve, old, sign(SECRET, old, approve))
        assert (status, "stale" in refused["error"]) == (401, True)
        other = answer_body("someone-else", "approve", "mallory")
        assert _answer(server, rid, other, now, sign(SECRET, now, other))[0] == 400
        assert server.call("GET", f"/v1/approvals/{rid}")[1]["status"] == "pending"

        deny = answer_body(rid, "deny", "alice", "not on prod")
        signature = sign(SECRET, now, deny)
        status, decided = _answer(server, rid, deny, now, signature)
        assert (status, decided["status"], decided["decided_by"]) == (200, "denied", "alice")
        status, refused = _answer(server, rid, deny, now, signature)
        assert (status, "replayed" in refused["error"]) == (401, True)
        later = answer_body(rid, "approve", "alice")
        fresh = str(int(time.time()))
        _, after = _answer(server, rid, later, fresh, sign(SECRET, fresh, later))
        assert after["status"] == "denied"
    finally:
        stop_server(server)


def test_an_answer_after_expiry_is_refused_and_the_request_is_expired(tmp_path, receiver):
    """An approval that arrives after the request expired leaves it expired, which denies."""
    url, got = receiver
    config = tmp_path / "antiloop.toml"
    config.write_text("[approval]\ntimeout = 0.001\n")
    server = start_server(tmp_path, "--webhook", url, "--config", str(config))
    try:
        rid, _, _ = _ask(server, got)
        now = str(int(time.time()))
        approve = answer_body(rid, "approve", "alice")
        status, decided = _answer(server, rid, approve, now, sign(SECRET, now, approve))
        assert (status, decided["status"]) == (200, "expired")
        _, record = server.call("GET", f"/v1/approvals/{rid}")
        assert record["verdict"]["action"] == "stop"
        assert record["verdict"]["outcome"] == "expired"
    finally:
        stop_server(server)
