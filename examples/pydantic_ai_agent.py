"""antiloop in a PydanticAI agent, offline: a scripted ``FunctionModel`` stands in for the LLM.

Run: ``pip install -e '.[pydantic-ai]'`` then ``python examples/pydantic_ai_agent.py``.

Three short runs:

1. the model keeps asking for the same job status and gets the same answer: the run ends
   with ``LoopDetected`` at the second identical call, with the loop's fingerprint;
2. the same calls, but the status changes each time: progress, not a loop;
3. ``delete_file`` needs approval: the run ends with ``DeferredToolRequests``, a person
   approves, and the next run resumes from the message history.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests

from antiloop import LoopDetected
from antiloop.integrations.pydantic_ai import AntiloopCapability


def looping_model(tool: str, args: dict[str, Any], times: int) -> FunctionModel:
    """A model that asks for the same tool call ``times`` times, then answers "done"."""
    turns = [0]

    def respond(messages: list[Any], info: AgentInfo) -> ModelResponse:
        turns[0] += 1
        if turns[0] <= times:
            return ModelResponse(parts=[ToolCallPart(tool, args, tool_call_id=f"c{turns[0]}")])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond)


def tool_returns(result: Any) -> list[Any]:
    """The tool results the model read, in order."""
    return [
        part.content
        for message in result.all_messages()
        for part in getattr(message, "parts", ())
        if isinstance(part, ToolReturnPart)
    ]


async def main() -> None:
    """Run the three scenes and print what happened."""
    # 1. A loop: same call, same result.
    calls: list[str] = []
    agent = Agent(
        looping_model("job_status", {"job": "42"}, 5),
        name="worker",
        capabilities=[AntiloopCapability()],
    )

    @agent.tool_plain
    def job_status(job: str) -> str:
        """The status of a job (always the same: the job is stuck)."""
        calls.append(job)
        return f"job {job}: pending"

    try:
        await agent.run("Is job 42 done?")
    except LoopDetected as stop:
        print(f"loop: stopped after {len(calls)} calls by {stop.verdict.detector}")
        print(f"loop: fingerprint {stop.verdict.fingerprint}")

    # 2. Progress: same call, a different result each time.
    statuses = iter(["queued", "running", "finished"])
    agent = Agent(
        looping_model("moving_status", {"job": "7"}, 3),
        name="watcher",
        capabilities=[AntiloopCapability()],
    )

    @agent.tool_plain
    def moving_status(job: str) -> str:
        """The status of a job that makes progress."""
        return f"job {job}: {next(statuses)}"

    result = await agent.run("Watch job 7.")
    print(f"progress: {len(tool_returns(result))} calls, answer {result.output!r}")

    # 3. Approval: the call is deferred; approving resumes the run.
    antiloop = AntiloopCapability(needs_approval=lambda tool, args: tool == "delete_file")
    agent = Agent(
        looping_model("delete_file", {"path": "notes.txt"}, 1),
        name="cleaner",
        capabilities=[antiloop],
        output_type=[str, DeferredToolRequests],
    )

    @agent.tool_plain
    def delete_file(path: str) -> str:
        """Delete a file (pretend)."""
        return f"deleted {path}"

    paused = await agent.run("Clean up.")
    if not isinstance(paused.output, DeferredToolRequests):
        raise SystemExit("expected the run to wait for an approval")
    (call,) = paused.output.approvals
    print(f"approval: paused, asking about {call.tool_name} {call.args_as_dict()}")
    answers = await antiloop.approve(paused, lambda tool, args: {"approved": True, "by": "me"})
    result = await agent.run(
        None, message_history=paused.all_messages(), deferred_tool_results=answers
    )
    print(f"approval: resumed, tool said {tool_returns(result)[-1]!r}, answer {result.output!r}")


if __name__ == "__main__":
    asyncio.run(main())
