"""antiloop in an OpenAI Agents SDK run, offline: a scripted ``Model`` stands in for the LLM.

Run: ``pip install -e '.[openai-agents]'`` then ``python examples/openai_agents_run.py``.

Four short runs:

1. the model keeps asking for the same job status and gets the same answer: the output
   guardrail trips at the second identical call, with the loop's fingerprint;
2. the same calls, but the status changes each time: progress, not a loop;
3. ``delete_file`` needs approval: the run stops with an interruption, a person approves,
   and the run resumes from its state;
4. a hosted web search (it runs on the model's side, past every guardrail) with the same query
   and the same sources twice: the run hooks read it from the model's response and stop the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from agents import (
    Agent,
    Runner,
    ToolOutputGuardrailTripwireTriggered,
    WebSearchTool,
    function_tool,
    set_tracing_disabled,
)
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.testing import assistant_message, function_call
from agents.usage import Usage
from openai.types.responses import ResponseFunctionWebSearch

from antiloop import LoopDetected
from antiloop.integrations.openai_agents import AntiloopGuardrails


class LoopingModel(Model):
    """A model that asks for the same tool call ``times`` times, then answers "done"."""

    def __init__(self, tool: str, args: dict[str, Any], times: int) -> None:
        self.tool, self.args, self.times, self.turns = tool, args, times, 0

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        """The next scripted turn."""
        self.turns += 1
        if self.turns <= self.times:
            output = [function_call(self.tool, self.args, call_id=f"call_{self.turns}")]
        else:
            output = [assistant_message("done")]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """Streaming is not scripted here."""
        raise NotImplementedError


class SearchingModel(LoopingModel):
    """A model whose hosted web search finds the same sources for the same query each turn."""

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        """A ``web_search_call`` item, as the Responses API returns it."""
        self.turns += 1
        search = ResponseFunctionWebSearch.model_validate(
            {
                "id": f"ws_{self.turns}",
                "type": "web_search_call",
                "status": "completed",
                "action": {
                    "type": "search",
                    "query": "job 42 status",
                    "sources": [{"type": "url", "url": "https://jobs.example/42"}],
                },
            }
        )
        return ModelResponse(output=[search], usage=Usage(), response_id=None)


STATUSES = iter(["queued", "running", "finished"])


@function_tool
def job_status(job: str) -> str:
    """The status of a job (always the same: the job is stuck)."""
    return f"job {job}: pending"


@function_tool
def moving_status(job: str) -> str:
    """The status of a job that makes progress."""
    return f"job {job}: {next(STATUSES)}"


@function_tool
def delete_file(path: str) -> str:
    """Delete a file (pretend)."""
    return f"deleted {path}"


async def main() -> None:
    """Run the four scenes and print what happened."""
    set_tracing_disabled(True)

    # 1. A loop: same call, same result.
    antiloop = AntiloopGuardrails()
    model = LoopingModel("job_status", {"job": "42"}, 5)
    agent = Agent(name="worker", model=model, tools=antiloop.protect(job_status))
    try:
        await Runner.run(agent, "Is job 42 done?", hooks=antiloop.hooks)
    except ToolOutputGuardrailTripwireTriggered as stop:
        info = stop.output.output_info
        print(f"loop: stopped at model turn {model.turns} by {info['detector']}")
        print(f"loop: fingerprint {info['fingerprint']}")

    # 2. Progress: same call, a different result each time.
    antiloop = AntiloopGuardrails()
    agent = Agent(
        name="watcher",
        model=LoopingModel("moving_status", {"job": "7"}, 3),
        tools=antiloop.protect(moving_status),
    )
    result = await Runner.run(agent, "Watch job 7.", hooks=antiloop.hooks)
    outputs = [item.output for item in result.new_items if item.type == "tool_call_output_item"]
    print(f"progress: {len(outputs)} calls, answer {result.final_output!r}")

    # 3. Approval: needs_approval stops the run; approving resumes it.
    antiloop = AntiloopGuardrails(needs_approval=lambda tool, args: tool == "delete_file")
    agent = Agent(
        name="cleaner",
        model=LoopingModel("delete_file", {"path": "notes.txt"}, 1),
        tools=antiloop.protect(delete_file),
    )
    result = await Runner.run(agent, "Clean up.", hooks=antiloop.hooks)
    (item,) = result.interruptions
    print(f"approval: paused, asking about {item.name} {item.arguments}")
    state = await antiloop.approve(result, lambda tool, args: {"approved": True, "by": "me"})
    result = await Runner.run(agent, state, hooks=antiloop.hooks)
    outputs = [item.output for item in result.new_items if item.type == "tool_call_output_item"]
    print(f"approval: resumed, tool said {outputs[-1]!r}, answer {result.final_output!r}")

    # 4. A hosted tool: no guardrail sees it, the run hooks read it from the response.
    antiloop = AntiloopGuardrails()
    model = SearchingModel("web_search", {}, 0)
    agent = Agent(name="researcher", model=model, tools=[WebSearchTool()])
    try:
        await Runner.run(agent, "Is job 42 done?", hooks=antiloop.hooks, max_turns=10)
    except LoopDetected as stop:
        print(f"hosted: web search stopped at model turn {model.turns} by {stop.verdict.detector}")


if __name__ == "__main__":
    asyncio.run(main())
