"""Record a Claude Code session with the real ``claude`` CLI and a scripted model on 127.0.0.1.

Needs the Claude Code CLI (``npm install @anthropic-ai/claude-code``; the native binary of the
platform package is enough). Nothing leaves the machine: ``ANTHROPIC_BASE_URL`` points the CLI
at a scripted Anthropic Messages API server bound to 127.0.0.1 on a free port, which answers each
turn of the main agent with the next step of its script (streamed as the API streams: text, then
a ``tool_use`` block); any other request the CLI makes (a title, a summary) gets a short text.
The CLI runs its real agent loop and tools (Bash, Read, Edit) in a scratch workspace, with
``HOME`` set to a scratch folder, and writes its transcript as it always does.

    python record.py OUT_DIR [CLAUDE_BIN]

writes ``OUT_DIR/<session id>.jsonl``, the transcript as Claude Code wrote it, with the scratch
paths replaced by ``/workspace`` and ``/home/user`` so that it does not depend on where it was
recorded.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

CALC = "def add(a, b):\n    return a - b\n"
TEST_CALC = (
    "from calc import add\n\nassert add(2, 3) == 5, f'add(2, 3) gave {add(2, 3)}'\nprint('ok')\n"
)
TASK = "The test in test_calc.py fails. Fix add() in calc.py so that it passes."

SCRIPT: list[tuple[str, str | None, dict[str, Any]]] = [
    ("Let me look at the workspace.", "Bash", {"command": "ls", "description": "List files"}),
    ("Now the code.", "Read", {"file_path": "{workspace}/calc.py"}),
    ("I will run the test.", "Bash", {"command": "python test_calc.py", "description": "Test"}),
    ("Again, to see it.", "Bash", {"command": "python test_calc.py", "description": "Test"}),
    ("Once more.", "Bash", {"command": "python test_calc.py", "description": "Test"}),
    (
        "add() subtracts; it must add.",
        "Edit",
        {
            "file_path": "{workspace}/calc.py",
            "old_string": "return a - b",
            "new_string": "return a + b",
        },
    ),
    ("Now the test again.", "Bash", {"command": "python test_calc.py", "description": "Test"}),
    ("add() now adds, and test_calc.py passes.", None, {}),
]
"""Steps 0-6: the same failing ``python test_calc.py`` at steps 2, 3 and 4; then the answer."""


def _sse(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


class ScriptedAnthropic:
    """An Anthropic Messages API server on 127.0.0.1 that plays one script to the main agent."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = str(workspace)
        self.turn = 0
        self.lock = threading.Lock()
        self.requests: list[str] = []
        model = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                model.requests.append(self.path)
                if "count_tokens" in self.path:
                    self._json({"input_tokens": 1000})
                    return
                blocks, stop = model.answer(request)
                if request.get("stream"):
                    self._stream(request, blocks, stop)
                else:
                    self._json(model.message(request, blocks, stop))

            def do_GET(self) -> None:
                self._json({"data": []})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _json(self, value: dict[str, Any]) -> None:
                body = json.dumps(value).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _stream(
                self, request: dict[str, Any], blocks: list[dict[str, Any]], stop: str
            ) -> None:
                chunks = [
                    _sse(
                        "message_start",
                        {"type": "message_start", "message": model.message(request, [], None)},
                    )
                ]
                for n, block in enumerate(blocks):
                    if block["type"] == "text":
                        start = {"type": "text", "text": ""}
                        delta = {"type": "text_delta", "text": block["text"]}
                    else:
                        start = {**block, "input": {}}
                        delta = {
                            "type": "input_json_delta",
                            "partial_json": json.dumps(block["input"]),
                        }
                    chunks.append(
                        _sse(
                            "content_block_start",
                            {"type": "content_block_start", "index": n, "content_block": start},
                        )
                    )
                    chunks.append(
                        _sse(
                            "content_block_delta",
                            {"type": "content_block_delta", "index": n, "delta": delta},
                        )
                    )
                    chunks.append(
                        _sse("content_block_stop", {"type": "content_block_stop", "index": n})
                    )
                chunks.append(
                    _sse(
                        "message_delta",
                        {
                            "type": "message_delta",
                            "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": 20 + 10 * len(blocks)},
                        },
                    )
                )
                chunks.append(_sse("message_stop", {"type": "message_stop"}))
                body = b"".join(chunks)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> ScriptedAnthropic:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, request: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        """The next script step for the main agent (its request offers Bash); else a text."""
        tools = {t.get("name") for t in request.get("tools") or []}
        if "Bash" not in tools:
            return [{"type": "text", "text": "Fix add() in calc.py"}], "end_turn"
        with self.lock:
            turn = self.turn
            self.turn += 1
        if turn >= len(SCRIPT):
            return [{"type": "text", "text": "Done."}], "end_turn"
        thought, tool, arguments = SCRIPT[turn]
        blocks: list[dict[str, Any]] = [{"type": "text", "text": thought}]
        if tool is None:
            return blocks, "end_turn"
        text = json.dumps(arguments).replace("{workspace}", self.workspace)
        blocks.append(
            {
                "type": "tool_use",
                "id": f"toolu_scripted_{turn:02d}",
                "name": tool,
                "input": json.loads(text),
            }
        )
        return blocks, "tool_use"

    def message(
        self, request: dict[str, Any], blocks: list[dict[str, Any]], stop: str | None
    ) -> dict[str, Any]:
        prompt = len(json.dumps(request.get("messages", []))) // 4
        return {
            "id": f"msg_scripted_{self.turn:02d}_{len(self.requests):03d}",
            "type": "message",
            "role": "assistant",
            "model": request.get("model", "claude-scripted"),
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": prompt, "output_tokens": 1},
        }


def record(out: Path, claude: str) -> Path:
    """Run one scripted session; copy its transcript to ``out``; return the copy's path."""
    scratch = Path(tempfile.mkdtemp(prefix="cc-rec-"))
    workspace = scratch / "workspace"
    home = scratch / "home"
    workspace.mkdir()
    home.mkdir()
    (workspace / "calc.py").write_text(CALC)
    (workspace / "test_calc.py").write_text(TEST_CALC)
    try:
        with ScriptedAnthropic(workspace) as model:
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": str(home),
                "ANTHROPIC_BASE_URL": model.base_url,
                "ANTHROPIC_API_KEY": "sk-ant-scripted-not-a-key",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_ERROR_REPORTING": "1",
            }
            done = subprocess.run(
                [claude, "-p", TASK, "--allowedTools", "Bash Read Edit", "--max-turns", "20"],
                cwd=workspace,
                env=env,
                capture_output=True,
                text=True,
                timeout=240,
                check=False,
            )
        if done.returncode != 0:
            raise SystemExit(f"claude exited {done.returncode}: {done.stderr[-2000:]}")
        transcripts = sorted((home / ".claude" / "projects").rglob("*.jsonl"))
        main = [t for t in transcripts if "subagents" not in t.parts]
        if len(main) != 1:
            raise SystemExit(f"expected one transcript, found {transcripts}")
        text = main[0].read_text()
        for old, new in ((str(workspace), "/workspace"), (str(home), "/home/user")):
            text = text.replace(old, new)
        target = out / main[0].name
        target.write_text(text)
        return target
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: record.py OUT_DIR [CLAUDE_BIN]", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    claude = argv[1] if len(argv) == 2 else (shutil.which("claude") or "claude")
    print(f"recorded {record(out, claude)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
