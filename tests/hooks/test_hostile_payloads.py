"""Hook processes given text that is not valid Unicode, and secrets: answered, never broken.

``antiloop hook claude-code`` runs as Claude Code runs it (one process per event); the
payloads carry lone surrogates (valid JSON) or bytes that are not UTF-8, and a fake secret of
the corpus. The loop is still stopped at the second identical step, every answer is JSON in
UTF-8, and the store keeps no secret.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.hooks.conftest import spawn, spawned_json
from tests.hooks.payloads import ClaudeSession
from tests.secrets_corpus import BROKEN_BYTES, BROKEN_TEXT, SECRETS, leaks

from antiloop.stores import open_store

SECRET = SECRETS[0].text  # an OpenAI key in a command


def _events(s: ClaudeSession, text: str) -> list[dict[str, Any]]:
    args = {"pattern": f"{text} {SECRET}", "path": "src", "output_mode": "content"}
    found = f"src/a.py:1: {text} {SECRET}"
    response = {"mode": "content", "content": found, "numLines": 1, "filenames": []}
    steps = [s.pre("Grep", args), s.post("Grep", args, response)]  # each a tool_use_id of its own
    steps += [s.pre("Grep", args), s.post("Grep", args, response), s.pre("Grep", args)]
    return [s.start(), s.prompt(f"Find {text}."), *steps]


@pytest.mark.parametrize("text", BROKEN_TEXT[1:2])
def test_lone_surrogates_in_a_hook_payload(text: str, env: dict[str, str]) -> None:
    """The second identical step is stopped, the third refused; the store keeps U+FFFD."""
    s = ClaudeSession(f"hostile-{BROKEN_TEXT.index(text)}")
    answers = [spawned_json(spawn(payload, env)) for payload in _events(s, text)]
    assert answers[:5] == [None] * 5
    assert answers[5] is not None
    assert answers[5]["decision"] == "block"
    assert answers[6] is not None
    assert answers[6]["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert leaks(json.dumps(answers, ensure_ascii=False)) == []
    store = open_store(env["ANTILOOP_STORE"])
    records = [json.dumps(r.to_dict(), ensure_ascii=False) for r in store.audit_records()]
    kept = "\n".join(records).encode("utf-8")  # strict
    assert "\ufffd".encode() in kept
    assert leaks(kept) == []


@pytest.mark.parametrize("data", BROKEN_BYTES[1:2])
def test_bytes_that_are_not_utf8_in_a_hook_payload(data: bytes, env: dict[str, str]) -> None:
    """Each bad byte sequence becomes U+FFFD; the loop is stopped as with any text."""
    s = ClaudeSession(f"bytes-{BROKEN_BYTES.index(data)}")
    marker = "\ue000"  # stands for the bad bytes in the JSON, replaced once encoded
    answers = []
    for payload in _events(s, marker):
        raw = json.dumps(payload, ensure_ascii=False).encode().replace(marker.encode(), data)
        proc = spawn(raw, env)
        assert b"Traceback" not in proc.stderr
        answers.append(spawned_json(proc))
    assert answers[5] is not None
    assert answers[5]["decision"] == "block"
    assert leaks(json.dumps(answers, ensure_ascii=False)) == []
