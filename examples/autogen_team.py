"""antiloop in an AutoGen AgentChat team, offline: the replay client stands in for the LLM.

Run: ``pip install -e '.[autogen]'`` then ``python examples/autogen_team.py``.

Four short runs:

1. the assistant keeps asking for the same job status and gets the same answer: the team stops
   at the second identical call, with the loop's fingerprint in the stop reason;
2. the same calls, but the status changes each time: progress, not a loop;
3. with ``repeat_action="ask"`` the loop pauses the team for a person; approving and calling
   ``team.run()`` again resumes it where it stopped;
4. a risky tool (``delete_file``, the approval policy asks) waits for a person's answer before it
   runs; refused, it never runs and the model reads why.
"""

from __future__ import annotations

import asyncio
import logging

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.messages import ToolCallExecutionEvent
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import FunctionCall
from autogen_core.models import CreateResult, ModelFamily, ModelInfo, RequestUsage
from autogen_ext.models.replay import ReplayChatCompletionClient

from antiloop import Guard, GuardConfig
from antiloop.integrations.autogen import AntiloopTermination

MODEL_INFO = ModelInfo(
    vision=False,
    function_calling=True,
    json_output=False,
    family=ModelFamily.UNKNOWN,
    structured_output=False,
)


def replay(tool: str, arguments: str, times: int) -> ReplayChatCompletionClient:
    """A model that asks for the same tool call ``times`` times, then says "finished"."""
    calls: list[str | CreateResult] = [
        CreateResult(
            finish_reason="function_calls",
            content=[FunctionCall(id=f"call_{i}", name=tool, arguments=arguments)],
            usage=RequestUsage(prompt_tokens=0, completion_tokens=0),
            cached=False,
        )
        for i in range(times)
    ]
    return ReplayChatCompletionClient([*calls, "finished"], model_info=MODEL_INFO)


STATUSES = iter(["queued", "running", "complete"])


def job_status(job: str) -> str:
    """The status of a job (always the same: the job is stuck)."""
    return f"job {job}: pending"


def moving_status(job: str) -> str:
    """The status of a job that makes progress."""
    return f"job {job}: {next(STATUSES)}"


def delete_file(path: str) -> str:
    """Delete a file (in this example, only say so)."""
    return f"deleted {path}"


async def person(tool: str, args: dict[str, object]) -> dict[str, object]:
    """Stands in for a person asked on a chat or a web page: says no."""
    print(f"before the call: asked to approve {tool} {args}")
    return {"approved": False, "comment": "keep the notes", "by": "ops"}


def executions(messages: list[object]) -> int:
    """How many tool executions a run's messages hold."""
    return sum(isinstance(m, ToolCallExecutionEvent) for m in messages)


async def main() -> None:
    """Run the four scenes and print what happened."""
    logging.getLogger("autogen_core.events").setLevel(logging.ERROR)  # the replay client is chatty

    # 1. A loop: same call, same result.
    antiloop = AntiloopTermination()
    agent = AssistantAgent(
        "worker", model_client=replay("job_status", '{"job": "42"}', 5), tools=[job_status]
    )
    team = RoundRobinGroupChat([agent], termination_condition=antiloop | MaxMessageTermination(40))
    result = await team.run(task="Check job 42.")
    print(f"loop: stopped after {executions(result.messages)} calls")
    print(f"loop: stop reason {result.stop_reason}")

    # 2. Progress: same call, a different result each time.
    antiloop = AntiloopTermination()
    agent = AssistantAgent(
        "watcher", model_client=replay("moving_status", '{"job": "7"}', 3), tools=[moving_status]
    )
    stop = antiloop | TextMentionTermination("finished")
    team = RoundRobinGroupChat([agent], termination_condition=stop)
    result = await team.run(task="Watch job 7.")
    print(f"progress: {executions(result.messages)} calls, stop reason {result.stop_reason!r}")

    # 3. Approval: an ask verdict pauses the team; approving and run() resume it.
    antiloop = AntiloopTermination(Guard(config=GuardConfig(repeat_action="ask")))
    agent = AssistantAgent(
        "worker", model_client=replay("job_status", '{"job": "42"}', 2), tools=[job_status]
    )
    team = RoundRobinGroupChat(
        [agent], termination_condition=antiloop | TextMentionTermination("finished")
    )
    result = await team.run(task="Check job 42.")
    print(f"approval: paused ({antiloop.pending is not None}): {result.stop_reason[:50]}")
    antiloop.decide({"approved": True, "by": "me"})
    result = await team.run()
    print(f"approval: resumed, stop reason {result.stop_reason!r}")

    # 4. Approval before a call: the policy asks, the person refuses, the tool never runs.
    antiloop = AntiloopTermination(
        needs_approval=lambda tool, args: tool == "delete_file", ask=person
    )
    agent = AssistantAgent(
        "cleaner",
        model_client=replay("delete_file", '{"path": "notes.txt"}', 1),
        tools=antiloop.protect(delete_file, agent="cleaner"),
    )
    team = RoundRobinGroupChat(
        [agent], termination_condition=antiloop | TextMentionTermination("finished")
    )
    result = await team.run(task="Clean up notes.txt.")
    (said,) = [
        r.content
        for m in result.messages
        if isinstance(m, ToolCallExecutionEvent)
        for r in m.content
    ]
    print(f"before the call: the model read {said[:60]!r}")


if __name__ == "__main__":
    asyncio.run(main())
