"""AntiloopCallbacks inside real Google ADK runs driven by a scripted BaseLlm."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import need_module

need_module("google.adk", "google-adk")

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types
from pydantic import Field

from antiloop import Guard
from antiloop.integrations.google_adk import AntiloopCallbacks
from antiloop.testing import RecordingListener

pytestmark = pytest.mark.integration
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class LoopingModel(BaseLlm):
    """Asks for the same call ``times`` times, then answers "done"; 100/7 tokens a turn."""

    model: str = "scripted"
    tool: str = "job_status"
    args: dict[str, Any] = Field(default_factory=dict)
    times: int = 1
    turns: int = 0

    async def generate_content_async(
        self, llm_request: Any, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.turns += 1
        if self.turns <= self.times:
            call = types.FunctionCall(name=self.tool, args=self.args, id=f"call_{self.turns}")
            part = types.Part(function_call=call)
        else:
            part = types.Part(text="done")
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=100 * self.turns, candidates_token_count=7
        )
        yield LlmResponse(content=types.Content(role="model", parts=[part]), usage_metadata=usage)


def run(agent: LlmAgent, *messages: Any) -> tuple[list[Any], InMemoryRunner, str]:
    runner = InMemoryRunner(agent=agent, app_name="antiloop-test")

    async def go() -> tuple[list[Any], str]:
        session = await runner.session_service.create_session(app_name="antiloop-test", user_id="u")
        events = []
        for message in messages:
            content = types.Content(role="user", parts=[types.Part(text=message)])
            turn = runner.run_async(user_id="u", session_id=session.id, new_message=content)
            events.extend([event async for event in turn])
        return events, session.id

    events, sid = asyncio.run(go())
    return events, runner, sid


def responses(events: list[Any]) -> list[Any]:
    return [r.response for e in events for r in e.get_function_responses()]


def texts(events: list[Any]) -> list[str]:
    return [p.text for e in events if e.content for p in e.content.parts or () if p.text]


def status_agent(antiloop: AntiloopCallbacks, model: LoopingModel, outputs: list[str], ran: list):
    def job_status(job: str) -> str:
        """The status of a job."""
        ran.append(job)
        return outputs[min(len(ran), len(outputs)) - 1]

    return LlmAgent(name="worker", model=model, tools=[job_status], **antiloop.callbacks())


def test_loop_answers_with_the_hint_and_the_run_ends_before_the_next_model_call():
    """The second identical call with the same result gives the model the hint; the run ends."""
    ran: list[str] = []
    model = LoopingModel(args={"job": "42"}, times=5)
    events, _, _ = run(status_agent(AntiloopCallbacks(), model, ["pending"], ran), "go")
    first, second = responses(events)
    assert first == {"result": "pending"}
    assert second["error"].startswith("antiloop: The run is stopped")
    assert "[antiloop fingerprint: AGENT::worker::job_status::" in second["error"]
    assert ran == ["42", "42"]
    assert model.turns == 2  # the third model call is answered by antiloop
    assert texts(events)[-1].startswith("antiloop stopped the run:")


def test_a_stopped_procedure_is_not_run_again():
    """Without ending the run, a third identical call is refused before the tool runs."""
    ran: list[str] = []
    model = LoopingModel(args={"job": "42"}, times=3)
    antiloop = AntiloopCallbacks(end_on_stop=False)
    events, _, _ = run(status_agent(antiloop, model, ["pending"], ran), "go")
    outputs = responses(events)
    assert len(outputs) == 3
    assert "antiloop:" in outputs[2]["error"]
    assert ran == ["42", "42"]
    assert texts(events)[-1] == "done"


def test_progress_is_no_loop_and_steps_carry_call_ids_tokens_and_the_adk_session():
    """A new result each time runs on; each step has ADK's call id, its tokens and session."""
    ran: list[str] = []
    seen = RecordingListener()
    model = LoopingModel(args={"job": "7"}, times=3)
    antiloop = AntiloopCallbacks(Guard(listeners=[seen]))
    events, _, sid = run(
        status_agent(antiloop, model, ["queued", "running", "finished"], ran), "go"
    )
    assert [r["result"] for r in responses(events)] == ["queued", "running", "finished"]
    assert texts(events)[-1] == "done"
    steps = [step for step, _ in seen.verdicts]
    assert [s.id for s in steps] == ["call_1", "call_2", "call_3"]
    assert [(s.tokens_in, s.tokens_out) for s in steps] == [(100, 7), (200, 7), (300, 7)]
    assert {s.session for s in steps} == {sid}
    assert {s.agent for s in steps} == {"worker"}


def approval_run(answer: object) -> tuple[list[Any], list[str]]:
    deleted: list[str] = []

    def delete_file(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return f"deleted {path}"

    antiloop = AntiloopCallbacks(needs_approval=lambda tool, args: tool == "delete_file")
    model = LoopingModel(tool="delete_file", args={"path": "a.txt"}, times=1)
    agent = LlmAgent(name="cleaner", model=model, tools=[delete_file], **antiloop.callbacks())
    runner = InMemoryRunner(agent=agent, app_name="antiloop-test")

    async def go() -> list[Any]:
        session = await runner.session_service.create_session(app_name="antiloop-test", user_id="u")
        content = types.Content(role="user", parts=[types.Part(text="clean")])
        paused = [
            e
            async for e in runner.run_async(user_id="u", session_id=session.id, new_message=content)
        ]
        (request,) = antiloop.approval_requests(paused)
        assert (request.tool, request.args, request.call_id) == (
            "delete_file",
            {"path": "a.txt"},
            "call_1",
        )
        assert deleted == []
        reply = antiloop.answer(request, answer)
        return [
            e async for e in runner.run_async(user_id="u", session_id=session.id, new_message=reply)
        ]

    return asyncio.run(go()), deleted


def test_approval_pauses_with_adk_confirmation_and_the_approved_call_runs():
    """needs_approval pauses the run; approving resumes it and runs the tool once."""
    events, deleted = approval_run(True)
    assert deleted == ["a.txt"]
    assert {"result": "deleted a.txt"} in responses(events)
    assert texts(events)[-1] == "done"


def test_refused_approval_reaches_the_model_and_skips_the_tool():
    """A refusal with a comment answers the model; the tool never runs."""
    events, deleted = approval_run({"approved": False, "comment": "keep it"})
    assert deleted == []
    refusals = [r["error"] for r in responses(events) if "error" in r]
    assert any("A person refused this delete_file call: keep it" in r for r in refusals)


def test_example_script_runs_offline():
    """examples/google_adk_agent.py prints the stop, the progress run and the approval."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "google_adk_agent.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    lines = proc.stdout.splitlines()
    assert "loop: 2 calls ran, then antiloop stopped the run (repeat)" in lines
    assert any(line.startswith("loop: fingerprint AGENT::worker::job_status::") for line in lines)
    assert "progress: 3 calls, answer 'done'" in lines
    assert "approval: resumed, tool said 'deleted notes.txt', answer 'done'" in lines
