"""Each framework's own usage reaches the guard's budgets: real frameworks, scripted models."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from tests.conftest import need_module

from antiloop import Guard
from antiloop.budgets import Budgets, Limit, spent
from antiloop.core.verdict import Action
from antiloop.guard import Listener

pytestmark = pytest.mark.integration


def _guard(**limits: Any) -> Guard:
    return Guard(budgets=Budgets(session=Limit(**limits)))


# -- LangChain: AIMessage.usage_metadata ------------------------------------------------------


def _langchain_agent(guard: Guard, turns: Sequence[Any]) -> Any:
    need_module("langchain.agents", "langchain")
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.tools import tool

    from antiloop.integrations.langchain import AntiloopMiddleware

    class Scripted(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Scripted:  # type: ignore[override]
            return self

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    return create_agent(
        Scripted(messages=iter(turns)),
        [read_file],
        middleware=[AntiloopMiddleware(guard, session="lc")],
    )


def _ai(calls: list[str], tokens_in: int, tokens_out: int, turn: int) -> Any:
    from langchain_core.messages import AIMessage

    return AIMessage(
        content="",
        tool_calls=[
            {"name": "read_file", "args": {"path": p}, "id": f"t{turn}_{n}"}
            for n, p in enumerate(calls)
        ],
        usage_metadata={
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
        },
    )


def test_langchain_usage_metadata_is_charged_once_per_model_turn() -> None:
    """Two parallel calls of one turn count its tokens once; every turn's tokens add up."""
    from langchain_core.messages import AIMessage

    guard = _guard(hard_tokens=10_000)
    turns = [_ai(["a.py", "b.py"], 100, 20, 0), _ai(["c.py"], 150, 30, 1), AIMessage("done")]
    out = _langchain_agent(guard, turns).invoke({"messages": [{"role": "user", "content": "go"}]})
    assert out["messages"][-1].content == "done"
    used = spent(guard.store, "lc")
    assert (used.tokens_in, used.tokens_out) == (250, 50)


def test_langchain_run_ends_at_the_hard_token_limit() -> None:
    """The turn that passes the hard limit gets a refusal and the run ends before the next."""
    from langchain_core.messages import AIMessage, ToolMessage

    guard = _guard(hard_tokens=500)
    turns = [_ai([f"{i}.py"], 200, 10, i) for i in range(5)] + [AIMessage("done")]
    out = _langchain_agent(guard, turns).invoke({"messages": [{"role": "user", "content": "go"}]})
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [r.status for r in results] == ["success", "success", "error"]
    assert results[2].response_metadata["antiloop"]["outcome"] == "budget"
    assert out["messages"][-1].content.startswith("antiloop stopped the run")
    assert guard.ended("lc").detector == "budget"


# -- OpenAI Agents SDK: the run's Usage ------------------------------------------------------


def test_agents_sdk_usage_is_charged_per_model_turn() -> None:
    """The SDK sums usage over the run; each call is charged what the run spent since the last."""
    need_module("agents", "openai-agents")
    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.testing import assistant_message, function_call
    from agents.usage import Usage

    from antiloop.integrations.openai_agents import AntiloopGuardrails

    set_tracing_disabled(True)

    class Scripted(Model):
        def __init__(self) -> None:
            self.turn = 0

        async def get_response(self, *a: Any, **k: Any) -> Any:
            self.turn += 1
            if self.turn == 1:
                output = [
                    function_call("read_file", {"path": "a.py"}, call_id="c1"),
                    function_call("read_file", {"path": "b.py"}, call_id="c2"),
                ]
            elif self.turn == 2:
                output = [function_call("read_file", {"path": "c.py"}, call_id="c3")]
            else:
                output = [assistant_message("done")]
            usage = Usage(requests=1, input_tokens=100 * self.turn, output_tokens=10)
            return ModelResponse(output=output, usage=usage, response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            raise NotImplementedError

    @function_tool
    def read_file(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    verdicts: list[Any] = []

    class Seen(Listener):
        def on_verdict(self, step: Any, verdict: Any) -> None:
            verdicts.append(verdict)

    guard = Guard(budgets=Budgets(session=Limit(soft_tokens=250)), listeners=[Seen()])
    antiloop = AntiloopGuardrails(guard, session="sdk")
    agent = Agent(name="worker", model=Scripted(), tools=antiloop.protect(read_file))
    result = asyncio.run(Runner.run(agent, "go", hooks=antiloop.hooks))
    assert result.final_output == "done"
    used = spent(guard.store, "sdk")
    assert (used.tokens_in, used.tokens_out) == (300, 20)  # the third turn made no call
    assert [v.action for v in verdicts] == [Action.CONTINUE, Action.CONTINUE, Action.ASK]


# -- AutoGen: the model client's RequestUsage on the call event -------------------------------


def test_autogen_models_usage_is_charged_to_the_first_call_of_a_turn() -> None:
    """ToolCallRequestEvent.models_usage (from the model client) is the turn's tokens."""
    need_module("autogen_agentchat", "autogen")
    need_module("autogen_ext.models.replay", "autogen")
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_core import FunctionCall
    from autogen_core.models import CreateResult, ModelFamily, ModelInfo, RequestUsage
    from autogen_ext.models.replay import ReplayChatCompletionClient

    from antiloop.integrations.autogen import AntiloopTermination

    info = ModelInfo(
        vision=False,
        function_calling=True,
        json_output=False,
        family=ModelFamily.UNKNOWN,
        structured_output=False,
    )
    turns: list[Any] = [
        CreateResult(
            finish_reason="function_calls",
            content=[FunctionCall(id=f"c{i}", name="read_file", arguments=f'{{"path": "{i}.py"}}')],
            usage=RequestUsage(prompt_tokens=300, completion_tokens=40),
            cached=False,
        )
        for i in range(6)
    ]
    client = ReplayChatCompletionClient([*turns, "finished"], model_info=info)

    def read_file(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    guard = _guard(hard_tokens=1000)
    antiloop = AntiloopTermination(guard, session="ag")
    agent = AssistantAgent("worker", model_client=client, tools=[read_file])
    team = RoundRobinGroupChat([agent], termination_condition=antiloop | MaxMessageTermination(60))
    result = asyncio.run(team.run(task="Read the files."))
    assert antiloop.verdict is not None
    assert (antiloop.verdict.detector, antiloop.verdict.outcome) == ("budget", "budget")
    assert result.stop_reason is not None
    assert "hard limit of 1000 tokens" in result.stop_reason
    used = spent(guard.store, "ag")
    assert (used.tokens_in, used.tokens_out) == (900, 120)
