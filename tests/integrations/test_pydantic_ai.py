"""AntiloopCapability inside real PydanticAI agent runs driven by a scripted FunctionModel."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import need_module

need_module("pydantic_ai", "pydantic-ai")

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests
from pydantic_ai.usage import RequestUsage

from antiloop import Guard, LoopDetected
from antiloop.integrations.pydantic_ai import AntiloopCapability
from antiloop.testing import RecordingListener

pytestmark = pytest.mark.integration
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def looping_model(tool: str, args: dict[str, Any], times: int) -> FunctionModel:
    """Asks for the same call ``times`` times (one per turn), then answers "done"."""
    turns = {"n": 0}

    def respond(messages: list[Any], info: AgentInfo) -> ModelResponse:
        turns["n"] += 1
        usage = RequestUsage(input_tokens=100 * turns["n"], output_tokens=7)
        if turns["n"] <= times:
            part = ToolCallPart(tool, args, tool_call_id=f"call_{turns['n']}")
            return ModelResponse(parts=[part], usage=usage)
        return ModelResponse(parts=[TextPart("done")], usage=usage)

    return FunctionModel(respond)


def status_agent(model: FunctionModel, outputs: list[str], ran: list[str], **kw: Any) -> Agent:
    agent = Agent(model, name="worker", **kw)

    @agent.tool_plain
    def job_status(job: str) -> str:
        """The status of a job."""
        ran.append(job)
        return outputs[min(len(ran), len(outputs)) - 1]

    return agent


def tool_returns(result: Any) -> list[Any]:
    return [
        part.content
        for message in result.all_messages()
        for part in getattr(message, "parts", ())
        if isinstance(part, ToolReturnPart)
    ]


def test_loop_ends_the_run_with_loop_detected_at_the_second_identical_call():
    """The second identical call with the same result raises LoopDetected with the fingerprint."""
    ran: list[str] = []
    agent = status_agent(
        looping_model("job_status", {"job": "42"}, 5),
        ["pending"],
        ran,
        capabilities=[AntiloopCapability()],
    )
    with pytest.raises(LoopDetected) as stop:
        asyncio.run(agent.run("Is job 42 done?"))
    assert stop.value.verdict.detector == "repeat"
    assert stop.value.verdict.fingerprint.startswith("AGENT::worker::job_status::")
    assert ran == ["42", "42"]


def test_answer_mode_tells_the_model_and_never_runs_the_stopped_call_again():
    """With on_stop=answer the model reads the hint; a third identical call does not run."""
    ran: list[str] = []
    agent = status_agent(
        looping_model("job_status", {"job": "42"}, 3),
        ["pending"],
        ran,
        capabilities=[AntiloopCapability(on_stop="answer")],
    )
    result = asyncio.run(agent.run("Is job 42 done?"))
    outputs = tool_returns(result)
    assert outputs[0] == "pending"
    assert outputs[1].startswith("antiloop: The run is stopped")
    assert "[antiloop fingerprint: AGENT::worker::job_status::" in outputs[1]
    assert "antiloop:" in outputs[2]
    assert ran == ["42", "42"]
    assert result.output == "done"


def test_changing_results_are_progress_and_steps_carry_call_ids_and_tokens():
    """A new result each time is no loop; each step keeps its tool_call_id and its tokens."""
    ran: list[str] = []
    seen = RecordingListener()
    agent = status_agent(
        looping_model("job_status", {"job": "7"}, 3),
        ["queued", "running", "finished"],
        ran,
        capabilities=[AntiloopCapability(Guard(listeners=[seen]), session="s1")],
    )
    result = asyncio.run(agent.run("Watch job 7."))
    assert tool_returns(result) == ["queued", "running", "finished"]
    assert result.output == "done"
    steps = [step for step, _ in seen.verdicts]
    assert [s.output for s in steps] == ["queued", "running", "finished"]
    assert [s.id for s in steps] == ["call_1", "call_2", "call_3"]
    assert [(s.tokens_in, s.tokens_out) for s in steps] == [(100, 7), (200, 7), (300, 7)]
    assert {s.session for s in steps} == {"s1"}


def test_approval_defers_the_call_and_the_approved_run_resumes():
    """needs_approval ends the run with DeferredToolRequests; approving runs the tool."""
    deleted: list[str] = []
    antiloop = AntiloopCapability(needs_approval=lambda tool, args: tool == "delete_file")
    agent = Agent(
        looping_model("delete_file", {"path": "a.txt"}, 1),
        name="cleaner",
        capabilities=[antiloop],
        output_type=[str, DeferredToolRequests],
    )

    @agent.tool_plain
    def delete_file(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return f"deleted {path}"

    async def scenario() -> Any:
        paused = await agent.run("clean")
        assert isinstance(paused.output, DeferredToolRequests)
        assert [c.tool_name for c in paused.output.approvals] == ["delete_file"]
        assert deleted == []
        answers = await antiloop.approve(paused, lambda tool, args: args == {"path": "a.txt"})
        return await agent.run(
            None, message_history=paused.all_messages(), deferred_tool_results=answers
        )

    result = asyncio.run(scenario())
    assert deleted == ["a.txt"]
    assert tool_returns(result) == ["deleted a.txt"]
    assert result.output == "done"


def test_refused_approval_reaches_the_model_and_skips_the_tool():
    """run() answers the deferral; a refusal reaches the model with the person's comment."""
    deleted: list[str] = []
    antiloop = AntiloopCapability(needs_approval=lambda tool, args: True)
    agent = Agent(
        looping_model("delete_file", {"path": "a.txt"}, 1),
        name="cleaner",
        capabilities=[antiloop],
        output_type=[str, DeferredToolRequests],
    )

    @agent.tool_plain
    def delete_file(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return f"deleted {path}"

    result = asyncio.run(
        antiloop.run(agent, "clean", lambda t, a: {"approved": False, "comment": "keep it"})
    )
    assert deleted == []
    (output,) = tool_returns(result)
    assert "A person refused this delete_file call: keep it" in output
    assert result.output == "done"


def test_example_script_runs_offline():
    """examples/pydantic_ai_agent.py prints the stop, the progress run and the approval."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "pydantic_ai_agent.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    lines = proc.stdout.splitlines()
    assert "loop: stopped after 2 calls by repeat" in lines
    assert any(line.startswith("loop: fingerprint AGENT::worker::job_status::") for line in lines)
    assert "progress: 3 calls, answer 'done'" in lines
    assert "approval: resumed, tool said 'deleted notes.txt', answer 'done'" in lines
