"""The hook as Claude Code runs it: a new ``antiloop hook claude-code`` process per event.

The conformance suite's cases become Claude Code sessions (a PreToolUse and a PostToolUse or
PostToolUseFailure per step, a Stop carrying each agent message, the goal as the prompt),
padded to at least 200 invocations; sessions run four at a time against one store, the events of a
session in order.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.hooks.conftest import ANTILOOP, spawn, spawned_json
from tests.hooks.payloads import ClaudeSession

from antiloop.stores import open_store

INVOCATIONS = 200
CLAUDE_NAMES = {"bash": "Bash"}
# Stops count as steps in the hooks (PROTOCOL's cases count tool steps only): min_steps is
# reached sooner, so this case's stagnation shows at an earlier Stop.
EARLIER = {"p19-min-steps-guards-stagnation"}


@dataclass
class Invocation:
    """One hook process: its input, and the case step it belongs to."""

    payload: dict[str, Any] | bytes
    step: int
    role: str  # pre, post, stop, prompt, raw
    answer: dict[str, Any] | None = None
    skipped: bool = False


@dataclass
class Scripted:
    """A conformance case as a scripted Claude Code session."""

    case: dict[str, Any]
    config: Path
    invocations: list[Invocation] = field(default_factory=list)


def _agent(session: str, name: str | None, cwd: str) -> ClaudeSession:
    if name is None or name == "agent":
        return ClaudeSession(session, cwd=cwd)
    return ClaudeSession(session, cwd=cwd, agent_id="1", agent_type=name)


def script(case: dict[str, Any], root: Path) -> Scripted:
    """The hook invocations of one case (files it names are made under ``root``)."""
    cid = case["id"]
    workdir = root / cid
    workdir.mkdir(parents=True)
    config = root / f"{cid}.json"
    guard = {**case["config"], "embedder": "ngram"}
    config.write_text(json.dumps({"guard": guard, "hooks": {"approval": "off"}}))
    out = Scripted(case, config)
    prompted = False
    for index, event in enumerate(case["events"]):
        if not isinstance(event, dict):
            out.invocations.append(Invocation(str(event).encode(), index, "raw"))
            continue
        session = f"{cid}-{event.get('session', 's')}"
        base_cwd = event.get("cwd")
        # files the case names are made in the work dir, so the hook reads their states there
        cwd = str(workdir) if base_cwd or event.get("file_states") else "/home/dev/game"
        s = _agent(session, event.get("agent"), cwd)
        if event.get("goal") and not prompted:
            out.invocations.append(Invocation(s.prompt(event["goal"]), index, "prompt"))
            prompted = True
        args = dict(event["args"])
        for key, value in args.items():
            if base_cwd and isinstance(value, str) and value.startswith(base_cwd):
                args[key] = str(workdir) + value[len(base_cwd) :]
        for path, state in (event.get("file_states") or {}).items():
            target = workdir / path
            target.parent.mkdir(parents=True, exist_ok=True)
            out.invocations.append(
                Invocation({"write": str(target), "text": state["sha256"]}, index, "file")
            )
        tool = CLAUDE_NAMES.get(event["tool"], event["tool"])
        out.invocations.append(Invocation(s.pre(tool, args), index, "pre"))
        code = event.get("exit_code")
        if event.get("error"):
            post = s.failure(tool, args, event["error"])
        elif code not in (None, 0):
            post = s.failure(tool, args, f"Exit code {code}\n{event.get('output') or ''}")
        elif tool == "Bash":
            stdout = event.get("output") or ""
            post = s.post(tool, args, {"stdout": stdout, "stderr": "", "interrupted": False})
        else:
            post = s.post(tool, args, event.get("output"))
        # One tool-call id for the call's pre and post, as Claude Code sends: the event's own
        # id where it has one (a retried delivery keeps it), else one of its own.
        pre = out.invocations[-1].payload
        use_id = f"toolu_{event['id']}" if "id" in event else f"toolu_{cid}_{index:04d}"
        pre["tool_use_id"] = post["tool_use_id"] = use_id
        out.invocations.append(Invocation(post, index, "post"))
        if event.get("message"):
            stop = s.stop(event["message"], active=index > 0)
            out.invocations.append(Invocation(stop, index, "stop"))
    return out


def run_session(scripted: Scripted, env: dict[str, str]) -> None:
    """Run a case's invocations in order, each a new process; a denied call is not run."""
    denied: set[tuple[int, str]] = set()
    for inv in scripted.invocations:
        if inv.role == "file":
            assert isinstance(inv.payload, dict)
            Path(inv.payload["write"]).write_text(inv.payload["text"])
            continue
        if inv.role == "post" and (inv.step, "pre") in denied:
            inv.skipped = True
            continue
        proc = spawn(inv.payload, {**env, "ANTILOOP_CONFIG": str(scripted.config)})
        inv.answer = spawned_json(proc)
        if inv.role == "pre" and inv.answer is not None:
            denied.add((inv.step, "pre"))


