"""The hook path: `antiloop hook claude-code`, a fresh process per event, beside `python -c pass`.

Every figure is a wall-clock time of a whole process (start, imports, stdin, the store, the
answer), measured interleaved with the bare interpreter so that both see the same machine load.
The import costs come from `python -X importtime` on the same command.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

PYTHON = sys.executable
ANTILOOP = str(Path(PYTHON).with_name("antiloop"))
SRC = Path(__file__).resolve().parents[1] / "src" / "antiloop"
TARGET_MS = 60.0
# What any hook on the standard library's SQLite and json imports before doing anything.
STDLIB = "import json, sqlite3, re, dataclasses, hashlib, threading, logging, typing, enum, pathlib"
TARGET_RATIO = 2.5


def _payload(kind: str, i: int) -> bytes:
    base = {
        "session_id": "bench",
        "transcript_path": "/tmp/bench.jsonl",
        "cwd": "/home/dev/game",
        "permission_mode": "default",
    }
    path = f"/home/dev/game/src/file{i}.ts"
    event: dict[str, Any]
    if kind == "pre":
        event = {"hook_event_name": "PreToolUse", "tool_name": "Read"}
        event["tool_input"] = {"file_path": path}
    elif kind == "pre-bash":
        event = {"hook_event_name": "PreToolUse", "tool_name": "Bash"}
        event["tool_input"] = {"command": f"npm test -- file{i}"}
    else:
        event = {
            "hook_event_name": "PostToolUse",
            "tool_name": "Read",
            "tool_input": {"file_path": path},
            "tool_response": {"type": "text", "file": {"content": f"line {i}\n" * 20}},
        }
    return json.dumps({**base, **event, "tool_use_id": f"t{i}"}).encode()


def _time(argv: list[str], data: bytes, env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, input=data, capture_output=True, env=env, check=False)
    took = (time.perf_counter() - started) * 1000
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited {proc.returncode}: {proc.stderr.decode()}")
    return took


def _q(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


HOOK = [ANTILOOP, "hook", "claude-code"]
PRE_ROW = "hook PreToolUse (Read)"
POST_ROW = "hook PostToolUse (Read, recorded)"
STOP_ROW = "hook Stop (goal and stagnation checks, default embedder)"
DAEMON = ", answered by the hook daemon"
ALONE = ", answered in the process (`ANTILOOP_HOOKD=0`)"


def latencies(n: int, env: dict[str, str], daemon_env: dict[str, str]) -> dict[str, list[float]]:
    """Wall times in ms, interleaved round by round; the hook rows with and without daemon."""
    plain: dict[str, tuple[list[str], str]] = {
        "python -c pass": ([PYTHON, "-c", "pass"], ""),
        "python -c 'import <stdlib of a hook answered in the process>'": (
            [PYTHON, "-c", STDLIB],
            "",
        ),
        "python -c 'import antiloop'": ([PYTHON, "-c", "import antiloop"], ""),
    }
    hooks = {
        PRE_ROW: "pre",
        "hook PreToolUse (Bash, policy asks)": "pre-bash",
        POST_ROW: "post",
    }
    out: dict[str, list[float]] = defaultdict(list)
    for argv, _ in plain.values():  # warm the OS caches
        _time(argv, b"", env)
    for kind in hooks.values():  # warm the store; the first hook starts the daemon
        _time(HOOK, _payload(kind, -1), env)
        _time(HOOK, _payload(kind, -1), daemon_env)
    _wait_for_daemon(daemon_env)
    for i in range(6):  # a session past min_steps, for the Stop rows
        _time(HOOK, _payload("post", 1_000_000 + i), env)
    for i in range(n):
        for name, (argv, _) in plain.items():
            out[name].append(_time(argv, b"", env))
        for name, kind in hooks.items():
            out[name + DAEMON].append(_time(HOOK, _payload(kind, i), daemon_env))
            out[name + ALONE].append(_time(HOOK, _payload(kind, 3_000_000 + i), env))
        for label, e in ((DAEMON, daemon_env), (ALONE, env)):
            _time(HOOK, _stop_payload("prompt", i), e)
            out[STOP_ROW + label].append(_time(HOOK, _stop_payload("stop", i), e))
    return out


def _wait_for_daemon(env: dict[str, str]) -> None:
    from antiloop._hook_client import socket_path

    path = Path(socket_path(env))
    deadline = time.monotonic() + 60
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the hook daemon did not start ({path})")
        time.sleep(0.05)
    _time(HOOK, _payload("pre", -3), env)  # its first event imports the rest


def _stop_daemon(env: dict[str, str]) -> None:
    from antiloop._hook_client import socket_path

    Path(socket_path(env)).unlink(missing_ok=True)  # it leaves within a second


def http_latencies(n: int, env: dict[str, str]) -> dict[str, list[float]]:
    """Wall times in ms of Claude Code's HTTP hooks posted to a running ``antiloop serve``."""
    import http.client
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token = "bench-token"  # noqa: S105 - a throwaway token for a loopback service
    serve_env = {**env, "ANTILOOP_TOKEN": token}
    argv = [ANTILOOP, "serve", "--port", str(port), "--store", env["ANTILOOP_STORE"]]
    server = subprocess.Popen(
        argv, env=serve_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def post(data: bytes) -> float:
        started = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)  # one per hook, as sent
        conn.request("POST", "/v1/hooks/claude-code", data, headers)
        response = conn.getresponse()
        response.read()
        conn.close()
        if response.status != 200:
            raise RuntimeError(f"hook over HTTP answered {response.status}")
        return (time.perf_counter() - started) * 1000

    out: dict[str, list[float]] = defaultdict(list)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                post(_payload("pre", -1))
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        for i in range(n * 5):
            out["HTTP hook PreToolUse (Read), to `antiloop serve`"].append(post(_payload("pre", i)))
            out["HTTP hook PostToolUse (Read, recorded), to `antiloop serve`"].append(
                post(_payload("post", i))
            )
    finally:
        server.terminate()
        server.wait(timeout=10)
    return out


