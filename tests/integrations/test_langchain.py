"""AntiloopMiddleware inside a real LangChain v1 agent driven by a scripted fake chat model."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import need_module

need_module("langchain.agents", "langchain")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from antiloop import Guard, GuardConfig
from antiloop.integrations.langchain import AntiloopMiddleware

pytestmark = pytest.mark.integration
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class ScriptedChatModel(GenericFakeChatModel):
    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self


def script(name: str, args: dict[str, Any], times: int) -> Iterator[AIMessage]:
    for i in range(times):
        yield AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{i}"}])
    yield AIMessage(content="done")


def status_tool(outputs: Iterator[str], ran: list[str]) -> Any:
    @tool
    def job_status(job: str) -> str:
        """The status of a job."""
        ran.append(job)
        return next(outputs)

    return job_status


def tool_results(messages: list[Any]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def repeat(text: str) -> Iterator[str]:
    while True:
        yield text


def test_loop_stops_at_the_second_identical_call_and_ends_the_run():
    """Two identical calls with the same result: the second answer is the hint, the run ends."""
    ran: list[str] = []
    model = ScriptedChatModel(messages=script("job_status", {"job": "42"}, 5))
    agent = create_agent(
        model, [status_tool(repeat("pending"), ran)], middleware=[AntiloopMiddleware()]
    )
    out = agent.invoke({"messages": [{"role": "user", "content": "is 42 done?"}]})
    results = tool_results(out["messages"])
    assert [r.status for r in results] == ["success", "error"]
    meta = results[1].response_metadata["antiloop"]
    assert meta["detector"] == "repeat"
    assert meta["fingerprint"].startswith("AGENT::agent::job_status::")
    assert meta["fingerprint"] in results[1].content
    assert "Stop repeating job_status" in results[1].content
    assert ran == ["42", "42"]
    last = out["messages"][-1]
    assert isinstance(last, AIMessage)
    assert not last.tool_calls
    assert last.content.startswith("antiloop stopped the run")


def test_async_agent_is_stopped_the_same_way():
    """ainvoke goes through awrap_tool_call and abefore_model with the same outcome."""
    ran: list[str] = []
    model = ScriptedChatModel(messages=script("job_status", {"job": "42"}, 5))
    agent = create_agent(
        model, [status_tool(repeat("pending"), ran)], middleware=[AntiloopMiddleware()]
    )
    out = asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "go"}]}))
    assert [r.status for r in tool_results(out["messages"])] == ["success", "error"]
    assert out["messages"][-1].content.startswith("antiloop stopped the run")
    assert ran == ["42", "42"]


def test_changing_results_are_not_a_loop():
    """The same call three times with a new result each time runs to the model's answer."""
    ran: list[str] = []
    outputs = iter(["queued", "running", "finished"])
    model = ScriptedChatModel(messages=script("job_status", {"job": "7"}, 3))
    agent = create_agent(model, [status_tool(outputs, ran)], middleware=[AntiloopMiddleware()])
    out = agent.invoke({"messages": [{"role": "user", "content": "watch 7"}]})
    results = tool_results(out["messages"])
    assert [r.content for r in results] == ["queued", "running", "finished"]
    assert all(r.status == "success" for r in results)
    assert out["messages"][-1].content == "done"


def test_block_mode_refuses_the_repeat_without_running_the_tool():
    """With repeat_action=block the run goes on, and a third identical call is not run."""
    ran: list[str] = []
    guard = Guard(config=GuardConfig(repeat_action="block"))
    model = ScriptedChatModel(messages=script("job_status", {"job": "42"}, 3))
    agent = create_agent(
        model, [status_tool(repeat("pending"), ran)], middleware=[AntiloopMiddleware(guard)]
    )
    out = agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    results = tool_results(out["messages"])
    assert [r.status for r in results] == ["success", "error", "error"]
    assert "was already stopped as a loop" in results[2].content
    assert ran == ["42", "42"]
    assert out["messages"][-1].content == "done"


def approval_agent(ran: list[str], saver: InMemorySaver, guard: Guard | None = None) -> Any:
    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    model = ScriptedChatModel(messages=script("delete_file", {"path": "a.txt"}, 1))
    middleware = AntiloopMiddleware(guard, needs_approval=lambda tool, args: tool == "delete_file")
    return create_agent(model, [delete_file], middleware=[middleware], checkpointer=saver)


def test_approval_interrupts_and_resume_runs_the_tool():
    """A call the policy flags pauses with interrupt(); Command(resume=True) runs it."""
    ran: list[str] = []
    agent = approval_agent(ran, InMemorySaver())
    config = {"configurable": {"thread_id": "t-approve"}}
    paused = agent.invoke({"messages": [{"role": "user", "content": "rm"}]}, config, version="v2")
    (question,) = paused.interrupts
    assert question.value["type"] == "antiloop_approval"
    assert question.value["tool"] == "delete_file"
    assert question.value["args"] == {"path": "a.txt"}
    assert ran == []
    done = agent.invoke(Command(resume=True), config, version="v2")
    assert ran == ["a.txt"]
    assert tool_results(done.value["messages"])[-1].content == "deleted a.txt"
    assert done.value["messages"][-1].content == "done"


def test_refused_approval_answers_the_model_with_the_comment():
    """A refusal skips the tool, tells the model the reason, and goes to the audit log."""
    ran: list[str] = []
    guard = Guard()
    agent = approval_agent(ran, InMemorySaver(), guard)
    config = {"configurable": {"thread_id": "t-refuse"}}
    agent.invoke({"messages": [{"role": "user", "content": "rm"}]}, config, version="v2")
    done = agent.invoke(
        Command(resume={"type": "reject", "message": "keep it"}), config, version="v2"
    )
    assert ran == []
    (result,) = tool_results(done.value["messages"])
    assert result.status == "error"
    assert "keep it" in result.content
    assert result.response_metadata["antiloop"]["detector"] == "approval"
    (record,) = [r for r in guard.store.audit_records("t-refuse") if r.kind == "approval"]
    assert (record.tool, record.detector) == ("delete_file", "approval")


def test_ask_verdict_pauses_before_the_next_model_call_and_resumes():
    """With repeat_action=ask the loop asks a person; approving lets the agent go on."""
    ran: list[str] = []
    guard = Guard(config=GuardConfig(repeat_action="ask"))
    model = ScriptedChatModel(messages=script("job_status", {"job": "42"}, 2))
    agent = create_agent(
        model,
        [status_tool(repeat("pending"), ran)],
        middleware=[AntiloopMiddleware(guard)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t-ask"}}
    paused = agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config, version="v2")
    (question,) = paused.interrupts
    assert question.value["type"] == "antiloop_ask"
    assert question.value["fingerprint"].startswith("AGENT::agent::job_status::")
    done = agent.invoke(Command(resume={"approved": True}), config, version="v2")
    assert done.value["messages"][-1].content == "done"
    assert ran == ["42", "42"]


def test_example_script_runs_offline():
    """examples/langchain_agent.py prints the stop, the progress run and the approval."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "langchain_agent.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    lines = proc.stdout.splitlines()
    assert "loop: stopped after 2 calls (error)" in lines
    assert any(line.startswith("loop: fingerprint AGENT::agent::job_status::") for line in lines)
    assert "progress: 3 calls, 0 flagged, answer 'done'" in lines
    resumed = "approval: resumed, tool said 'deleted notes.txt'"
    assert any(line.startswith(resumed) for line in lines)
