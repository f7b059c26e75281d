"""antiloop in a Claude Agent SDK session, offline: a scripted model on 127.0.0.1 plays Claude.

Run: ``pip install -e '.[claude-agent-sdk]'``, then
``python examples/claude_agent_sdk_session.py``. Node is not needed: the SDK bundles Claude
Code. With a real key, drop the scripted model and ``ANTHROPIC_BASE_URL``:
``hooks=antiloop_hooks()`` is all antiloop needs.

The model runs ``wc -l app.py`` three times. The second result repeats the first, so the
PostToolUse hook tells the model so, with the loop's fingerprint; the third call is refused
before it runs. Every other call goes on as the SDK's own permissions say (``allowed_tools``).
``antiloop_messages`` charges the SDK's ``ResultMessage`` (its cost) to the session's
``[budgets]``, and the example prints what the session spent.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, ResultMessage, UserMessage, query

from antiloop.budgets import spent
from antiloop.integrations.claude_agent_sdk import antiloop_hooks, antiloop_messages
from antiloop.stores import open_store

CALL = {"type": "tool_use", "name": "Bash", "input": {"command": "wc -l app.py"}}


def _events(content: dict[str, Any], stop: str) -> bytes:
    """One Anthropic Messages answer as server-sent events."""
    block = {**content, "input": {}} if content["type"] == "tool_use" else {**content, "text": ""}
    if content["type"] == "tool_use":
        delta = {"type": "input_json_delta", "partial_json": json.dumps(content["input"])}
    else:
        delta = {"type": "text_delta", "text": content["text"]}
    message = {
        "id": "msg",
        "type": "message",
        "role": "assistant",
        "model": "scripted",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    events = [
        ("message_start", {"type": "message_start", "message": message}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        ),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop},
                "usage": {"output_tokens": 1},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "".join(f"event: {n}\ndata: {json.dumps(d)}\n\n" for n, d in events).encode()


class ScriptedClaude(BaseHTTPRequestHandler):
    """Calls Bash until three tool results are in the conversation, then says it is done."""

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        results = sum(
            1
            for m in body.get("messages", [])
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        )
        uses_tools = any(t.get("name") == "Bash" for t in body.get("tools", []))
        if uses_tools and results < 3:
            data = _events({**CALL, "id": f"toolu_{results}"}, "tool_use")
        else:
            data = _events({"type": "text", "text": "Done."}, "end_turn")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


async def main() -> None:
    """One session: print each tool result the model gets, and its last answer."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedClaude)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "app.py").write_text("print('hi')\n")
        (Path(tmp) / "antiloop.toml").write_text("[budgets.session]\nhard_usd = 1.0\n")
        store = f"sqlite:///{tmp}/antiloop.db"
        options = ClaudeAgentOptions(
            cwd=tmp,
            allowed_tools=["Bash"],
            setting_sources=[],
            hooks=antiloop_hooks(store=store),  # type: ignore[arg-type]
            env={
                "HOME": tmp,
                "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{server.server_address[1]}",
                "ANTHROPIC_API_KEY": "sk-ant-offline",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            },
        )
        messages = query(prompt="How long is app.py?", options=options)
        async for message in antiloop_messages(messages, store=store):
            if isinstance(message, ResultMessage):
                opened = open_store(store)
                now = spent(opened, message.session_id)
                opened.close()
                print(f"spend: ${now.cost_usd:.6f}, {now.tokens} tokens")
            elif isinstance(message, UserMessage) and isinstance(message.content, list):
                for block in message.content:
                    text = getattr(block, "content", None)
                    if isinstance(text, str):
                        print("tool result:", text[:200])
            elif isinstance(message, AssistantMessage):
                for block in message.content:
                    if hasattr(block, "text"):
                        print("model:", block.text)
    server.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
