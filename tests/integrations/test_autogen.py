"""AntiloopTermination in real AutoGen AgentChat teams driven by the replay client."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import need_module

need_module("autogen_agentchat", "autogen")
need_module("autogen_ext.models.replay", "autogen")

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import (
    AndTerminationCondition,
    OrTerminationCondition,
    TerminatedException,
)
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.messages import (
    StopMessage,
    TextMessage,
    ToolCallExecutionEvent,
    ToolCallRequestEvent,
)
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import FunctionCall
from autogen_core.models import (
    CreateResult,
    FunctionExecutionResult,
    ModelFamily,
    ModelInfo,
    RequestUsage,
)
from autogen_ext.models.replay import ReplayChatCompletionClient

from antiloop import Guard, GuardConfig
from antiloop.integrations.autogen import AntiloopTermination

pytestmark = pytest.mark.integration
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
INFO = ModelInfo(
    vision=False,
    function_calling=True,
    json_output=False,
    family=ModelFamily.UNKNOWN,
    structured_output=False,
)


def replay(
    times: int, arguments: str = '{"job": "42"}', tool: str = "job_status"
) -> ReplayChatCompletionClient:
    calls: list[str | CreateResult] = [
        CreateResult(
            finish_reason="function_calls",
            content=[FunctionCall(id=f"call_{i}", name=tool, arguments=arguments)],
            usage=RequestUsage(prompt_tokens=0, completion_tokens=0),
            cached=False,
        )
        for i in range(times)
    ]
    return ReplayChatCompletionClient([*calls, "finished"], model_info=INFO)


def status_tool(outputs: Iterator[str], ran: list[str]) -> Callable[[str], str]:
    def job_status(job: str) -> str:
        """The status of a job."""
        ran.append(job)
        return next(outputs)

    return job_status


def repeat(text: str) -> Iterator[str]:
    while True:
        yield text


def team_of(client: ReplayChatCompletionClient, tool: Any, condition: Any) -> RoundRobinGroupChat:
    agent = AssistantAgent("worker", model_client=client, tools=[tool])
    return RoundRobinGroupChat([agent], termination_condition=condition)


def events(i: int, output: str, args: str = '{"job": "42"}') -> list[Any]:
    return [
        ToolCallRequestEvent(
            source="worker", content=[FunctionCall(id=f"c{i}", name="job_status", arguments=args)]
        ),
        ToolCallExecutionEvent(
            source="worker",
            content=[FunctionExecutionResult(content=output, name="job_status", call_id=f"c{i}")],
        ),
    ]


def test_team_stops_at_the_second_identical_call_with_the_fingerprint():
    """Two identical calls with the same result stop the team; the reason names the loop."""
    ran: list[str] = []
    antiloop = AntiloopTermination()
    team = team_of(
        replay(5), status_tool(repeat("pending"), ran), antiloop | MaxMessageTermination(40)
    )
    result = asyncio.run(team.run(task="Check job 42."))
    assert ran == ["42", "42"]
    assert result.stop_reason is not None
    assert result.stop_reason.startswith("antiloop: job_status")
    assert "[fingerprint: AGENT::worker::job_status::" in result.stop_reason
    assert antiloop.verdict is not None
    assert antiloop.verdict.detector == "repeat"
    assert antiloop.guard.ended(antiloop.session) is not None


def test_changing_results_are_not_a_loop():
    """The same call with a new result each time runs until the model is finished."""
    ran: list[str] = []
    outputs = iter(["queued", "running", "complete"])
    antiloop = AntiloopTermination()
    team = team_of(
        replay(3), status_tool(outputs, ran), antiloop | TextMentionTermination("finished")
    )
    result = asyncio.run(team.run(task="Watch job 42."))
    assert ran == ["42", "42", "42"]
    assert result.stop_reason == "Text 'finished' mentioned"
    assert antiloop.verdict is None


def test_or_and_compose_like_autogen_conditions():
    """| stops as soon as antiloop stops; & waits until the other condition agrees too."""

    async def scenario() -> tuple[Any, Any, Any, Any]:
        either = AntiloopTermination() | MaxMessageTermination(100)
        assert isinstance(either, OrTerminationCondition)
        first = await either(events(0, "same"))
        stopped = await either(events(1, "same"))
        both = AntiloopTermination() & TextMentionTermination("give up")
        assert isinstance(both, AndTerminationCondition)
        await both(events(0, "same"))
        waiting = await both(events(1, "same"))
        done = await both([TextMessage(source="worker", content="I give up")])
        return first, stopped, waiting, done

    first, stopped, waiting, done = asyncio.run(scenario())
    assert first is None
    assert isinstance(stopped, StopMessage)
    assert "[fingerprint: AGENT::worker::job_status::" in stopped.content
    assert waiting is None
    assert isinstance(done, StopMessage)
    assert done.content.startswith("antiloop: job_status")
    assert done.content.endswith("Text 'give up' mentioned")


def test_stop_message_carries_the_verdict_as_metadata():
    """The StopMessage of the condition itself has the detector and fingerprint as metadata."""

    async def scenario() -> Any:
        condition = AntiloopTermination()
        await condition(events(0, "same"))
        return await condition(events(1, "same"))

    stop = asyncio.run(scenario())
    assert stop.source == "antiloop"
    assert stop.metadata["detector"] == "repeat"
    assert stop.metadata["fingerprint"].startswith("AGENT::worker::job_status::")


def test_fired_condition_raises_until_reset_and_keeps_the_guard_memory():
    """After a stop a call raises TerminatedException; after reset() the ended session stops."""

    async def scenario() -> Any:
        condition = AntiloopTermination()
        await condition(events(0, "same"))
        assert await condition(events(1, "same")) is not None
        with pytest.raises(TerminatedException):
            await condition([TextMessage(source="user", content="hi")])
        await condition.reset()
        assert not condition.terminated
        return await condition(events(2, "other", '{"job": "43"}'))

    again = asyncio.run(scenario())
    assert isinstance(again, StopMessage)
    assert "already stopped" in again.content


def test_ask_pauses_the_team_and_approval_resumes_it():
    """With repeat_action=ask the team pauses for a person; decide(True) and run() resume it."""
    ran: list[str] = []
    antiloop = AntiloopTermination(Guard(config=GuardConfig(repeat_action="ask")))
    team = team_of(
        replay(2),
        status_tool(repeat("pending"), ran),
        antiloop | TextMentionTermination("finished"),
    )

    async def scenario() -> tuple[Any, Any]:
        paused = await team.run(task="Check job 42.")
        assert antiloop.pending is not None
        assert antiloop.decide({"approved": True, "by": "ops"}).approved
        return paused, await team.run()

    paused, resumed = asyncio.run(scenario())
    assert paused.stop_reason.startswith("antiloop: a person must decide")
    assert resumed.stop_reason == "Text 'finished' mentioned"
    assert ran == ["42", "42"]


def test_refused_approval_keeps_the_team_stopped():
    """A refusal means the next run() stops again at once, with the person's comment."""
    antiloop = AntiloopTermination(Guard(config=GuardConfig(repeat_action="ask")))
    team = team_of(replay(3), status_tool(repeat("pending"), []), antiloop)

    async def scenario() -> Any:
        await team.run(task="Check job 42.")
        assert not antiloop.decide("reject").approved
        return await team.run()

    again = asyncio.run(scenario())
    assert again.stop_reason is not None
    assert again.stop_reason.startswith("antiloop: A person refused")


