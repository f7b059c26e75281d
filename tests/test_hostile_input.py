"""Hostile input through the library, ``antiloop check``, ``antiloop scan`` and the MCP proxy.

Every fake secret of the corpus (``tests/secrets_corpus.py``) and text that is not valid
Unicode (lone surrogates, bytes that are not UTF-8) go in; every verdict is an ordinary one,
and what each store keeps (audit log and session state, read back), each CLI prints and the
proxy answers holds no secret and reads as UTF-8.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.secrets_corpus import BROKEN_BYTES, BROKEN_TEXT, SECRETS, leaks
from tests.stores.conftest import PARAMS, Backend, redis_cluster  # noqa: F401 - a fixture

from antiloop import Guard, GuardConfig
from antiloop.stores.codec import encode_state

NAMES = {"session name": "ghp_" + "Lb7q" * 9, "agent name": "sk_live_" + "Wq4rT8" * 4}


def _secret_steps() -> list[dict[str, Any]]:
    steps = []
    for i, case in enumerate(SECRETS):
        step = {
            "session": f"corpus-{i}",
            "tool": "Bash",
            "args": {"command": f"echo {case.text}"},
            "output": f"out {case.text}",
            "error": f"err {case.text}",
            "message": f"again with {case.text}",
            "goal": f"ship using {case.text}",
        }
        steps += [step, step]
    named = {
        "session": "deploy-" + NAMES["session name"],
        "agent": "bot-" + NAMES["agent name"],
        "tool": "Read",
        "args": {"path": "a"},
    }
    return [*steps, named, named]


def _broken_steps() -> list[dict[str, Any]]:
    steps = []
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
        steps += [step, step]
    return steps


@pytest.mark.parametrize("kind", [p for p in PARAMS if "memory" not in str(p)])
def test_the_library_on_each_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest):
    """Guard.record and Guard.check: each step judged as usual; the store keeps no secret."""
    cluster = request.getfixturevalue("redis_cluster") if kind == "cluster" else None
    backend = Backend(kind, tmp_path, cluster)
    try:
        guard = Guard(config=GuardConfig(embedder="ngram"), store=backend.open())
        actions = [guard.record(step).action.wire for step in _secret_steps() + _broken_steps()]
        assert actions == ["continue", "stop"] * (len(SECRETS) + 1 + len(BROKEN_TEXT))
        for text in BROKEN_TEXT:
            checked = guard.check(f"Bash{text}", {"command": f"cat {text}"}, session=f"x{text}")
            assert checked.action.wire == "continue"
        store = guard.store
        records = [json.dumps(r.to_dict(), ensure_ascii=False) for r in store.audit_records()]
        assert len(records) >= len(SECRETS) * 2
        kept = "\n".join(records).encode("utf-8")  # strict: valid Unicode only
        assert "\ufffd".encode() in kept
        sessions = {r.session for r in store.audit_records()}
        assert not any(s.startswith("deploy-ghp_") for s in sessions)
        for sid in sessions:
            state = store.peek(sid)
            assert state is not None, sid
            kept += encode_state(state)
        assert leaks(kept, NAMES) == []
        if kind == "sqlite":
            files = b"".join(f.read_bytes() for f in tmp_path.glob("antiloop.db*"))
            assert leaks(files, NAMES) == []
    finally:
        backend.cleanup()


def _lines() -> bytes:
    out = [json.dumps(step).encode() for step in _secret_steps() + _broken_steps()]
    for i, data in enumerate(BROKEN_BYTES):
        line = b'{"session": "bytes-%d", "tool": "Bash", "args": {"command": "cat %s"}}' % (i, data)
        out += [line, line]
    return b"\n".join(out) + b"\n"


def test_check_and_scan_take_hostile_lines(tmp_path: Path):
    """One verdict per line, none invalid; the terminal output holds no secret."""
    path = tmp_path / "steps.jsonl"
    path.write_bytes(_lines())
    check = subprocess.run(
        [sys.executable, "-m", "antiloop", "check", str(path)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert check.returncode == 3, check.stderr
    verdicts = [json.loads(line) for line in check.stdout.decode("utf-8").splitlines()]
    assert len(verdicts) == len(_lines().splitlines())
    assert [v["action"] for v in verdicts] == ["continue", "stop"] * (len(verdicts) // 2)
    scan = subprocess.run(
        [sys.executable, "-m", "antiloop", "scan", str(path)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert scan.returncode in (0, 1), scan.stderr
    assert b"Traceback" not in scan.stderr
    report = scan.stdout.decode("utf-8")
    assert f"{len(verdicts)} steps" in report
    assert leaks(check.stdout + check.stderr + scan.stdout + scan.stderr, NAMES) == []


def test_the_mcp_proxy_takes_hostile_calls(tmp_path: Path):
    """A tools/call with a lone surrogate, or bytes that are not UTF-8, is judged and relayed;
    the second identical call is the loop; the audit log keeps no secret."""
    from antiloop.integrations.mcp_proxy import McpProxy

    here = Path(__file__).resolve().parent / "integrations"

    def call(n: int, say: str) -> bytes:
        params = {"name": "echo", "arguments": {"say": say}}
        message = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}
        return json.dumps(message).encode() + b"\n"

    def run(requests: list[bytes], guard: Guard) -> list[dict[str, Any]]:
        out = io.BytesIO()
        proxy = McpProxy(
            [sys.executable, str(here / "wire_server.py")],
            client_in=io.BytesIO(b"".join(requests)),
            client_out=out,
            guard=guard,
        )
        assert proxy.run() == 0
        return [json.loads(line) for line in out.getvalue().decode("utf-8").splitlines()]

    guard = Guard(config=GuardConfig(embedder="ngram"), store=f"sqlite:///{tmp_path}/p.db")
    secret = SECRETS[0].text
    replies = run([call(1, f"x\udc80 {secret}"), call(2, f"x\udc80 {secret}")], guard)
    assert [(r["id"], r["result"]["isError"]) for r in replies] == [(1, False), (2, True)]
    raw = (
        b'{"jsonrpc":"2.0","id":%d,"method":"tools/call",'
        b'"params":{"name":"echo","arguments":{"say":"caf\xc3"}}}\n'
    )
    other = Guard(config=GuardConfig(embedder="ngram"))
    replies = run([raw % 3, raw % 4], other)
    assert [(r["id"], r["result"]["isError"]) for r in replies] == [(3, False), (4, True)]
    records = guard.store.audit_records()
    kept = "\n".join(json.dumps(r.to_dict(), ensure_ascii=False) for r in records)
    assert leaks(kept.encode("utf-8")) == []
