"""AntiloopHooks in real CrewAI crews, driven by a scripted OpenAI-compatible backend.

CrewAI pins openai < 3, OpenTelemetry >= 1.45.1 and pydantic < 2.13, against the dev set, so
it lives in a venv of its own (``make crewai``: .cache/crewai); the scenes run there
(examples/crewai_crew.py --json) and the assertions run here.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from tests.conftest import ROOT, need_path

pytestmark = [pytest.mark.integration, pytest.mark.slow]
PYTHON = ROOT / ".cache" / "crewai" / "bin" / "python"
EXAMPLE = ROOT / "examples" / "crewai_crew.py"
FINGERPRINT = 'AGENT::worker::job_status::{"job":"42"}::job 42: pending#'


# one CrewAI process (its import alone takes seconds): the module's doctests, then the example
DRIVER = """
import doctest, json, runpy, sys
import antiloop.integrations.crewai as module
result = doctest.testmod(module)
sys.argv = [sys.argv[1], "--json"]
runpy.run_path(sys.argv[0], run_name="__main__")
print(json.dumps([result.attempted, result.failed]))
"""


@pytest.fixture(scope="module")
def scenes() -> dict[str, Any]:
    python = need_path(PYTHON, "the CrewAI venv (make crewai)")
    proc = subprocess.run(
        [str(python), "-c", DRIVER, str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    *_, scenes, doctests = proc.stdout.splitlines()
    return {**json.loads(scenes), "doctest": json.loads(doctests)}


def test_a_loop_ends_the_crew_at_its_next_model_call(scenes):
    """The second identical result stops the session; kickoff raises with the fingerprint."""
    loop = scenes["loop"]
    assert loop["ran"] == 2
    assert loop["answer"] is None
    assert loop["stopped"].startswith("antiloop: The run is stopped")
    assert f"[antiloop fingerprint: {FINGERPRINT}" in loop["stopped"]
    assert loop["fingerprint"].startswith(FINGERPRINT)
    assert loop["model_calls"] == 2  # the model was not asked a third time


def test_each_call_carries_the_tokens_of_the_model_turns_since_the_last(scenes):
    """The backend reports 100 * n prompt tokens and 7 completion tokens at turn n."""
    assert scenes["loop"]["steps"] == [[100, 7], [200, 7]]


def test_answer_mode_gives_the_hint_and_refuses_the_next_identical_call(scenes):
    """With on_stop=answer the agent reads the hint, then why the third call did not run."""
    answer = scenes["answer"]
    first, second, third = answer["model_read"]
    assert first == "job 42: pending"
    assert second.startswith("antiloop: The run is stopped")
    assert FINGERPRINT in second
    assert "already stopped" in third  # not CrewAI's bare "blocked by hook"
    assert answer["ran"] == 2
    assert answer["answer"] == "done"


def test_changing_results_are_progress(scenes):
    """The same call with a new result each time runs to the crew's answer."""
    assert scenes["progress"] == {"ran": 3, "answer": "done", "stopped": None}


def test_a_risky_tool_waits_for_a_person_and_a_refusal_keeps_it_from_running(scenes):
    """needs_approval asks before the call; refused, the tool never runs, the agent reads why."""
    approval = scenes["approval"]
    assert approval["asked"] == [["delete_file", {"path": "notes.txt"}]]
    assert approval["deleted"] == []
    (read,) = approval["model_read"]
    assert read.startswith("antiloop: A person refused this delete_file call: keep the notes.")
    assert approval["answer"] == "done"


def test_the_modules_examples_run_in_the_crewai_venv(scenes):
    """The docstring examples of antiloop.integrations.crewai (the dev venv has no crewai)."""
    attempted, failed = scenes["doctest"]
    assert attempted > 0
    assert failed == 0
