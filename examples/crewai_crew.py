"""antiloop inside a CrewAI crew, offline: its tool-call hooks stop a loop and gate a risky tool.

Run: ``pip install -e '.[crewai]'`` then ``python examples/crewai_crew.py``.

A scripted OpenAI-compatible backend on 127.0.0.1 stands in for the LLM (CrewAI's own OpenAI
provider talks to it); ``AntiloopHooks`` is registered for the crews of each scene:

1. the model keeps asking for the same job status and gets the same answer: at the second
   identical result the crew ends at its next model call (``HookAborted``) with the
   fingerprint; with ``on_stop="answer"`` the agent reads the hint in place of the result and
   the next identical call does not run;
2. the same calls with a new status each time: progress, not a loop;
3. a risky tool (``delete_file``) waits for a person's answer before it runs; refused, it never
   runs and the agent reads why.

``--json`` prints what happened as one JSON object (the tests read it).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

for name, value in {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "OTEL_SDK_DISABLED": "true",
}.items():
    os.environ.setdefault(name, value)
logging.disable(logging.WARNING)  # CrewAI warns of approximate token counts for our model
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integrations"))

from litellm_backend import ScriptedBackend  # noqa: E402


def crew_run(url: str, tool: Any, task: str) -> tuple[str | None, str | None]:
    """One agent, one task, one tool: the crew's answer, or the reason it was ended."""
    from crewai import LLM, Agent, Crew, Task
    from crewai.hooks import HookAborted

    llm = LLM(model="openai/scripted", base_url=url, api_key="sk-scripted", temperature=0)
    worker = Agent(
        role="worker",
        goal="Answer the question with the tools.",
        backstory="A careful operator.",
        llm=llm,
        tools=[tool],
        max_iter=8,
        cache=False,
        verbose=False,
    )
    job = Task(description=task, expected_output="A short answer.", agent=worker)
    try:
        return str(Crew(agents=[worker], tasks=[job], verbose=False).kickoff()), None
    except HookAborted as stop:
        return None, stop.reason


def status_tool(outputs: Callable[[str], str], ran: list[str]) -> Any:
    """A ``job_status`` tool answering ``outputs(job)``; each run is noted in ``ran``."""
    from crewai.tools import tool

    @tool("job_status")
    def job_status(job: str) -> str:
        """The status of a job."""
        ran.append(job)
        return outputs(job)

    return job_status


def tool_results(backend: ScriptedBackend) -> list[str]:
    """What the model read as the tool results, in its last request."""
    return [m["content"] for m in backend.requests[-1]["messages"] if m["role"] == "tool"]


def main() -> dict[str, Any]:
    """Run the three scenes; return what happened."""
    from crewai.tools import tool

    from antiloop import Guard
    from antiloop.integrations.crewai import AntiloopHooks
    from antiloop.testing import RecordingListener

    scenes: dict[str, Any] = {}
    with ScriptedBackend("job_status", {"job": "42"}, 5) as backend:
        guard = Guard()
        seen = RecordingListener()
        guard.listeners.append(seen)
        ran: list[str] = []
        with AntiloopHooks(guard, session="loop"):
            answer, stopped = crew_run(
                backend.url, status_tool(lambda job: f"job {job}: pending", ran), "Is job 42 done?"
            )
        ended = guard.ended("loop")
        scenes["loop"] = {
            "ran": len(ran),
            "answer": answer,
            "stopped": stopped,
            "model_calls": len(backend.requests),
            "model_read": tool_results(backend),
            "fingerprint": ended.fingerprint if ended else None,
            "steps": [[s.tokens_in, s.tokens_out] for s, _ in seen.verdicts],
        }

        backend.reset("job_status", {"job": "42"}, 3)
        ran = []
        with AntiloopHooks(session="answer", on_stop="answer"):
            answer, stopped = crew_run(
                backend.url, status_tool(lambda job: f"job {job}: pending", ran), "Is job 42 done?"
            )
        scenes["answer"] = {
            "ran": len(ran),
            "answer": answer,
            "stopped": stopped,
            "model_read": tool_results(backend),
        }

        backend.reset("job_status", {"job": "7"}, 3)
        statuses = iter(["queued", "running", "finished"])
        ran = []
        with AntiloopHooks(session="progress"):
            answer, stopped = crew_run(
                backend.url, status_tool(lambda job: f"job {job}: {next(statuses)}", ran), "Job 7?"
            )
        scenes["progress"] = {"ran": len(ran), "answer": answer, "stopped": stopped}

        backend.reset("delete_file", {"path": "notes.txt"}, 1)
        deleted: list[str] = []
        asked: list[tuple[str, dict[str, Any]]] = []

        @tool("delete_file")
        def delete_file(path: str) -> str:
            """Delete a file."""
            deleted.append(path)
            return f"deleted {path}"

        def person(name: str, args: dict[str, Any]) -> dict[str, Any]:
            asked.append((name, args))
            return {"approved": False, "comment": "keep the notes", "by": "ops"}

        with AntiloopHooks(
            session="approval",
            needs_approval=lambda name, args: name == "delete_file",
            decide=person,
        ):
            answer, stopped = crew_run(backend.url, delete_file, "Clean up notes.txt.")
        scenes["approval"] = {
            "asked": [[name, args] for name, args in asked],
            "deleted": deleted,
            "answer": answer,
            "model_read": tool_results(backend),
        }
    return scenes


if __name__ == "__main__":
    result = main()
    if "--json" in sys.argv:
        print(json.dumps(result))
    else:
        loop, progress, approval = result["loop"], result["progress"], result["approval"]
        print(f"loop: the tool ran {loop['ran']} times; the crew ended: {loop['stopped']}")
        print(f"loop: fingerprint {loop['fingerprint']}")
        print(f"progress: {progress['ran']} calls, answer {progress['answer']!r}")
        print(f"approval: asked {approval['asked']}, deleted {approval['deleted']}")
