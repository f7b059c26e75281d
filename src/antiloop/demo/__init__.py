"""``antiloop demo``: three scripted agents loop on a sample project; the guard stops each one.

The tools really run on a copy of the sample project shipped in this package (``project/``):
grep and read look at the files, edit changes them (and the guard sees the file's hash after),
and the tests run with ``python -m unittest``. Only the agents' choices are scripted.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from antiloop._color import Painter, wants_colour
from antiloop.config import GuardConfig
from antiloop.core.verdict import Action, Verdict
from antiloop.demo.tools import run_tool
from antiloop.guard import Guard

PROJECT = Path(__file__).with_name("project")


@dataclass(frozen=True, slots=True)
class Call:
    """One scripted tool call, with what the agent says while making it."""

    tool: str
    args: dict[str, Any]
    message: str


@dataclass(frozen=True, slots=True)
class Scene:
    """One agent's task and the calls it makes."""

    agent: str
    session: str
    goal: str
    story: str
    calls: tuple[Call, ...]


TESTS = "python -m unittest discover -s tests"

SCENES = (
    Scene(
        "explorer",
        "demo-1-explorer",
        "Find where the double jump is implemented.",
        "searches for the double jump, then searches again with an equivalent pattern",
        (
            Call("Grep", {"pattern": "double.*Jump", "path": "game"}, "Searching for it."),
            Call("Grep", {"pattern": "doubleJump", "path": "./game/"}, "Searching again."),
            Call("Grep", {"pattern": "double_jump", "path": "game"}, "Once more."),
        ),
    ),
    Scene(
        "qa-validator",
        "demo-2-qa",
        "Check whether the jump tests pass.",
        "runs the failing tests, then runs them again hoping for another result",
        (
            Call("Bash", {"command": TESTS}, "Running the tests."),
            Call("Bash", {"command": f"  {TESTS} "}, "Running them again."),
        ),
    ),
    Scene(
        "code-writer",
        "demo-3-writer",
        "Raise the jump height to 2.",
        "fixes the config, then applies the same edit again: nothing changes",
        (
            Call("Read", {"file_path": "game/config.py"}, "Reading the config."),
            Call(
                "Edit",
                {
                    "file_path": "game/config.py",
                    "old_string": "JUMP_HEIGHT = 1",
                    "new_string": "JUMP_HEIGHT = 2",
                },
                "Raising the jump height.",
            ),
            Call(
                "Edit",
                {
                    "file_path": "game/config.py",
                    "old_string": "JUMP_HEIGHT = 1",
                    "new_string": "JUMP_HEIGHT = 2",
                },
                "Making sure the edit is in.",
            ),
        ),
    ),
    Scene(
        "explorer",
        "demo-4-explorer",
        "Find every place that uses the jump height.",
        "goes back and forth between a search and a file: an A-B cycle",
        (
            Call("Grep", {"pattern": "JUMP_HEIGHT", "path": "game"}, "Where is it used?"),
            Call("Read", {"file_path": "game/config.py"}, "Let me look at the config."),
            Call("Grep", {"pattern": "JUMP_HEIGHT", "path": "game"}, "Where is it used?"),
            Call("Read", {"file_path": "game/config.py"}, "Let me look at the config."),
            Call("Grep", {"pattern": "JUMP_HEIGHT", "path": "game"}, "Where is it used?"),
        ),
    ),
    Scene(
        "qa-validator",
        "demo-5-qa",
        "Make the jump tests pass.",
        "checks the tests, the code and the config, then reports the goal reached: a success",
        (
            Call("Read", {"file_path": "tests/test_player.py"}, "Reading the jump tests first."),
            Call("Read", {"file_path": "game/player.py"}, "Reading how the player jumps."),
            Call("Read", {"file_path": "game/config.py"}, "Checking the jump height."),
            Call("Grep", {"pattern": "JUMP_HEIGHT", "path": "game"}, "Looking for other uses."),
            Call(
                "Bash",
                {"command": f"{TESTS} -p 'test_*.py'"},
                "The jump tests pass now: the jump height is 2, as they expect.",
            ),
        ),
    ),
    Scene(
        "explorer",
        "demo-6-explorer",
        "Find where the jump sound is played.",
        "reads file after file and keeps saying the same thing: stalled",
        (
            Call(
                "Read", {"file_path": "README.md"}, "Attempt 1: no jump sound here; still looking."
            ),
            Call(
                "Read",
                {"file_path": "game/player.py"},
                "Attempt 2: no jump sound here; still looking.",
            ),
            Call(
                "Read",
                {"file_path": "game/config.py"},
                "Attempt 3: no jump sound here; still looking.",
            ),
            Call(
                "Read",
                {"file_path": "game/__init__.py"},
                "Attempt 4: no jump sound here; still looking.",
            ),
            Call(
                "Read",
                {"file_path": "tests/__init__.py"},
                "Attempt 5: no jump sound here; still looking.",
            ),
        ),
    ),
)


