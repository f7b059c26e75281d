"""antiloop in a LangChain v1 agent, offline: a scripted chat model stands in for the LLM.

Run: ``pip install -e '.[langchain]'`` then ``python examples/langchain_agent.py``.

Three short runs:

1. the model keeps asking for the same job status and gets the same answer: antiloop stops the
   run at the second identical call and reports the loop's fingerprint;
2. the same calls, but the status changes each time: progress, not a loop;
3. ``delete_file`` needs a person's approval: the run pauses with ``interrupt()`` and
   ``Command(resume=...)`` continues it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from antiloop.integrations.langchain import AntiloopMiddleware


class ScriptedChatModel(GenericFakeChatModel):
    """LangChain's fake chat model, accepting tools (it replays its script whatever they are)."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        """Tools change nothing: the script decides."""
        return self


def same_call(name: str, args: dict[str, Any], times: int) -> Iterator[AIMessage]:
    """A model that asks for the same tool call ``times`` times, then answers."""
    for i in range(times):
        yield AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{i}"}])
    yield AIMessage(content="done")


STATUSES = iter(["queued", "running", "finished"])


@tool
def job_status(job: str) -> str:
    """The status of a job (always the same: the job is stuck)."""
    return f"job {job}: pending"


@tool
def moving_status(job: str) -> str:
    """The status of a job that makes progress."""
    return f"job {job}: {next(STATUSES)}"


@tool
def delete_file(path: str) -> str:
    """Delete a file (pretend)."""
    return f"deleted {path}"


def tool_messages(messages: list[Any]) -> list[ToolMessage]:
    """The tool results in a run's messages."""
    return [m for m in messages if isinstance(m, ToolMessage)]


def main() -> None:
    """Run the three scenes and print what happened."""
    # 1. A loop: same call, same result.
    model = ScriptedChatModel(messages=same_call("job_status", {"job": "42"}, 5))
    agent = create_agent(model, [job_status], middleware=[AntiloopMiddleware()])
    out = agent.invoke({"messages": [{"role": "user", "content": "Is job 42 done?"}]})
    results = tool_messages(out["messages"])
    meta = results[-1].response_metadata["antiloop"]
    print(f"loop: stopped after {len(results)} calls ({results[-1].status})")
    print(f"loop: fingerprint {meta['fingerprint']}")
    print(f"loop: last message {out['messages'][-1].content[:60]!r}")

    # 2. Progress: same call, a different result each time.
    model = ScriptedChatModel(messages=same_call("moving_status", {"job": "7"}, 3))
    agent = create_agent(model, [moving_status], middleware=[AntiloopMiddleware()])
    out = agent.invoke({"messages": [{"role": "user", "content": "Watch job 7."}]})
    results = tool_messages(out["messages"])
    flagged = [m for m in results if m.status == "error"]
    answer = out["messages"][-1].content
    print(f"progress: {len(results)} calls, {len(flagged)} flagged, answer {answer!r}")

    # 3. Approval: interrupt() pauses the run; Command(resume=...) continues it.
    model = ScriptedChatModel(messages=same_call("delete_file", {"path": "notes.txt"}, 1))
    middleware = AntiloopMiddleware(needs_approval=lambda tool, args: tool == "delete_file")
    saver = InMemorySaver()
    agent = create_agent(model, [delete_file], middleware=[middleware], checkpointer=saver)
    config = {"configurable": {"thread_id": "approval-demo"}}
    task = {"messages": [{"role": "user", "content": "Clean up."}]}
    paused = agent.invoke(task, config, version="v2")
    question = paused.interrupts[0].value
    print(f"approval: paused, asking about {question['tool']} {question['args']}")
    done = agent.invoke(Command(resume={"type": "approve"}), config, version="v2")
    results = tool_messages(done.value["messages"])
    answer = done.value["messages"][-1].content
    print(f"approval: resumed, tool said {results[-1].content!r}, answer {answer!r}")


if __name__ == "__main__":
    main()
