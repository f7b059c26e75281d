"""Record OpenHands agent-SDK runs with the real SDK and a scripted model on 127.0.0.1.

Needs ``openhands-sdk`` and ``openhands-tools`` (Python >= 3.12; ``pip install
'antiloop[openhands]'``). Nothing leaves the machine: the model is a scripted OpenAI-compatible
server bound to 127.0.0.1 on a free port, which answers each chat completion with the next turn
of its script (an assistant message with tool calls). The SDK runs its real agent loop, its real
terminal and file-editor tools in a scratch workspace, and persists the conversation as it
always does.

    python record.py OUT_DIR

writes, per scripted run NAME (``loop``, ``clean``):

* ``OUT_DIR/NAME/`` the SDK's own persisted conversation (``base_state.json`` and
  ``events/event-NNNNN-<id>.json``), copied as the SDK wrote it;
* ``OUT_DIR/NAME.events.json`` the event list, ``event.model_dump(mode="json")`` per event, as
  ``conversation.state.events`` holds it;
* ``OUT_DIR/NAME.events.jsonl`` the same events, one per line;
* ``OUT_DIR/NAME.steps.jsonl`` the run as docs/protocol.md section 2 step events (generic JSONL),
  written live by a conversation callback as each tool result arrives, the way a host wires a
  step stream to antiloop;
* ``OUT_DIR/eval_output.jsonl`` both runs as eval records, one per line, with the fields of the
  OpenHands benchmarks' ``EvalOutput`` (``instance_id``, ``instruction``, ``history``,
  ``metrics``, ``error``, ``test_result``).

Paths inside the recorded events (the scratch workspace) are replaced by ``/workspace`` so that
the files do not depend on where they were recorded.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")

WORKSPACE_NAME = "/workspace"

CALC = "def add(a, b):\n    return a - b\n"
TEST_CALC = (
    "from calc import add\n\nassert add(2, 3) == 5, f'add(2, 3) gave {add(2, 3)}'\nprint('ok')\n"
)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """One scripted tool call (its id is given when the turn is served).

    ``{workspace}`` in an argument stands for the scratch workspace's absolute path.
    """
    return {"name": name, "arguments": arguments}


LOOP_TASK = "The test in test_calc.py fails. Fix add() in calc.py so that it passes."
LOOP_SCRIPT: list[tuple[str, list[dict[str, Any]]]] = [
    (
        "Let me look at the workspace and the code first.",
        [
            call("terminal", command="ls"),
            call("file_editor", command="view", path="{workspace}/calc.py"),
        ],
    ),
    ("I will run the test.", [call("terminal", command="python test_calc.py")]),
    ("Let me run it again to see the failure.", [call("terminal", command="python test_calc.py")]),
    ("Running the test once more.", [call("terminal", command="python test_calc.py")]),
    ("I will use a test runner tool.", [call("run_tests", path="test_calc.py")]),
    (
        "add() subtracts; it must add.",
        [
            call(
                "file_editor",
                command="str_replace",
                path="{workspace}/calc.py",
                old_str="return a - b",
                new_str="return a + b",
            )
        ],
    ),
    ("Now the test again.", [call("terminal", command="python test_calc.py")]),
    ("Done.", [call("finish", message="add() now adds; test_calc.py passes.")]),
]
"""Steps 0-7 (the unknown ``run_tests`` call is rejected by the SDK and is no step): the same
failing ``python test_calc.py`` at steps 2, 3 and 4."""

CLEAN_TASK = "Write greet.py with a function greet(name) that returns 'Hello, <name>!'."
CLEAN_SCRIPT: list[tuple[str, list[dict[str, Any]]]] = [
    ("Let me see what is here.", [call("terminal", command="ls -la")]),
    (
        "I will create the file.",
        [
            call(
                "file_editor",
                command="create",
                path="{workspace}/greet.py",
                file_text="def greet(name):\n    return f'Hello, {name}!'\n",
            )
        ],
    ),
    (
        "And check it.",
        [call("terminal", command="python -c \"from greet import greet; print(greet('Ada'))\"")],
    ),
    (
        "Let me view the file once.",
        [call("file_editor", command="view", path="{workspace}/greet.py")],
    ),
    ("Finished.", [call("finish", message="greet.py is written and prints Hello, Ada!")]),
]


class ScriptedModel:
    """An OpenAI-compatible chat-completions server on 127.0.0.1 that plays one script."""

    def __init__(self, script: list[tuple[str, list[dict[str, Any]]]], workspace: Path) -> None:
        self.script = list(script)
        self.workspace = str(workspace)
        self.turn = 0
        self.lock = threading.Lock()
        model = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                body = json.dumps(model.answer(request)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            turn = self.turn
            self.turn += 1
        if turn < len(self.script):
            thought, calls = self.script[turn]
        else:
            thought, calls = "Out of script.", [call("finish", message="out of script")]
        tool_calls = [
            {
                "id": f"call_{turn:02d}_{n}",
                "type": "function",
                "function": {
                    "name": c["name"],
                    "arguments": json.dumps(c["arguments"]).replace("{workspace}", self.workspace),
                },
            }
            for n, c in enumerate(calls)
        ]
        prompt = sum(len(json.dumps(m)) for m in request.get("messages", [])) // 4
        completion = len(json.dumps(tool_calls)) // 4 + len(thought) // 4
        return {
            "id": f"chatcmpl-scripted-{turn:02d}",
            "object": "chat.completion",
            "created": 1767225600 + turn,
            "model": "scripted-model",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {"role": "assistant", "content": thought, "tool_calls": tool_calls},
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }


class StepTap:
    """A conversation callback writing each answered tool call as a step event line."""

    def __init__(self, session: str) -> None:
        self.session = session
        self.calls: dict[str, Any] = {}
        self.lines: list[dict[str, Any]] = []

    def __call__(self, event: Any) -> None:
        from openhands.sdk.event import ActionEvent, AgentErrorEvent, ObservationEvent

        if isinstance(event, ActionEvent) and event.action is not None:
            self.calls[event.tool_call_id] = event
            return
        if not isinstance(event, ObservationEvent | AgentErrorEvent):
            return
        action = self.calls.pop(event.tool_call_id, None)
        if action is None:
            return
        line: dict[str, Any] = {
            "session": self.session,
            "agent": "openhands",
            "id": event.tool_call_id,
            "tool": action.tool_name,
            "args": json.loads(action.tool_call.arguments),
        }
        thought = "".join(t.text for t in action.thought)
        if thought:
            line["message"] = thought
        if isinstance(event, AgentErrorEvent):
            line["error"] = event.error
        else:
            observation = event.observation
            key = "error" if observation.is_error else "output"
            line[key] = observation.text
            exit_code = getattr(observation, "exit_code", None)
            if exit_code is not None:
                line["exit_code"] = exit_code
        self.lines.append(line)


def record_run(
    name: str, task: str, script: list[tuple[str, list[dict[str, Any]]]], out: Path
) -> dict[str, Any]:
    """Run the SDK agent on one script; write its files under ``out``; return its eval record."""
    from openhands.sdk import LLM, Agent, Conversation
    from openhands.sdk.tool import Tool
    from openhands.tools.file_editor import FileEditorTool
    from openhands.tools.terminal import TerminalTool
    from pydantic import SecretStr

    scratch = Path(tempfile.mkdtemp(prefix=f"oh-sdk-{name}-"))
    workspace = scratch / "workspace"
    workspace.mkdir()
    (workspace / "calc.py").write_text(CALC)
    (workspace / "test_calc.py").write_text(TEST_CALC)
    persist = scratch / "conversations"
    try:
        with ScriptedModel(script, workspace) as model:
            llm = LLM(
                model="openai/scripted-model",
                base_url=model.base_url,
                api_key=SecretStr("not-a-key"),
                usage_id="agent",
                num_retries=0,
                input_cost_per_token=1e-6,
                output_cost_per_token=4e-6,
            )
            agent = Agent(
                llm=llm, tools=[Tool(name=TerminalTool.name), Tool(name=FileEditorTool.name)]
            )
            tap = StepTap(f"scripted-{name}")
            conversation = Conversation(
                agent=agent,
                callbacks=[tap],
                workspace=str(workspace),
                persistence_dir=str(persist),
                max_iteration_per_run=len(script) + 5,
                visualizer=None,
            )
            conversation.send_message(task)
            conversation.run()
            events = [e.model_dump(mode="json") for e in conversation.state.events]
            metrics = conversation.conversation_stats.get_combined_metrics().model_dump(mode="json")
            conversation.close()
        stored = next(p for p in persist.iterdir() if p.is_dir())
        target = out / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(stored, target)
        replace = [(str(workspace), WORKSPACE_NAME), (str(scratch), "/tmp/recording")]
        for path in sorted(target.rglob("*.json")):
            path.write_text(_relocate(path.read_text(), replace))
        events = json.loads(_relocate(json.dumps(events), replace))
        steps = json.loads(_relocate(json.dumps(tap.lines), replace))
        steps[0]["goal"] = task
        with (out / f"{name}.steps.jsonl").open("w") as lines:
            for step in steps:
                lines.write(json.dumps(step) + "\n")
        (out / f"{name}.events.json").write_text(json.dumps(events, indent=1) + "\n")
        with (out / f"{name}.events.jsonl").open("w") as lines:
            for event in events:
                lines.write(json.dumps(event) + "\n")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {
        "instance_id": f"scripted__{name}",
        "attempt": 1,
        "test_result": {},
        "instruction": task,
        "metadata": {"llm": {"model": "openai/scripted-model"}, "max_iterations": len(script) + 5},
        "history": events,
        "metrics": metrics,
        "error": None,
    }


def _relocate(text: str, replace: list[tuple[str, str]]) -> str:
    for old, new in replace:
        text = text.replace(old, new)
    return text


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: record.py OUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    records = [
        record_run("loop", LOOP_TASK, LOOP_SCRIPT, out),
        record_run("clean", CLEAN_TASK, CLEAN_SCRIPT, out),
    ]
    with (out / "eval_output.jsonl").open("w") as lines:
        for record in records:
            lines.write(json.dumps(record) + "\n")
    print(f"recorded {len(records)} runs in {time.monotonic() - started:.1f} s to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