def _short(text: str | None, width: int) -> str:
    line = " ".join((text or "").split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _call_text(call: Call) -> str:
    if "command" in call.args:
        return f"{call.tool}: {call.args['command'].strip()}"
    if "pattern" in call.args:
        return f"{call.tool} {call.args['pattern']!r} in {call.args['path']}"
    return f"{call.tool} {call.args.get('file_path', '')}"


def run_demo(
    *,
    as_json: bool = False,
    color: str = "auto",
    out: Any = None,
    store: str | None = None,
    embedder: str = "auto",
) -> int:
    """Play every scene against a fresh copy of the sample project; returns 0.

    The guard runs on the embedded defaults: a SQLite store of the demo's own (``store``, by
    default a new folder under the system's temporary one, never the user's
    ``~/.antiloop`` nor ``ANTILOOP_STORE``; it stays, so ``antiloop log`` shows the demo's
    sessions afterwards) and the shipped MiniLM model when the ``embed`` extra is installed.
    """
    out = out or sys.stdout
    paint = Painter(not as_json and wants_colour(out, color))
    url = store or demo_store()
    guard = Guard(config=GuardConfig(embedder=embedder), store=url)
    run_id = f"demo-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    scenes = [replace(scene, session=f"{run_id}-{scene.session[5:]}") for scene in SCENES]
    stops: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="antiloop-demo-") as tmp:
        root = Path(tmp, "jumpgame")
        shutil.copytree(PROJECT, root, ignore=shutil.ignore_patterns("__pycache__"))
        if not as_json:
            _intro(out, paint, guard)
        for number, scene in enumerate(scenes, 1):
            if not as_json:
                out.write(
                    f"\n{paint(f'Scene {number}', 'bold')}: {paint(scene.agent, 'cyan')} "
                    f"{scene.story}.\n  goal: {scene.goal}\n"
                )
            stop = _play(scene, guard, root, out, paint, as_json)
            if stop is not None:
                stops.append(stop)
    guard.store.close()
    summary = {
        "scenes": len(SCENES),
        "stopped": len(stops),
        "fingerprints": [s["fingerprint"] for s in stops],
        "store": url,
        "embedder": guard.embedder.id if _loaded(guard) else embedder,
        "sessions": [scene.session for scene in scenes],
    }
    if as_json:
        out.write(json.dumps({"summary": summary}) + "\n")
    else:
        command = _command()
        out.write(
            f"\n{paint('Done', 'bold')}: {len(stops)} of {len(SCENES)} runs stopped: the loops at "
            "their second repetition, one run by its goal reached, one stalled. Each fingerprint "
            "is the same on every machine; search your logs for it.\n"
            f"{paint('Audit log', 'bold')}: every step and verdict is in {url} "
            f"(semantic checks: {summary['embedder']}). See one run with "
            f"`{command} log --store {url} {scenes[0].session}`, check the chain with "
            f"`{command} log verify --store {url}`.\n"
        )
    return 0