def _hooked(prefix: str | None, event: dict[str, Any]) -> str | None:
    if prefix is None:
        return None
    name = event.get("agent")
    ours = "main" if name in (None, "agent") else f"{name.lower()}-1"
    return prefix.replace(f"AGENT::{(name or 'agent').lower()}::", f"AGENT::{ours}::", 1)


def _fired(inv: Invocation) -> bool:
    answer = inv.answer
    if answer is None:
        return False
    return answer.get("decision") == "block" or answer.get("continue") is False


def check(scripted: Scripted, store_url: str) -> None:
    """The first loop the hooks report is the case's, at the same step (EARLIER aside)."""
    case = scripted.case
    first = case["expect"].get("first")
    cid = case["id"]
    for inv in scripted.invocations:
        if inv.role == "raw":
            assert inv.answer is not None
            assert "nothing was checked" in inv.answer["systemMessage"], cid
    fired = [inv for inv in scripted.invocations if _fired(inv)]
    if first is None:
        assert fired == [], (cid, [inv.answer for inv in fired])
        return
    detector = first["detector"]
    if detector == "goal":
        assert fired == [], cid
        store = open_store(store_url)
        sessions = {
            inv.payload["session_id"]
            for inv in scripted.invocations
            if isinstance(inv.payload, dict) and "session_id" in inv.payload
        }
        goals = [r for s in sessions for r in store.audit_records(s) if r.detector == "goal"]
        assert goals, f"{cid}: no goal verdict in the audit log"
        return
    assert fired, (cid, [(i.role, i.step, i.answer) for i in scripted.invocations])
    hit = fired[0]
    if cid in EARLIER:
        assert hit.step <= first["index"], cid
    else:
        assert hit.step == first["index"], (cid, hit.step, hit.answer)
    answer = hit.answer
    assert answer is not None
    text = json.dumps(answer)
    if detector == "stagnation":
        assert hit.role == "stop", cid
        assert answer["continue"] is False
        return
    if detector == "max-steps":
        assert answer["continue"] is False
        assert "budget" in answer["stopReason"]
        return
    assert hit.role == "post", cid
    assert answer["decision"] == "block", cid
    prefix = _hooked(first.get("fingerprint_prefix"), case["events"][first["index"]])
    if prefix:
        assert prefix in text, (cid, prefix, text)
    if detector == "fail-streak":
        assert "failed 3 times" in answer["reason"]


def _cases(shared: Path) -> Iterator[dict[str, Any]]:
    for path in sorted((shared / "conformance" / "cases").glob("*.json")):
        yield json.loads(path.read_text())