_SAID = (
    "I made the double jump height configurable in the player settings.",
    "The settings file now has a jumpHeight entry and the tests pass.",
    "I could not find where the second jump is triggered yet.",
    "Jumping twice now works; I added a test for the cooldown.",
)


def _stop_payload(kind: str, i: int) -> bytes:
    base = {"session_id": "bench", "transcript_path": "/tmp/bench.jsonl", "cwd": "/tmp"}
    event: dict[str, Any]
    if kind == "prompt":
        event = {
            "hook_event_name": "UserPromptSubmit",
            "prompt": "Make the double jump height configurable in the player settings.",
        }
    else:
        event = {
            "hook_event_name": "Stop",
            "stop_hook_active": False,
            "last_assistant_message": _SAID[i % len(_SAID)],
        }
    return json.dumps({**base, **event}).encode()


def in_process(n: int, env: dict[str, str]) -> dict[str, float]:
    """Median ms of ``run_hook`` in this process, imports done: the hook's own work per event."""
    from antiloop.hooks.runner import run_hook

    out: dict[str, float] = {}
    for kind in ("pre", "pre-bash", "post"):
        run_hook("claude-code", _payload(kind, -2), env=env)
        samples = []
        for i in range(n):
            started = time.perf_counter()
            run_hook("claude-code", _payload(kind, 2_000_000 + i), env=env)
            samples.append((time.perf_counter() - started) * 1000)
        out[kind] = statistics.median(samples)
    return out


def _modules_when_the_daemon_answers(env: dict[str, str]) -> list[str]:
    """The antiloop modules a hook process imports when the daemon answers it."""
    code = (
        "import sys; from antiloop.cli import main; main(['hook', 'claude-code']);"
        "print(','.join(sorted(m for m in sys.modules if m.startswith('antiloop'))),"
        " file=sys.stderr)"
    )
    proc = subprocess.run(
        [PYTHON, "-c", code], input=_payload("pre", -4), capture_output=True, env=env, check=True
    )
    modules = proc.stderr.decode().strip().splitlines()[-1].split(",")
    if "antiloop.hooks.runner" in modules:
        raise RuntimeError("the daemon did not answer the probe")
    return modules


def import_costs(env: dict[str, str], rounds: int) -> tuple[dict[str, float], float, float]:
    """Median self import time (ms) per module of a hook answered in the process (PreToolUse)."""
    selfs: dict[str, list[float]] = defaultdict(list)
    totals: list[float] = []
    ours: list[float] = []
    for i in range(rounds):
        proc = subprocess.run(
            [PYTHON, "-X", "importtime", ANTILOOP, "hook", "claude-code"],
            input=_payload("pre-bash", 10_000 + i),
            capture_output=True,
            env=env,
            check=True,
        )
        total = 0.0
        mine = 0.0
        for line in proc.stderr.decode().splitlines():
            m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)", line)
            if not m:
                continue
            self_ms = int(m.group(1)) / 1000
            selfs[m.group(4)].append(self_ms)
            total += self_ms
            if m.group(4).startswith("antiloop"):
                mine += self_ms
        totals.append(total)
        ours.append(mine)
    med = {name: statistics.median(v) for name, v in selfs.items()}
    return med, statistics.median(totals), statistics.median(ours)


def _groups(costs: dict[str, float]) -> list[tuple[str, float]]:
    """Self import time grouped: each antiloop module apart, the stdlib by top package."""
    groups: dict[str, float] = defaultdict(float)
    for name, ms in costs.items():
        key = name if name.startswith("antiloop") else name.split(".")[0]
        groups[key] += ms
    return sorted(groups.items(), key=lambda kv: -kv[1])