def demo_store() -> str:
    """A SQLite store of the demo's own: a new private folder under the temporary one."""
    folder = tempfile.mkdtemp(prefix="antiloop-demo-")
    return f"sqlite:///{Path(folder, 'demo.db').as_posix().lstrip('/')}"


def _command() -> str:
    """How to run this antiloop from here: ``antiloop`` when that is on the PATH, else its path."""
    beside = Path(sys.executable).parent / "antiloop"
    found = shutil.which("antiloop")
    if found and Path(found).resolve() == beside.resolve():
        return "antiloop"
    if beside.exists():
        relative = os.path.relpath(beside)
        return relative if not relative.startswith("..") else str(beside)
    return f"{sys.executable} -m antiloop"


def _loaded(guard: Guard) -> bool:
    """True when the guard's embedder was loaded (a scene used the semantic checks)."""
    return getattr(guard.embedder, "_inner", True) is not None


def _intro(out: Any, paint: Painter, guard: Guard) -> None:
    out.write(
        paint("antiloop demo", "bold")
        + ": three scripted agents work on a tiny game; their tools really run.\n"
        + paint(f"policy: {guard.detector!r}", "dim")
        + "\n"
    )


def _play(
    scene: Scene, guard: Guard, root: Path, out: Any, paint: Painter, as_json: bool
) -> dict[str, Any] | None:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    for number, call in enumerate(scene.calls):
        before = guard.check(call.tool, call.args, session=scene.session, agent=scene.agent)
        if before.action >= Action.BLOCK:
            _show(out, paint, as_json, scene, number, call, None, before)
            return _stop_record(scene, before)
        result = run_tool(call.tool, call.args, root, env)
        step = guard.step(
            call.tool,
            call.args,
            session=scene.session,
            agent=scene.agent,
            goal=scene.goal,
            message=call.message,
            cwd=str(root),
            **result,
        )
        verdict = guard.record(step)
        _show(out, paint, as_json, scene, number, call, result, verdict)
        if verdict.action >= Action.BLOCK:
            return _stop_record(scene, verdict)
    return None


def _stop_record(scene: Scene, verdict: Verdict) -> dict[str, Any]:
    return {"agent": scene.agent, "session": scene.session, "fingerprint": verdict.fingerprint}


def _show(
    out: Any,
    paint: Painter,
    as_json: bool,
    scene: Scene,
    number: int,
    call: Call,
    result: dict[str, Any] | None,
    verdict: Verdict,
) -> None:
    shown = (result or {}).get("error") or (result or {}).get("output")
    if as_json:
        line = {
            "agent": scene.agent,
            "session": scene.session,
            "step": number,
            "tool": call.tool,
            "args": call.args,
            "ran": result is not None,
            "result": _short(shown, 200),
            "verdict": {**verdict.to_wire(number), "hint": verdict.hint},
        }
        out.write(json.dumps(line, ensure_ascii=False) + "\n")
        return
    word = verdict.action.wire
    colour = {"continue": "green", "ask": "yellow"}.get(word, "red")
    label = word if verdict.detector is None else f"{word} ({verdict.detector})"
    ran = _short(shown, 38) if result is not None else "(not run: refused)"
    out.write(
        f"  {number:>2}  {_short(_call_text(call), 44):<44}  {ran:<38}  {paint(label, colour)}\n"
    )
    if verdict.action >= Action.ASK:
        rows = [("reason", verdict.reason), ("agent told", verdict.hint)]
        if verdict.detector != "goal":  # a goal reached is a success: nothing to escalate
            rows.insert(0, ("fingerprint", str(verdict.fingerprint)))
            rows.append(("escalated", f"to the {verdict.escalate_to or 'human'}"))
        for name, text in rows:
            out.write(f"      {paint(f'{name:<12}', 'bold')} {text}\n")
