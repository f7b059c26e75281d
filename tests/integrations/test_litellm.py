"""AntiloopGuardrail in a real LiteLLM proxy (in-process) before a scripted backend.

The proxy needs mcp 2 while the dev set pins mcp 1, so it lives in a venv of its own
(``make litellm``: .cache/litellm); the scenes run there (examples/litellm_gateway.py --json)
and the assertions run here.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from tests.conftest import ROOT, need_path

pytestmark = pytest.mark.integration
PYTHON = ROOT / ".cache" / "litellm" / "bin" / "python"
EXAMPLE = ROOT / "examples" / "litellm_gateway.py"


@pytest.fixture(scope="module")
def scenes() -> dict[str, Any]:
    python = need_path(PYTHON, "the LiteLLM proxy venv (make litellm)")
    proc = subprocess.run(
        [str(python), str(EXAMPLE), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_the_model_reads_the_hint_in_place_of_the_second_identical_result(scenes):
    """At the gateway, the second identical result reaches the model as the hint."""
    first, second = scenes["loop"]["model_read"]
    assert first == "job 42: pending"
    assert second.startswith("antiloop: The run is stopped")
    assert "[antiloop fingerprint: AGENT::agent::job_status::" in second


def test_a_call_of_the_stopped_procedure_never_reaches_the_agent(scenes):
    """The model asks again; the gateway answers with the reason and the agent stops."""
    loop = scenes["loop"]
    assert loop["ran"] == 2
    assert loop["model_calls"] == 3
    assert loop["answer"].startswith("antiloop: The run is stopped")
    assert loop["fingerprint"].startswith("AGENT::agent::job_status::")


def test_each_result_is_recorded_once_with_its_call_id_and_tokens(scenes):
    """A resent conversation is not counted again; steps carry the response's tokens."""
    assert scenes["loop"]["steps"] == [
        {"id": "call_1", "tokens_in": 100, "tokens_out": 7},
        {"id": "call_2", "tokens_in": 200, "tokens_out": 7},
    ]


def test_changing_results_pass_the_gateway(scenes):
    """The same call with a new result each time runs to the model's answer."""
    assert scenes["progress"] == {"answer": "done", "ran": 3}