def run(quick: bool = False) -> str:
    """Measure and return the markdown section."""
    n = 12 if quick else 40
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTILOOP_")}
        env["ANTILOOP_STORE"] = f"sqlite:///{tmp}/bench.db"
        # As installed: bytecode cached (kept out of the source tree, in a prefix of our own).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = f"{tmp}/pycache"
        daemon_env = {**env, "ANTILOOP_HOOKD": "1", "ANTILOOP_HOOKD_DIR": f"{tmp}/run"}
        env["ANTILOOP_HOOKD"] = "0"
        try:
            times = latencies(n, env, daemon_env)
            client_modules = _modules_when_the_daemon_answers(daemon_env)
        finally:
            _stop_daemon(daemon_env)
        times.update(http_latencies(n, env))
        costs, total_import, antiloop_import = import_costs(env, 3 if quick else 7)
        work = in_process(50 if quick else 200, env)
    floor_p50, floor_p95 = _q(times["python -c pass"])
    lines = [
        "## Hooks: `antiloop hook claude-code` per event, as a fresh process",
        "",
        f"Each row is {n} runs of a whole process (start, imports, stdin, SQLite store, answer), "
        "interleaved round by round with `python -c pass` so that all rows see the same machine "
        "load, with bytecode cached as in an installation (`PYTHONPYCACHEPREFIX` in a temporary "
        "directory; this machine sets `PYTHONDONTWRITEBYTECODE`, under which every module whose "
        "`.pyc` is stale is compiled again in each process). The HTTP rows are Claude Code's "
        '`type: "http"` hooks (`antiloop install claude-code --http URL`) posted to a running '
        "`antiloop serve` on loopback, a new connection each, the same payloads and store. "
        "Each hook row is measured twice in each round: answered by the hook daemon (what "
        "`antiloop hook` does once the first event of the day has started it) and answered in "
        "the process (`ANTILOOP_HOOKD=0`, and the first event, which starts the daemon).",
        "",
        "| invocation | p50 | p95 | p50 / `python -c pass` |",
        "|---|---:|---:|---:|",
    ]
    for name, samples in times.items():
        p50, p95 = _q(samples)
        lines.append(f"| {name} | {p50:.0f} ms | {p95:.0f} ms | {p50 / floor_p50:.2f}x |")
    lines.append(
        "\nThe Stop rows: after a prompt (not timed), the last message is judged for goal and "
        "stagnation; with the `embed` extra the default embedder is MiniLM (ONNX): loaded once "
        "by the daemon, and by the process on each Stop without it."
    )
    lines.append(
        f"\nWhen the daemon answers, the hook process imports {len(client_modules)} antiloop "
        f"modules ({', '.join(client_modules)}) and, of the standard library, only what the "
        "interpreter's start imports plus `_socket`."
    )
    lines.append(
        f"\nThe hook's own work, in this process with the imports done (a new handler, store "
        f"connection and answer per event, as in a hook process): PreToolUse (Read) "
        f"{work['pre']:.1f} ms, PreToolUse (Bash) {work['pre-bash']:.1f} ms, PostToolUse "
        f"{work['post']:.1f} ms. The rest of each row above is the interpreter's start and the "
        "imports."
    )

    def verdict(label: str) -> str:
        pre50 = _q(times[PRE_ROW + label])[0]
        post50 = _q(times[POST_ROW + label])[0]
        worst = max(pre50, post50)
        met = worst <= TARGET_MS and worst / floor_p50 <= TARGET_RATIO
        return (
            f"**{'met' if met else 'not met'}** (PreToolUse {pre50:.0f} ms, PostToolUse "
            f"{post50:.0f} ms, {worst / floor_p50:.2f}x)"
        )

    lines += [
        "",
        f"Target: p50 <= {TARGET_MS:.0f} ms and <= {TARGET_RATIO}x the bare interpreter "
        f"(here {floor_p50:.0f} ms p50, {floor_p95:.0f} ms p95). Answered by the daemon: "
        f"{verdict(DAEMON)}; answered in the process: {verdict(ALONE)}.",
        "",
        "### Imports of a hook answered in the process "
        "(`python -X importtime`, PreToolUse of Bash)",
        "",
        f"All imports: {total_import:.0f} ms of self time (median of runs); antiloop's own "
        f"modules: {antiloop_import:.0f} ms. By module (antiloop) or top-level package (the "
        "rest), self time:",
        "",
        "| module | self ms |",
        "|---|---:|",
    ]
    for name, ms in _groups(costs)[:25]:
        lines.append(f"| `{name}` | {ms:.1f} |")
    loaded = sorted(n for n in costs if n.startswith("antiloop"))
    lines += ["", f"antiloop modules imported ({len(loaded)}): " + ", ".join(loaded) + "."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
