"""Sessions of every kind, made through the real entry points, for the console's tests.

A loop stopped by ``repeat`` (with tokens and cost), a goal reached, a long output, a session
waiting for an approval, one a named person stopped with a reason, a Claude Code hook session
over HTTP, a library session written straight to the store, and ``filler`` plain sessions (to
page past the first page).
"""

from __future__ import annotations

import uuid
from typing import Any

from tests.server.conftest import Server

NAMED = "alice-token-123"
"""A named token (ANTILOOP_TOKENS=alice=...): the holder is ``alice``."""
GOAL = "fix the failing login test"


def _id(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:6]}"


def _hook(session: str, name: str, **fields: object) -> dict[str, Any]:
    return {
        "session_id": session,
        "hook_event_name": name,
        "cwd": "/work/game",
        "transcript_path": "/tmp/none.jsonl",
        **fields,
    }


def seed(server: Server, store_url: str, filler: int = 0) -> dict[str, Any]:
    """Make the sessions; returns their ids and the loop's fingerprint."""
    made: dict[str, Any] = {}
    loop = made["loop"] = _id("loop")
    grep = {
        "session": loop,
        "agent": "coder",
        "tool": "Grep",
        "args": {"pattern": "needle", "path": "src"},
        "output": "no match",
        "tokens_in": 1200,
        "tokens_out": 300,
        "cost_usd": 0.0125,
    }
    read = {"session": loop, "agent": "coder", "tool": "Read", "args": {"file_path": "a.py"}}
    _, judged = server.call("POST", "/v1/steps", [{**read, "output": "x = 1"}, grep, grep])
    made["fingerprint"] = judged["verdicts"][2]["fingerprint"]

    goal = made["goal"] = _id("goal")
    steps = [
        {
            "session": goal,
            "agent": "fixer",
            "tool": "Read",
            "goal": GOAL,
            "output": f"line {i}",
            "args": {"file_path": f"src/f{i}.py"},
        }
        for i in range(6)
    ]
    steps.append({**steps[0], "args": {"file_path": "done.txt"}, "message": GOAL, "output": "ok"})
    _, reached = server.call("POST", "/v1/steps", steps)
    made["goal_verdict"] = reached["verdicts"][-1]

    long = made["long"] = _id("long")
    text = "\n".join(f"{n:05d} a line of the build log that goes on" for n in range(300))
    server.call(
        "POST",
        "/v1/steps",
        {
            "session": long,
            "agent": "builder",
            "tool": "Bash",
            "args": {"command": "make"},
            "output": text,
            "exit_code": 2,
            "error": "make: *** [all] Error 2",
        },
    )

    waiting = made["waiting"] = _id("wait")
    _, gate = server.call(
        "POST",
        "/v1/check",
        {"tool": "Bash", "args": {"command": "rm -rf build"}, "session": waiting, "agent": "ops"},
    )
    made["pending"] = gate["approval"]["id"]

    person = made["person"] = _id("halt")
    server.call(
        "POST",
        "/v1/steps",
        {
            "session": person,
            "agent": "ops",
            "tool": "Read",
            "args": {"file_path": "x"},
            "output": "1",
        },
    )
    server.call("POST", f"/v1/sessions/{person}/stop", {"reason": "wrong branch"}, token=NAMED)
    _, stopped = server.call(
        "POST",
        "/v1/steps",
        {
            "session": person,
            "agent": "ops",
            "tool": "Read",
            "args": {"file_path": "y"},
            "output": "2",
        },
    )
    made["person_verdict"] = stopped

    hook = made["hook"] = "cc-" + uuid.uuid4().hex[:8]
    grep_in = {"pattern": "doubleJump", "path": "src"}
    result = {"mode": "content", "content": "src/app.ts:12:  doubleJump(): void {", "numLines": 1}
    for _ in range(2):
        server.call(
            "POST",
            "/v1/hooks/claude-code",
            _hook(hook, "PreToolUse", tool_name="Grep", tool_input=grep_in),
        )
        server.call(
            "POST",
            "/v1/hooks/claude-code",
            _hook(hook, "PostToolUse", tool_name="Grep", tool_input=grep_in, tool_response=result),
        )

    from antiloop import Guard

    library = made["library"] = _id("lib")
    guard = Guard(store=store_url)
    try:
        for _ in range(2):
            guard.record(
                {
                    "session": library,
                    "agent": "script",
                    "tool": "Bash",
                    "args": {"command": "pytest -x"},
                    "output": "1 failed",
                    "exit_code": 1,
                }
            )
    finally:
        guard.store.close()

    if filler:
        batch = [
            {
                "session": f"fill-{n:03d}",
                "agent": "bulk",
                "tool": "Read",
                "args": {"file_path": f"f{n}"},
                "output": str(n),
            }
            for n in range(filler)
        ]
        for start in range(0, filler, 500):
            server.call("POST", "/v1/steps", batch[start : start + 500])
    return made
