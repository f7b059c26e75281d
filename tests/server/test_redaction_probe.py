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

# ruff: noqa: S310  (fake secrets; plain HTTP to the loopback service)

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
from tests.secrets_corpus import BROKEN_BYTES, BROKEN_TEXT, SECRETS
from tests.server.conftest import TOKEN, Server, start_server, stop_server

pytestmark = pytest.mark.slow

# Every fake secret of the corpus, and names that hold one (a session, an agent, a tool).
NAME_SECRETS = {
    "session name": "ghp_" + "Nm3s" * 9,
    "agent name": "sk_live_" + "Ag3nt7" * 4,
    "tool name": "xoxb-" + "7" * 12 + "-" + "T00lN4me" * 3,
}
PROBES = {case.kind: case.text for case in SECRETS}
PIECES = [
    (kind, secret[i : i + 12])
    for kind, secret in [(c.kind, c.secret) for c in SECRETS] + list(NAME_SECRETS.items())
    for i in range(0, max(len(secret) - 11, 1), 4)
]


def _leaks(data: bytes | str) -> list[str]:
    """The kinds of which ``data`` holds a piece of the secret (15 characters or more, any
    case: fingerprints lower-case the tool)."""
    raw = (data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")).lower()
    return sorted({kind for kind, piece in PIECES if piece.lower().encode() in raw})


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


def _session(kind: str) -> str:
    return "probe-" + "".join(c if c.isalnum() else "-" for c in kind)


def _steps(kind: str, probe: str) -> list[dict[str, object]]:
    session = _session(kind)
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
        named = {
            "session": "deploy-" + NAME_SECRETS["session name"],
            "agent": "bot-" + NAME_SECRETS["agent name"],
            "tool": "run-" + NAME_SECRETS["tool name"],
            "args": {"x": 1},
            "output": "same",
        }
        status, body = server.call("POST", "/v1/steps", {"steps": [named] * 3})
        assert status == 200
        verdicts.extend(body["verdicts"])
        named_sid = body["verdicts"][0]["session"]
        assert named_sid.startswith("deploy-[REDACTED]#")
        assert {v["detector"] for v in verdicts} >= {"repeat"}
        stops = [v for v in verdicts if v["detector"] == "repeat"]
        assert len(stops) == len(PROBES) + 1
        assert [
            v["fingerprint"] for v in stops if "[redacted]" not in v["fingerprint"].lower()
        ] == []
        sinks["verdicts (fingerprints, reasons, hints)"] = json.dumps(verdicts)

        call = {"command": "rm -rf /data", **{f"p{i}": p for i, p in enumerate(PROBES.values())}}
        status, gate = server.call(
            "POST",
            "/v1/check",
            {
                "tool": "Bash",
                "args": call,
                "session": "probe-approval",
                "agent": "bot-" + NAME_SECRETS["agent name"],
            },
        )
        assert (status, gate["action"]) == (200, "ask")
        assert gate["args"] == call  # the caller gets its own call back, to run it
        sinks["/v1/check approval"] = json.dumps(gate["approval"])
        webhook = got.get(timeout=30)
        assert b"rm -rf /data" in webhook
        sinks["webhook body"] = webhook
        rid = gate["approval"]["id"]
        comment = "denied: " + PROBES["GitHub token ghp_"]
        status, decided = server.call(
            "POST", f"/v1/approvals/{rid}", {"decision": "deny", "comment": comment}
        )
        assert (status, decided["status"]) == (200, "denied")
        sinks["decision"] = json.dumps(decided)
        jwt = _session("JSON web token")
        for probe in (PROBES["Slack bot token"], "probe-done"):
            status, _ = server.call("POST", f"/v1/sessions/{jwt}/feedback", {"text": probe})
            assert status == 200
        sinks["live events (SSE)"] = events.wait_for(b"probe-done")
        assert b"event: approval" in sinks["live events (SSE)"]
        assert b"event: verdict" in sinks["live events (SSE)"]
        events.close()

        _, step = server.call(
            "POST", "/v1/steps", _steps("JSON web token", PROBES["JSON web token"])[0]
        )
        assert step["hint"].startswith("A person says: slack [REDACTED]")
        sinks["feedback hint"] = json.dumps(step)
        with urllib.request.urlopen(server.url + "/", timeout=30) as page:
            sinks["dashboard page"] = page.read()
        assert b"antiloop" in sinks["dashboard page"]
        sinks["/v1/sessions"] = json.dumps(server.call("GET", "/v1/sessions")[1])
        for sid in [*map(_session, PROBES), named_sid]:
            quoted = urllib.parse.quote(sid, safe="")
            status, body = server.call("GET", f"/v1/sessions/{quoted}")
            assert status == 200, (sid, body)
            sinks[f"/v1/sessions/{sid}"] = json.dumps(body)
            status, body = server.call("GET", f"/v1/timeline/{quoted}")
            assert status == 200, (sid, body)
            sinks[f"/v1/timeline/{sid}"] = json.dumps(body)
        raw_name = urllib.parse.quote("deploy-" + NAME_SECRETS["session name"], safe="")
        status, body = server.call("GET", f"/v1/sessions/{raw_name}")  # as the agent calls it
        assert status == 200, body
        sinks["/v1/sessions/<the raw name>"] = json.dumps(body)
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
    named_raw = "deploy-" + NAME_SECRETS["session name"]  # as the agent has it
    for argv in (
        ["log"],
        ["log", _session("GitHub token ghp_")],
        ["log", named_raw],
        ["log", "--jsonl"],
    ):
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


def test_text_that_is_not_unicode_never_breaks_a_path(
    tmp_path: Path, receiver: tuple[str, queue.Queue[bytes]]
):
    """Lone surrogates (valid JSON) and bytes that are not UTF-8, in steps, calls, names and
    feedback: every answer is 200, the live events go on, and every sink reads as UTF-8 with
    U+FFFD where the broken text was."""
    url, got = receiver
    server = start_server(tmp_path, "--webhook", url)
    sinks: dict[str, bytes] = {}
    try:
        events = Events(server)
        sids = set()
        for i, text in enumerate(BROKEN_TEXT):
            step = {
                "session": f"broken-{i}-{text}",
                "agent": f"a{text}",
                "tool": f"Bash{text}",
                "args": {"command": f"cat {text}", text: [text]},
                "output": f"out {text}",
                "error": f"err {text}",
                "message": text,
                "goal": text,
            }
            status, body = server.call("POST", "/v1/steps", {"steps": [step] * 3})
            assert status == 200, body
            assert [v["action"] for v in body["verdicts"]][:2] == ["continue", "stop"]
            sids.add(body["verdicts"][0]["session"])
            status, body = server.call("POST", "/v1/steps", step)  # one step, not a batch
            assert status == 200, body
            status, gate = server.call(
                "POST",
                "/v1/check",
                {
                    "tool": "Bash",
                    "args": {"command": f"rm -rf /{text}"},
                    "session": step["session"],
                },
            )
            assert status == 200, gate
            status, _ = server.call(
                "POST", f"/v1/sessions/broken-{i}/feedback", {"text": f"say {text}"}
            )
            assert status == 200
        for i, data in enumerate(BROKEN_BYTES):
            raw = (
                b'{"steps": [{"session": "bytes-%d", "tool": "Bash", "args": {"command": "cat %s"},'
                b' "output": "%s"}]}' % (i, data, data)
            )
            status, body = server.call("POST", "/v1/steps", raw=raw)
            assert status == 200, body
            assert body["verdicts"][0]["action"] == "continue"
            sids.add(body["verdicts"][0]["session"])
            status, gate = server.call(
                "POST",
                "/v1/check",
                raw=b'{"tool": "Bash", "args": {"command": "rm -rf /%s"}}' % data,
            )
            assert status == 200, gate
        status, _ = server.call(
            "POST", "/v1/sessions/broken-done/feedback", {"text": "\udc80 done"}
        )
        assert status == 200
        status, _ = server.call("POST", "/v1/steps", {"session": "broken-done", "tool": "Read"})
        assert status == 200
        sinks["live events (SSE)"] = events.wait_for(b"broken-done")
        events.close()
        sinks["webhook bodies"] = b"".join(got.get(timeout=30) for _ in range(2))
        for sid in sorted(sids):
            quoted = urllib.parse.quote(sid, safe="")
            for path in (f"/v1/sessions/{quoted}", f"/v1/timeline/{quoted}"):
                status, body = server.call("GET", path)
                assert status == 200, (path, body)
                sinks[path] = json.dumps(body, ensure_ascii=False).encode()
        for path in ("/v1/sessions", "/v1/approvals"):
            status, body = server.call("GET", path)
            assert status == 200, (path, body)
            sinks[path] = json.dumps(body, ensure_ascii=False).encode()
        with urllib.request.urlopen(server.url + "/", timeout=30) as page:
            assert page.status == 200
    finally:
        stop_server(server)

    (store,) = tmp_path.glob("antiloop-*.db")
    for argv in (["log"], ["log", "broken-done"], ["log", "--jsonl"]):
        run = subprocess.run(
            [sys.executable, "-m", "antiloop", *argv, "--store", f"sqlite:///{store}"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert run.returncode == 0, run.stderr
        sinks["antiloop " + " ".join(argv)] = run.stdout + run.stderr
    records = [json.loads(line) for line in sinks["antiloop log --jsonl"].splitlines()]
    assert records[-1]["session"] == "broken-done"  # nothing after a broken record is lost
    assert len(records) >= 4 * len(BROKEN_TEXT) + len(BROKEN_BYTES) + 1
    for name, data in sinks.items():
        data.decode("utf-8")  # strict: no surrogate written as bytes, no bad byte passed on
        assert b"\\ud" not in data.lower(), name
    assert "\ufffd".encode() in sinks["antiloop log --jsonl"]
    assert "\ufffd".encode() in sinks["live events (SSE)"]