def deleter(ran: list[str]) -> Callable[[str], str]:
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    return delete_file


def tool_results(result: Any) -> list[Any]:
    return [r for m in result.messages if isinstance(m, ToolCallExecutionEvent) for r in m.content]


def approval_run(antiloop: AntiloopTermination, ran: list[str], times: int = 1) -> Any:
    client = replay(times, '{"path": "notes.txt"}', "delete_file")
    agent = AssistantAgent(
        "cleaner", model_client=client, tools=antiloop.protect(deleter(ran), agent="cleaner")
    )
    team = RoundRobinGroupChat(
        [agent], termination_condition=antiloop | TextMentionTermination("finished")
    )
    return asyncio.run(team.run(task="Clean up notes.txt."))


RISKY = {"delete_file"}


def test_a_risky_call_waits_for_the_person_and_runs_once_approved():
    """The tool has not run while the person is asked (asynchronously); approved, it runs."""
    ran: list[str] = []
    asked: list[tuple[str, dict[str, Any], list[str]]] = []

    async def ask(tool: str, args: dict[str, Any]) -> dict[str, Any]:
        asked.append((tool, args, list(ran)))
        await asyncio.sleep(0)
        return {"approved": True, "by": "ops"}

    guard = Guard()
    antiloop = AntiloopTermination(guard, needs_approval=lambda tool, args: tool in RISKY, ask=ask)
    result = approval_run(antiloop, ran)
    assert asked == [("delete_file", {"path": "notes.txt"}, [])]
    assert ran == ["notes.txt"]
    assert [r.content for r in tool_results(result)] == ["deleted notes.txt"]
    (record,) = [r for r in guard.store.audit_records(antiloop.session) if r.kind == "approval"]
    assert (record.tool, record.agent) == ("delete_file", "cleaner")
    assert record.detail["decided_by"] == "ops"
    assert record.detail["channel"] == "autogen-tool"
    assert record.detail["rule"] == "needs_approval"


