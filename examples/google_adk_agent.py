"""antiloop in a Google ADK agent, offline: a scripted ``BaseLlm`` stands in for Gemini.

Run: ``pip install -e '.[google-adk]'`` then ``python examples/google_adk_agent.py``.

Three short runs:

1. the model keeps asking for the same job status and gets the same answer: at the second
   identical call the model reads the hint, and antiloop answers in place of the next model
   call, so the run ends with the reason and the loop's fingerprint;
2. the same calls, but the status changes each time: progress, not a loop;
3. ``delete_file`` needs approval: the run pauses with ADK's tool confirmation, a person
   approves, and the next message resumes the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types
from pydantic import Field

from antiloop.integrations.google_adk import AntiloopCallbacks


class LoopingModel(BaseLlm):
    """A model that asks for the same tool call ``times`` times, then answers "done"."""

    model: str = "scripted"
    tool: str = "job_status"
    args: dict[str, Any] = Field(default_factory=dict)
    times: int = 1
    turns: int = 0

    async def generate_content_async(
        self, llm_request: Any, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        """The next scripted turn."""
        self.turns += 1
        if self.turns <= self.times:
            call = types.FunctionCall(name=self.tool, args=self.args, id=f"c{self.turns}")
            part = types.Part(function_call=call)
        else:
            part = types.Part(text="done")
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=120, candidates_token_count=8
        )
        yield LlmResponse(content=types.Content(role="model", parts=[part]), usage_metadata=usage)


async def run(runner: InMemoryRunner, session: str, message: types.Content) -> list[Any]:
    """One turn of the runner: every event it yields."""
    return [
        e async for e in runner.run_async(user_id="me", session_id=session, new_message=message)
    ]


def text(value: str) -> types.Content:
    """A user message."""
    return types.Content(role="user", parts=[types.Part(text=value)])


def results(events: list[Any]) -> list[Any]:
    """The tool results the model read."""
    return [r.response for e in events for r in e.get_function_responses()]


async def start(agent: LlmAgent) -> tuple[InMemoryRunner, str]:
    """A runner and a fresh session for ``agent``."""
    runner = InMemoryRunner(agent=agent, app_name="example")
    session = await runner.session_service.create_session(app_name="example", user_id="me")
    return runner, session.id


async def main() -> None:
    """Run the three scenes and print what happened."""
    # 1. A loop: same call, same result.
    calls: list[str] = []

    def job_status(job: str) -> str:
        """The status of a job (always the same: the job is stuck)."""
        calls.append(job)
        return f"job {job}: pending"

    antiloop = AntiloopCallbacks()
    agent = LlmAgent(
        name="worker",
        model=LoopingModel(args={"job": "42"}, times=5),
        tools=[job_status],
        **antiloop.callbacks(),
    )
    runner, session = await start(agent)
    events = await run(runner, session, text("Is job 42 done?"))
    ended = antiloop.guard.ended(session)
    last = [p.text for e in events if e.content for p in e.content.parts or () if p.text][-1]
    if ended is not None and last.startswith("antiloop stopped the run"):
        print(f"loop: {len(calls)} calls ran, then antiloop stopped the run ({ended.detector})")
        print(f"loop: fingerprint {ended.fingerprint}")

    # 2. Progress: same call, a different result each time.
    statuses = iter(["queued", "running", "finished"])

    def moving_status(job: str) -> str:
        """The status of a job that makes progress."""
        return f"job {job}: {next(statuses)}"

    agent = LlmAgent(
        name="watcher",
        model=LoopingModel(tool="moving_status", args={"job": "7"}, times=3),
        tools=[moving_status],
        **AntiloopCallbacks().callbacks(),
    )
    runner, session = await start(agent)
    events = await run(runner, session, text("Watch job 7."))
    answer = [p.text for e in events if e.content for p in e.content.parts or () if p.text][-1]
    print(f"progress: {len(results(events))} calls, answer {answer!r}")

    # 3. Approval: ADK's tool confirmation pauses the run; the answer resumes it.
    def delete_file(path: str) -> str:
        """Delete a file (pretend)."""
        return f"deleted {path}"

    antiloop = AntiloopCallbacks(needs_approval=lambda tool, args: tool == "delete_file")
    agent = LlmAgent(
        name="cleaner",
        model=LoopingModel(tool="delete_file", args={"path": "notes.txt"}, times=1),
        tools=[delete_file],
        **antiloop.callbacks(),
    )
    runner, session = await start(agent)
    paused = await run(runner, session, text("Clean up."))
    (request,) = antiloop.approval_requests(paused)
    print(f"approval: paused, asking about {request.tool} {request.args}")
    events = await run(runner, session, antiloop.answer(request, {"approved": True, "by": "me"}))
    said = [r["result"] for r in results(events) if "result" in r][-1]
    answer = [p.text for e in events if e.content for p in e.content.parts or () if p.text][-1]
    print(f"approval: resumed, tool said {said!r}, answer {answer!r}")


if __name__ == "__main__":
    asyncio.run(main())
