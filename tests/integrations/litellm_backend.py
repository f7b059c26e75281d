"""A scripted OpenAI-compatible chat backend for the LiteLLM proxy tests (and the example).

Each request to ``/v1/chat/completions`` gets the next scripted answer: the same tool call
``times`` times (ids ``call_1``, ``call_2``...), then the text "done". Every answer reports
``100 * n`` prompt tokens and 7 completion tokens. It records each request body it got.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedBackend:
    """A chat-completions server on 127.0.0.1 (port 0) in a thread; use as a context manager."""

    def __init__(self, tool: str, args: dict[str, Any], times: int) -> None:
        self.tool, self.args, self.times = tool, args, times
        self.requests: list[dict[str, Any]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedBackend:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reset(self, tool: str, args: dict[str, Any], times: int) -> None:
        """Script a new conversation."""
        self.tool, self.args, self.times = tool, args, times
        self.requests.clear()

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The next scripted chat completion."""
        self.requests.append(body)
        turn = len(self.requests)
        if turn <= self.times:
            call = {
                "id": f"call_{turn}",
                "type": "function",
                "function": {"name": self.tool, "arguments": json.dumps(self.args)},
            }
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": "done"}, "stop"
        return {
            "id": f"chatcmpl-{turn}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 100 * turn, "completion_tokens": 7, "total_tokens": 0},
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        backend = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                data = json.dumps(backend.answer(body)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler
