"""AntiloopGuardrails inside real OpenAI Agents SDK runs driven by a scripted Model."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import need_module

need_module("agents", "openai-agents")

from agents import (
    Agent,
    OpenAIResponsesModel,
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
from openai import AsyncOpenAI
from tests.hooks.model_server import Hosted, ModelServer, Say

from antiloop import Guard, LoopDetected
from antiloop.integrations.openai_agents import AntiloopGuardrails

pytestmark = pytest.mark.integration
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    set_tracing_disabled(True)


class LoopingModel(Model):
    def __init__(self, tool: str, args: dict[str, Any], times: int) -> None:
        self.tool, self.args, self.times, self.turns = tool, args, times, 0
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, *a: Any, **k: Any) -> Any:
        self.turns += 1
        self.inputs.append(input)
        if self.turns <= self.times:
            output = [function_call(self.tool, self.args, call_id=f"call_{self.turns}")]
        else:
            output = [assistant_message("done")]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def status_tool(outputs: Iterator[str], ran: list[str]) -> Any:
    @function_tool
    def job_status(job: str) -> str:
        """The status of a job."""
        ran.append(job)
        return next(outputs)

    return job_status


def repeat(text: str) -> Iterator[str]:
    while True:
        yield text


def tool_outputs(result: Any) -> list[Any]:
    return [i.output for i in result.new_items if i.type == "tool_call_output_item"]


def test_loop_trips_the_output_guardrail_at_the_second_identical_call():
    """The second identical call with the same result ends the run with the fingerprint."""
    ran: list[str] = []
    antiloop = AntiloopGuardrails()
    model = LoopingModel("job_status", {"job": "42"}, 5)
    agent = Agent(
        name="worker", model=model, tools=antiloop.protect(status_tool(repeat("pending"), ran))
    )
    with pytest.raises(ToolOutputGuardrailTripwireTriggered) as stop:
        asyncio.run(Runner.run(agent, "go", hooks=antiloop.hooks))
    info = stop.value.output.output_info
    assert info["detector"] == "repeat"
    assert info["fingerprint"].startswith("AGENT::worker::job_status::")
    assert ran == ["42", "42"]
    assert model.turns == 2


def test_reject_mode_answers_with_the_hint_and_refuses_the_next_repeat():
    """With on_stop=reject the model reads the hint; a third identical call does not run."""
    ran: list[str] = []
    antiloop = AntiloopGuardrails(on_stop="reject")
    model = LoopingModel("job_status", {"job": "42"}, 3)
    agent = Agent(
        name="worker", model=model, tools=antiloop.protect(status_tool(repeat("pending"), ran))
    )
    result = asyncio.run(Runner.run(agent, "go", hooks=antiloop.hooks))
    outputs = tool_outputs(result)
    assert outputs[0] == "pending"
    assert outputs[1].startswith("antiloop: The run is stopped")
    assert "[antiloop fingerprint: AGENT::worker::job_status::" in outputs[1]
    assert "already stopped" in outputs[2]
    assert ran == ["42", "42"]
    assert result.final_output == "done"


def test_changing_results_are_not_a_loop():
    """The same call three times with a new result each time runs to the model's answer."""
    ran: list[str] = []
    antiloop = AntiloopGuardrails()
    outputs = iter(["queued", "running", "finished"])
    agent = Agent(
        name="worker",
        model=LoopingModel("job_status", {"job": "7"}, 3),
        tools=antiloop.protect(status_tool(outputs, ran)),
    )
    result = asyncio.run(Runner.run(agent, "go", hooks=antiloop.hooks))
    assert tool_outputs(result) == ["queued", "running", "finished"]
    assert result.final_output == "done"


def test_hooks_record_tools_without_guardrails():
    """Unprotected tools are still recorded by the RunHooks, so the session stops."""
    ran: list[str] = []
    guard = Guard()
    antiloop = AntiloopGuardrails(guard)
    agent = Agent(
        name="worker",
        model=LoopingModel("job_status", {"job": "42"}, 2),
        tools=[status_tool(repeat("pending"), ran)],
    )
    result = asyncio.run(Runner.run(agent, "go", hooks=antiloop.hooks))
    assert result.final_output == "done"
    ended = guard.ended()
    assert ended is not None
    assert ended.fingerprint is not None
    assert ended.fingerprint.startswith("AGENT::worker::job_status::")


def approval_agent(ran: list[str], antiloop: AntiloopGuardrails) -> Agent[Any]:
    @function_tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    return Agent(
        name="cleaner",
        model=LoopingModel("delete_file", {"path": "a.txt"}, 1),
        tools=antiloop.protect(delete_file),
    )


def test_approval_interrupts_and_the_approved_run_resumes():
    """needs_approval stops the run with an interruption; approving resumes and runs the tool."""
    ran: list[str] = []
    antiloop = AntiloopGuardrails(needs_approval=lambda tool, args: tool == "delete_file")
    agent = approval_agent(ran, antiloop)

    async def scenario() -> Any:
        paused = await Runner.run(agent, "clean", hooks=antiloop.hooks)
        assert [i.name for i in paused.interruptions] == ["delete_file"]
        assert ran == []
        state = await antiloop.approve(paused, lambda tool, args: args == {"path": "a.txt"})
        return await Runner.run(agent, state, hooks=antiloop.hooks)

    result = asyncio.run(scenario())
    assert ran == ["a.txt"]
    assert tool_outputs(result) == ["deleted a.txt"]
    assert result.final_output == "done"


def test_refused_approval_tells_the_model_and_skips_the_tool():
    """run() answers the interruption; a refusal reaches the model with the comment."""
    ran: list[str] = []
    antiloop = AntiloopGuardrails(needs_approval=lambda tool, args: True)
    agent = approval_agent(ran, antiloop)

    async def decide(tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"approved": False, "comment": "keep the file"}

    result = asyncio.run(antiloop.run(agent, "clean", decide))
    assert ran == []
    (output,) = tool_outputs(result)
    assert "A person refused this delete_file call: keep the file" in output
    assert result.final_output == "done"


def search(query: str) -> Hosted:
    return Hosted({"type": "web_search_call", "action": {"type": "search", "query": query}})


def research(server: ModelServer, antiloop: AntiloopGuardrails, run: Any) -> Any:
    """``run(agent)`` with an agent on the real Responses model and the scripted server."""

    async def scenario() -> Any:
        client = AsyncOpenAI(base_url=f"{server.url}/v1", api_key="sk-scripted", max_retries=0)
        agent = Agent(
            name="researcher",
            model=OpenAIResponsesModel("gpt-scripted", client),
            tools=[WebSearchTool(), *antiloop.protect(status_tool(repeat("pending"), []))],
        )
        try:
            return await run(agent)
        finally:
            await client.close()

    return asyncio.run(scenario())


def test_a_repeated_hosted_web_search_stops_the_run():
    """Hosted calls pass no guardrail: the hooks read them from the response and stop the run."""
    antiloop = AntiloopGuardrails()
    script = [search("job 42 status")] * 6 + [Say("done")]
    with ModelServer("openai", script, "job_status") as server:
        with pytest.raises(LoopDetected) as stop:
            research(server, antiloop, lambda a: Runner.run(a, "go", hooks=antiloop.hooks))
        asked = len(server.main_requests)
    verdict = stop.value.verdict
    assert verdict.detector == "repeat"
    assert verdict.fingerprint is not None
    assert verdict.fingerprint.startswith('AGENT::researcher::search::{"query":"job 42 status"')
    assert asked == 2  # the model was not asked a third time


def test_reject_mode_tells_the_model_before_its_next_turn():
    """With on_stop=reject, run() puts the hint in the model's next input; the run goes on."""
    antiloop = AntiloopGuardrails(on_stop="reject")
    script = [search("job 42 status"), search("job 42 status"), Say("done")]
    with ModelServer("openai", script, "job_status") as server:
        result = research(server, antiloop, lambda a: antiloop.run(a, "go", lambda t, g: True))
        sent = server.main_requests
    assert result.final_output == "done"
    assert len(sent) == 3
    assert "ran twice in a row" not in sent[1].text
    ended = antiloop.guard.ended()
    assert ended is not None
    assert ended.fingerprint is not None
    (hint,) = [
        i["content"]
        for i in sent[2].body["input"]
        if i.get("role") == "user" and str(i.get("content")).startswith("antiloop:")
    ]
    assert "ran twice in a row" in hint
    assert f"[antiloop fingerprint: {ended.fingerprint}]" in hint


def test_hosted_searches_with_new_queries_are_progress():
    """Three different searches are no loop: the run ends with the model's answer."""
    antiloop = AntiloopGuardrails()
    script = [search("job 42"), search("job 42 logs"), search("job 42 owner"), Say("done")]
    with ModelServer("openai", script, "job_status") as server:
        result = research(server, antiloop, lambda a: Runner.run(a, "go", hooks=antiloop.hooks))
    assert result.final_output == "done"
    assert antiloop.guard.ended() is None


def test_example_script_runs_offline():
    """examples/openai_agents_run.py prints the stop, the progress run and the approval."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "openai_agents_run.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    lines = proc.stdout.splitlines()
    assert "loop: stopped at model turn 2 by repeat" in lines
    assert any(line.startswith("loop: fingerprint AGENT::worker::job_status::") for line in lines)
    assert "progress: 3 calls, answer 'done'" in lines
    assert "approval: resumed, tool said 'deleted notes.txt', answer 'done'" in lines
    assert "hosted: web search stopped at model turn 2 by repeat" in lines