def _filler(n: int, root: Path) -> Scripted:
    """``n`` ordinary invocations: reads of different files, each a PreToolUse and a Post."""
    config = root / "filler.json"
    config.write_text(json.dumps({"hooks": {"approval": "off"}}))
    case = {"id": "filler", "config": {}, "events": [], "expect": {"first": None}}
    out = Scripted(case, config)
    s = ClaudeSession("filler")
    for i in range(n):
        path = f"/home/dev/game/src/file{i // 2}.ts"
        payload = s.pre("Read", {"file_path": path}) if i % 2 == 0 else s.read(path, f"{i}\n")
        out.invocations.append(Invocation(payload, i // 2, "pre" if i % 2 == 0 else "post"))
    return out


def test_the_conformance_loops_through_200_hook_processes(
    shared: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    """Every loop kind of the conformance suite is reported by the hook processes, at its step."""
    sessions = [script(case, tmp_path / "files") for case in _cases(shared)]
    used = sum(1 for s in sessions for inv in s.invocations if inv.role != "file")
    if used < INVOCATIONS:
        sessions.append(_filler(INVOCATIONS - used, tmp_path))
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda s: run_session(s, env), sessions))
    ran = sum(
        1 for s in sessions for inv in s.invocations if inv.role != "file" and not inv.skipped
    )
    assert ran >= INVOCATIONS
    kinds = set()
    for scripted in sessions:
        check(scripted, env["ANTILOOP_STORE"])
        first = scripted.case["expect"].get("first")
        if first:
            kinds.add(first["detector"])
    assert kinds >= {"repeat", "cycle", "fail-streak", "max-steps", "stagnation", "goal"}


def test_claude_code_stops_the_second_identical_step(env: dict[str, str]) -> None:
    """Done when: a session is stopped at the second identical step, the fingerprint in the reason.

    Exactly as Claude Code runs hooks: ``antiloop hook claude-code``, one process per event.
    """
    s = ClaudeSession("done-when")
    found = "src/app/app.ts:12:  doubleJump(): void {"
    args = {"pattern": "doubleJump", "path": "src", "output_mode": "content"}
    response = {"mode": "content", "content": found, "numLines": 1, "filenames": []}
    answers = [
        spawned_json(spawn(payload, env))
        for payload in (
            s.start(),
            s.prompt("Make the double jump configurable."),
            s.pre("Grep", args),
            s.post("Grep", args, response),
            s.pre("Grep", args),
            s.post("Grep", args, response),
            s.pre("Grep", args),
        )
    ]
    assert answers[:5] == [None] * 5
    stopped = answers[5]
    assert stopped is not None
    assert stopped["decision"] == "block"
    assert "Fingerprint: AGENT::main::grep::double jump@src::" in stopped["reason"]
    refused = answers[6]
    assert refused is not None
    assert refused["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert (
        "AGENT::main::grep::double jump@src::"
        in (refused["hookSpecificOutput"]["permissionDecisionReason"])
    )


def test_parallel_post_tool_use_processes_lose_no_step(env: dict[str, str]) -> None:
    """16 PostToolUse processes of one tool batch at once: all 16 steps are kept, in the log too."""
    s = ClaudeSession("batch")
    payloads = [s.read(f"/home/dev/game/src/f{i}.ts", f"content {i}\n") for i in range(16)]
    procs = [
        subprocess.Popen(
            [str(ANTILOOP), "hook", "claude-code"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        for _ in payloads
    ]
    for proc, payload in zip(procs, payloads, strict=True):
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(payload).encode())
        proc.stdin.close()
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stderr is not None
        with proc.stdout, proc.stderr:
            out, err = proc.stdout.read(), proc.stderr.read()
        assert proc.wait(timeout=120) == 0, err.decode()
        assert out == b"", out
    store = open_store(env["ANTILOOP_STORE"])
    state = store.peek("batch")
    assert state is not None
    assert state.steps == 16
    steps = [r for r in store.audit_records("batch") if r.kind == "step"]
    assert sorted(r.index for r in steps) == list(range(16))
    assert not store.verify_audit()


@pytest.mark.parametrize("data", [b"", b"not json at all", b'{"hook_event_name": 3}'])
def test_a_hook_process_with_bad_input_exits_0_with_a_message(
    data: bytes, env: dict[str, str]
) -> None:
    """Malformed or empty stdin: exit 0, a systemMessage, a line on stderr; closed: exit 2."""
    proc = spawn(data, env)
    answer = spawned_json(proc)
    assert answer is not None
    assert "nothing was checked" in answer["systemMessage"]
    assert b"antiloop hook:" in proc.stderr
    closed = spawn(data, {**env, "ANTILOOP_FAIL": "closed"})
    assert closed.returncode == 2
    assert closed.stdout == b""
    assert b"ANTILOOP_FAIL=closed" in closed.stderr


def test_a_hook_process_with_an_unwritable_store_answers(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """A store that cannot be opened: the process answers 0 with the problem named."""
    (tmp_path / "file").write_text("x")
    bad = {**env, "ANTILOOP_STORE": f"sqlite:///{tmp_path / 'file' / 'antiloop.db'}"}
    answer = spawned_json(spawn(ClaudeSession("ro").pre("Read", {"file_path": "/a"}), bad))
    assert answer is not None
    assert "store" in answer["systemMessage"]
    closed = spawned_json(
        spawn(
            ClaudeSession("ro").pre("Read", {"file_path": "/a"}), {**bad, "ANTILOOP_FAIL": "closed"}
        )
    )
    assert closed is not None
    assert closed["hookSpecificOutput"]["permissionDecision"] == "deny"