def test_a_refused_call_never_runs_and_the_model_reads_why():
    """Refused, the tool does not run; its result is the refusal with the person's words."""
    ran: list[str] = []
    antiloop = AntiloopTermination(
        needs_approval=lambda tool, args: tool in RISKY,
        ask=lambda tool, args: {"approved": False, "comment": "keep the notes"},
    )
    result = approval_run(antiloop, ran, times=2)
    assert ran == []
    texts = [r.content for r in tool_results(result)]
    assert len(texts) == 2
    assert all(
        t.startswith("antiloop: A person refused this delete_file call: keep") for t in texts
    )
    assert result.stop_reason == "Text 'finished' mentioned"  # refusals are no tool runs


def test_the_policy_decides_with_the_approval_module_rules():
    """An antiloop.approval policy: a read is allowed unasked, a deny refuses unasked."""
    from antiloop.approval import ApprovalPolicy, Rule

    ran: list[str] = []
    asked: list[str] = []
    policy = ApprovalPolicy(rules=(Rule("deny", tools=("delete_file",), name="no-deletes"),))
    antiloop = AntiloopTermination(
        needs_approval=policy, ask=lambda tool, args: asked.append(tool) or True
    )
    result = approval_run(antiloop, ran)
    assert (ran, asked) == ([], [])
    (refused,) = tool_results(result)
    assert "refused by policy" in refused.content


def test_approval_needs_a_way_to_ask():
    with pytest.raises(ValueError, match="needs ask="):
        AntiloopTermination(needs_approval=lambda tool, args: True)


def test_example_script_runs_offline():
    """examples/autogen_team.py prints the stop, the progress run and the approval."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "autogen_team.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    lines = proc.stdout.splitlines()
    assert "loop: stopped after 2 calls" in lines
    assert any("[fingerprint: AGENT::worker::job_status::" in line for line in lines)
    assert "progress: 3 calls, stop reason \"Text 'finished' mentioned\"" in lines
    assert "approval: resumed, stop reason \"Text 'finished' mentioned\"" in lines
    assert "before the call: asked to approve delete_file {'path': 'notes.txt'}" in lines
    assert (
        "before the call: the model read 'antiloop: A person refused this delete_file call: "
        "keep the n'" in lines
    )
