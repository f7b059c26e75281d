"""A realistic step mix for the benchmarks: shell greps, tests, builds, reads, edits, failures."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from typing import Any

OUTPUT_SIZE = 2000


def _text(rng: random.Random, kind: str, n: int) -> str:
    if kind == "pytest":
        failed = rng.randint(0, 5)
        head = "============================= test session starts ====\nplatform linux\n"
        body = "".join(f"tests/test_m{i}.py::test_{i} PASSED\n" for i in range(n % 40))
        tail = f"==== {failed} failed, {30 - failed} passed in {rng.random() * 3:.2f}s ====\n"
        return _fill(head + body, tail, rng)
    if kind == "grep":
        lines = "".join(
            f"src/mod{rng.randint(0, 50)}/file{rng.randint(0, 99)}.py:{rng.randint(1, 900)}:"
            f"    value_{n} = compute(value_{n - 1})\n"
            for _ in range(20)
        )
        return lines[:OUTPUT_SIZE]
    if kind == "npm":
        return _fill(
            "\n> app@1.0.0 build\n> vite build\n\nvite v5.4.2 building for production...\n",
            f"error TS2304: Cannot find name 'x{n % 7}'.\n",
            rng,
        )
    return _fill(f"# file {n}\n", "", rng)


def _fill(head: str, tail: str, rng: random.Random) -> str:
    words = ("alpha", "beta", "gamma", "delta", "value", "return", "self", "import", "def")
    body = []
    size = len(head) + len(tail)
    while size < OUTPUT_SIZE:
        line = " ".join(rng.choice(words) for _ in range(8)) + f" {rng.randint(0, 10**6)}\n"
        body.append(line)
        size += len(line)
    return head + "".join(body) + tail


def steps(n: int, sessions: int, seed: int = 7) -> Iterator[dict[str, Any]]:
    """``n`` steps over ``sessions`` interleaved sessions; about 5% repeat the previous step."""
    rng = random.Random(seed)
    last: dict[str, dict[str, Any]] = {}
    for i in range(n):
        session = f"s{rng.randrange(sessions)}"
        previous = last.get(session)
        if previous is not None and rng.random() < 0.05:
            step = dict(previous)
        else:
            step = _fresh(rng, i, session)
        last[session] = step
        yield step


def _fresh(rng: random.Random, i: int, session: str) -> dict[str, Any]:
    roll = rng.random()
    agent = rng.choice(("explorer", "code-writer", "qa-validator"))
    base: dict[str, Any] = {"session": session, "agent": agent}
    if roll < 0.25:
        cmd = f"grep -rn 'value_{i}' src/mod{i % 50}"
        return {**base, "tool": "Bash", "args": {"command": cmd}, "output": _text(rng, "grep", i)}
    if roll < 0.40:
        failed = rng.random() < 0.4
        return {
            **base,
            "tool": "Bash",
            "args": {"command": f"pytest tests/test_m{i % 30}.py -q"},
            "output": _text(rng, "pytest", i),
            "exit_code": 1 if failed else 0,
        }
    if roll < 0.50:
        return {
            **base,
            "tool": "Bash",
            "args": {"command": "npm run build"},
            "output": _text(rng, "npm", i),
            "exit_code": 2,
        }
    if roll < 0.65:
        return {
            **base,
            "tool": "Grep",
            "args": {"pattern": f"handle{i % 97}Event", "path": "src", "output_mode": "content"},
            "output": _text(rng, "grep", i),
        }
    if roll < 0.85:
        return {
            **base,
            "tool": "Read",
            "args": {"file_path": f"/repo/src/mod{i % 50}/file{i % 99}.py"},
            "output": _text(rng, "cat", i),
            "cwd": "/repo",
        }
    content = f"def f{i}():\n    return {i}\n"
    return {
        **base,
        "tool": "Edit",
        "args": {
            "file_path": f"src/mod{i % 50}/file{i % 99}.py",
            "old_string": f"return {i - 1}",
            "new_string": f"return {i}",
        },
        "output": "The file has been updated.",
        "file_states": {
            f"src/mod{i % 50}/file{i % 99}.py": {
                "sha256": hashlib.sha256(content.encode()).hexdigest(),
                "mtime": 1_700_000_000.0 + i,
            }
        },
    }
