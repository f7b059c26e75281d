"""antiloop at the LiteLLM proxy, offline: the agent is unchanged, the gateway stops its loop.

Run: ``pip install -e '.[litellm]'`` then ``python examples/litellm_gateway.py``.

A scripted OpenAI-compatible backend stands in for the LLM; the LiteLLM proxy runs in this
process (Starlette's ``TestClient``) with ``AntiloopGuardrail`` in its config; a plain agent
loop (no antiloop in it) talks to the proxy and runs the tools the model asks for.

1. the model keeps asking for the same job status and gets the same answer: at the second
   identical result the model reads antiloop's hint instead, and when it asks again the
   gateway answers with the reason in place of the tool call, so the agent stops;
2. the same calls with a new status each time: progress, not a loop.

``--json`` prints what happened as one JSON object (the tests read it).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network at import
os.environ.setdefault("LITELLM_MASTER_KEY", "sk-antiloop-example-0123456789abcdef")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integrations"))

from litellm_backend import ScriptedBackend

CONFIG = """
model_list:
  - model_name: scripted
    litellm_params:
      model: openai/scripted
      api_base: {url}
      api_key: sk-scripted
guardrails:
  - guardrail_name: antiloop
    litellm_params:
      guardrail: antiloop.integrations.litellm.AntiloopGuardrail
      mode: [pre_call, post_call]
      default_on: true
"""

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "job_status",
            "description": "The status of a job.",
            "parameters": {"type": "object", "properties": {"job": {"type": "string"}}},
        },
    }
]


def agent_run(client: Any, task: str, tool: Callable[..., str]) -> dict[str, Any]:
    """A plain tool loop over the chat API: no antiloop in it."""
    auth = {"Authorization": f"Bearer {os.environ['LITELLM_MASTER_KEY']}"}
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    ran = 0
    for _ in range(10):
        reply = client.post(
            "/v1/chat/completions",
            json={"model": "scripted", "messages": messages, "tools": TOOLS},
            headers=auth,
        )
        reply.raise_for_status()
        message = reply.json()["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        messages.append(
            {"role": "assistant", "content": message.get("content"), "tool_calls": calls}
        )
        if not calls:
            return {"answer": message.get("content"), "ran": ran}
        for call in calls:
            ran += 1
            result = tool(**json.loads(call["function"]["arguments"]))
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    return {"answer": None, "ran": ran}


def main() -> dict[str, Any]:
    """Run both scenes through the proxy; return what happened."""
    from fastapi.testclient import TestClient
    from litellm.proxy.proxy_server import app

    from antiloop.integrations.litellm import AntiloopGuardrail
    from antiloop.testing import RecordingListener

    with (
        ScriptedBackend("job_status", {"job": "42"}, 5) as backend,
        tempfile.TemporaryDirectory() as tmp,
    ):
        config = Path(tmp) / "config.yaml"
        config.write_text(CONFIG.format(url=backend.url))
        os.environ["CONFIG_FILE_PATH"] = str(config)
        with TestClient(app) as client:
            import litellm

            (guardrail,) = [c for c in litellm.callbacks if isinstance(c, AntiloopGuardrail)]
            seen = RecordingListener()
            guardrail.guard.listeners.append(seen)

            loop = agent_run(client, "Is job 42 done?", lambda job: f"job {job}: pending")
            loop["model_read"] = [
                m["content"] for m in backend.requests[-1]["messages"] if m["role"] == "tool"
            ]
            loop["model_calls"] = len(backend.requests)
            loop["steps"] = [
                {"id": s.id, "tokens_in": s.tokens_in, "tokens_out": s.tokens_out}
                for s, _ in seen.verdicts
            ]
            ended = guardrail.guard.ended(seen.verdicts[-1][0].session)
            loop["fingerprint"] = ended.fingerprint if ended else None

            backend.reset("job_status", {"job": "7"}, 3)
            statuses = iter(["queued", "running", "finished"])
            progress = agent_run(client, "Watch job 7.", lambda job: f"job {job}: {next(statuses)}")
    return {"loop": loop, "progress": progress}


if __name__ == "__main__":
    scenes = main()
    if "--json" in sys.argv:
        print(json.dumps(scenes))
    else:
        loop, progress = scenes["loop"], scenes["progress"]
        print(f"loop: the agent ran the tool {loop['ran']} times, then read {loop['answer']!r}")
        print(f"loop: fingerprint {loop['fingerprint']}")
        print(f"progress: {progress['ran']} calls, answer {progress['answer']!r}")
