"""One probe of every secret kind through every sink; no sink may hold any of them.

A real ``antiloop serve`` on an SQLite file, with a webhook channel to a real local HTTP server
and a live-events (SSE) subscriber, judges steps whose arguments, outputs, errors, messages and
goals carry the probes, asks for an approval with them, and takes a decision and feedback with
them. Then every sink is read and searched for the probes: the verdicts (fingerprints, reasons,
hints), the approval requests, the webhook bodies, the SSE stream, the dashboard page and the
API bodies it renders, the raw bytes of the database files (audit log and session state), and
``antiloop log`` (table, timeline and ``--jsonl`` export).

Every probe's secret part holds ``Pr0be`` (any case), and nothing else does, so one search
finds any secret, whole or cut.
"""

# ruff: noqa: S105, S310  (fake secrets; plain HTTP to the loopback service)

from __future__ import annotations

import http.client
import json
import queue
import socket
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from tests.server.conftest import TOKEN, Server, start_server, stop_server

pytestmark = pytest.mark.slow

AWS_SECRET = "Pr0beSecretKey/AbCdEfGh1234567890+ZyXwVu"
PROBES = {
    "aws access key id": "AKIAPR0BE7Q3KEY12345",
    "aws secret access key": AWS_SECRET,
    "openai": "sk-proj-Pr0beOpenAi" + "x1Y2" * 6,
    "anthropic": "sk-ant-api03-Pr0beAnthropic" + "_aB3" * 5,
    "github": "ghp_Pr0beGithub" + "a1B2" * 6,
    "github fine-grained": "github_pat_Pr0beGhPat_" + "c3D4" * 8,
    "gitlab": "glpat-Pr0beGitlab" + "e5F6" * 4,
    "slack bot": "xoxb-Pr0beSlackB-1234567890",
    "slack user": "xoxp-Pr0beSlackP-1234567890",
    "slack app-level": "xoxa-Pr0beSlackA-1234567890",
    "slack refresh": "xoxr-Pr0beSlackR-1234567890",
    "slack session": "xoxs-Pr0beSlackS-1234567890",
    "slack app": "xapp-1-Pr0beSlackApp-123456",
    "slack webhook": "https://hooks.slack.com/services/T00000001/B00000002/Pr0beSlackHook123456",
    "stripe secret": "sk_live_Pr0beStripe1234",
    "stripe restricted": "rk_live_Pr0beStripeR1234",
    "stripe publishable": "pk_live_Pr0beStripeP1234",
    "stripe webhook": "whsec_Pr0beStripeWebhook12345",
    "google": "AIzaPr0beGoogle" + "g7H8" * 6,
    "npm": "npm_Pr0beNpm" + "1a2b" * 7,
    "hugging face": "hf_Pr0beHuggingFace" + "Zz9" * 5,
    "pypi": "pypi-AgEPr0bePypi" + "Ab1-" * 10,
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJQcjBiZUp3dCI6MX0.Pr0beJwtSignature_abc123",
    "url password": "https://probeuser:Pr0beUrlPass@db.example/x",
    "bearer": "Authorization: Bearer Pr0beBearerToken123",
    "pem": "-----BEGIN PRIVATE KEY-----\nPr0bePemBody0123456789\n-----END PRIVATE KEY-----",
    "mysql": "mysql -uroot -pPr0beMysqlPw",
    "password=": "DB_PASSWORD=Pr0beKvPass",
    "flag": "--api-key Pr0beFlagKey1",
    "high entropy under a key": "session_key = Pr0beH1ghEntr0pyV4lue9",
}
NEEDLE = b"pr0be"


def _leaks(data: bytes | str) -> list[str]:
    """The probe kinds whose secret shows in ``data`` (any case); [] when none does."""
    raw = data.encode() if isinstance(data, str) else data
    low = raw.lower()
    if NEEDLE not in low:
        return []
    found = []
    for kind, probe in PROBES.items():
        secret = probe.lower().encode()
        part = secret[secret.index(NEEDLE) :][:12]
        if part in low:
            found.append(kind)
    return found or [f"a cut probe near {low[low.index(NEEDLE) - 40 : low.index(NEEDLE) + 20]!r}"]


def test_the_probes_are_what_they_claim():
    """Each probe holds the needle once, in its secret part; the AWS secret is 40 characters."""
    assert len(AWS_SECRET) == 40
    for probe in PROBES.values():
        assert probe.lower().count("pr0be") == 1


@pytest.fixture(scope="module")
def receiver() -> Iterator[tuple[str, queue.Queue[bytes]]]:
    """A real HTTP server on loopback that keeps every webhook body it gets."""
    got: queue.Queue[bytes] = queue.Queue()

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            got.put(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/hook", got
    httpd.shutdown()
    httpd.server_close()


class Events:
    """A live-events (SSE) subscriber reading ``/v1/events`` in a thread."""

    def __init__(self, server: Server) -> None:
        url = urllib.parse.urlsplit(server.url)
        self.conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=60)
        self.conn.request("GET", "/v1/events", headers={"Authorization": f"Bearer {TOKEN}"})
        self.response = self.conn.getresponse()
        assert self.response.status == 200
        self.text = b""
        self.changed = threading.Condition()
        first = self.response.read1(65536)
        assert b"antiloop live events" in first
        self.text = first
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while chunk := self.response.read1(65536):
                with self.changed:
                    self.text += chunk
                    self.changed.notify_all()
        except (OSError, ValueError, AttributeError, http.client.HTTPException):  # hung up
            pass

    def wait_for(self, marker: bytes, limit: float = 30.0) -> bytes:
        """The stream so far, once it holds ``marker`` (a safety limit, not a timing test)."""
        with self.changed:
            if not self.changed.wait_for(lambda: marker in self.text, timeout=limit):
                raise AssertionError(f"no {marker!r} in the live events: {self.text[-400:]!r}")
            return self.text

    def close(self) -> None:
        """Stop reading, and hang up (so the service need not wait for this stream to end)."""
        sock = self.conn.sock
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
        self.conn.close()
        self.thread.join(timeout=30)


def _steps(kind: str, probe: str) -> list[dict[str, object]]:
    session = "probe-" + kind.replace(" ", "-")
    step = {
        "session": session,
        "tool": "Bash",
        "args": {"command": f"echo {probe}", "extra": probe},
        "output": f"out {probe}",
        "error": f"err {probe}",
        "message": f"I try again with {probe}",
        "goal": f"ship it using {probe}",
    }
    return [step, step, step]


def test_no_sink_holds_a_probe(tmp_path: Path, receiver: tuple[str, queue.Queue[bytes]]):
    """Every probe goes through every sink; every sink is read and holds none of them."""
    url, got = receiver
    server = start_server(tmp_path, "--webhook", url)
    sinks: dict[str, bytes | str] = {}
    try:
        events = Events(server)
        verdicts = []
        for kind, probe in PROBES.items():
            status, body = server.call("POST", "/v1/steps", {"steps": _steps(kind, probe)})
            assert status == 200
            verdicts.extend(body["verdicts"])
        assert {v["detector"] for v in verdicts} >= {"repeat"}
        stops = [v for v in verdicts if v["detector"] == "repeat"]
        assert len(stops) == len(PROBES)
        assert all("[REDACTED]" in v["fingerprint"] for v in stops), stops
        sinks["verdicts (fingerprints, reasons, hints)"] = json.dumps(verdicts)

        call = {"command": "rm -rf /data", **{f"p{i}": p for i, p in enumerate(PROBES.values())}}
        status, gate = server.call(
            "POST", "/v1/check", {"tool": "Bash", "args": call, "session": "probe-approval"}
        )
        assert (status, gate["action"]) == (200, "ask")
        assert gate["args"] == call  # the caller gets its own call back, to run it
        sinks["/v1/check approval"] = json.dumps(gate["approval"])
        webhook = got.get(timeout=30)
        assert b"rm -rf /data" in webhook
        sinks["webhook body"] = webhook
        rid = gate["approval"]["id"]
        comment = "denied: " + PROBES["github"]
        status, decided = server.call(
            "POST", f"/v1/approvals/{rid}", {"decision": "deny", "comment": comment}
        )
        assert (status, decided["status"]) == (200, "denied")
        sinks["decision"] = json.dumps(decided)
        for probe in (PROBES["slack bot"], "probe-done"):
            status, _ = server.call("POST", "/v1/sessions/probe-jwt/feedback", {"text": probe})
            assert status == 200
        sinks["live events (SSE)"] = events.wait_for(b"probe-done")
        assert b"event: approval" in sinks["live events (SSE)"]
        assert b"event: verdict" in sinks["live events (SSE)"]
        events.close()

        _, step = server.call("POST", "/v1/steps", _steps("jwt", PROBES["jwt"])[0])
        assert step["hint"].startswith("A person says: [REDACTED]")
        sinks["feedback hint"] = json.dumps(step)
        with urllib.request.urlopen(server.url + "/", timeout=30) as page:
            sinks["dashboard page"] = page.read()
        assert b"antiloop" in sinks["dashboard page"]
        sinks["/v1/sessions"] = json.dumps(server.call("GET", "/v1/sessions")[1])
        for kind in PROBES:
            sid = "probe-" + kind.replace(" ", "-")
            status, body = server.call("GET", f"/v1/sessions/{urllib.parse.quote(sid)}")
            assert status == 200, (sid, body)
            sinks[f"/v1/sessions/{sid}"] = json.dumps(body)
        sinks["/v1/approvals"] = json.dumps(server.call("GET", "/v1/approvals")[1])
        sinks[f"/v1/approvals/{rid}"] = json.dumps(server.call("GET", f"/v1/approvals/{rid}")[1])
    finally:
        stop_server(server)

    (store,) = tmp_path.glob("antiloop-*.db")  # start_server's store
    files = sorted(tmp_path.glob(f"{store.name}*"))
    assert store in files
    for file in files:
        sinks[f"database file {file.name}"] = file.read_bytes()
    assert b"rm -rf /data" in b"".join(file.read_bytes() for file in files)

    url = f"sqlite:///{store}"
    for argv in (["log"], ["log", "probe-github"], ["log", "--jsonl"]):
        run = subprocess.run(
            [sys.executable, "-m", "antiloop", *argv, "--store", url],
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert run.returncode == 0, run.stderr
        assert run.stdout
        sinks["antiloop " + " ".join(argv)] = run.stdout + run.stderr
    assert b"echo [REDACTED]" in sinks["antiloop log --jsonl"]  # type: ignore[operator]

    leaks = {name: found for name, data in sinks.items() if (found := _leaks(data))}
    assert leaks == {}
