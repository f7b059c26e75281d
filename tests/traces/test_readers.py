"""The trace readers against the 100 real runs of the shared corpus."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import SHARED, need_path

from antiloop.core.step import Step
from antiloop.traces import Run, detect_format, iter_paths, read_runs

CORPUS = SHARED / "corpus"


@pytest.fixture(scope="module", autouse=True)
def _corpus() -> None:
    """The shared corpus is needed (skip on a laptop without it, fail under CI=true)."""
    need_path(CORPUS, "the shared corpus beside the repository")


FOLDER_FORMATS = {
    "mini-swe-agent-gemini-3-pro": "mini-swe-agent-1",
    "mini-swe-agent-deepseek": "mini-swe-agent-2",
    "swe-agent": "swe-agent",
    "openhands": "openhands",
}

OPENHANDS_SKIPPED = {"system", "message", "recall", "change_agent_state", "null"}


def corpus_files() -> list[Path]:
    if not CORPUS.is_dir():
        return []
    return [p for p in iter_paths([CORPUS]) if p.suffix != ".md"]


def expected_format(path: Path) -> str:
    return FOLDER_FORMATS[path.relative_to(CORPUS).parts[0]]


def rel(path: Path) -> str:
    return str(path.relative_to(CORPUS))


# --- independent step counts ---------------------------------------------------------------
#
# These count differently from the readers, so a reader bug does not hide itself:
# mini-swe-agent v1 alternates assistant/user messages strictly in this corpus, so its steps are
# the assistant messages minus the format-error replies; v2 steps are the tool results plus the
# final submission call (answered by the "exit" message); SWE-agent steps are the trajectory
# entries; OpenHands steps are the agent actions that carry a tool call, in these files exactly
# the actions FORMATS.md counts (checked by the second OpenHands count below).


def _v1_count(doc: dict[str, Any]) -> int:
    messages = doc["messages"]
    assistants = sum(1 for m in messages if m["role"] == "assistant")
    format_errors = sum(
        1
        for m in messages
        if m["role"] == "user" and m["content"].startswith("Please always provide EXACTLY ONE")
    )
    return assistants - format_errors


def _v2_count(doc: dict[str, Any]) -> int:
    messages = doc["messages"]
    results = sum(1 for m in messages if m["role"] == "tool")
    return results + (1 if messages[-1]["role"] == "exit" else 0)


def _openhands_count(events: list[dict[str, Any]]) -> int:
    with_tool_call = sum(
        1
        for e in events
        if "action" in e and e.get("source") == "agent" and e.get("tool_call_metadata")
    )
    by_rule = sum(
        1
        for e in events
        if e.get("source") == "agent" and "action" in e and e["action"] not in OPENHANDS_SKIPPED
    )
    assert with_tool_call == by_rule
    return by_rule


def expected_counts(path: Path) -> list[int]:
    fmt = expected_format(path)
    if path.suffix == ".jsonl":
        lines = path.read_text(encoding="utf-8").splitlines()
        return [_openhands_count(json.loads(line)["history"]) for line in lines if line.strip()]
    doc = json.loads(path.read_text(encoding="utf-8"))
    if fmt == "mini-swe-agent-1":
        return [_v1_count(doc)]
    if fmt == "mini-swe-agent-2":
        return [_v2_count(doc)]
    if fmt == "swe-agent":
        return [len(doc["trajectory"])]
    return [_openhands_count(doc)]


# Counts checked by hand on a few files (message listings read one by one).
PINNED_COUNTS = {
    "mini-swe-agent-gemini-3-pro/astropy__astropy-7336.traj.json": [18],
    "mini-swe-agent-gemini-3-pro/django__django-10097.traj.json": [22],
    "mini-swe-agent-deepseek/deepseek_chat_test_1-100/django__django-14752.traj.json": [31],
    "mini-swe-agent-deepseek/deepseek_lite_dev_noparallel/pvlib__pvlib-python-1606.traj.json": [84],
    "swe-agent/test_data__pydicom__pydicom-1458.traj": [12],
    "swe-agent/demo_ctf__crypto__eps.traj": [14],
    "openhands/multi_swe_bench_examples_output.jsonl": [23, 33, 49],
    "openhands/runtime_trajs_basic.json": [2],
    "openhands/runtime_trajs_basic_gui_mode.json": [4],
    "openhands/runtime_trajs_wrong_initial_state.json": [4],
}


def runs_of(name: str) -> list[Run]:
    return list(read_runs(CORPUS / name))


def step(name: str, index: int, record: int = 0) -> Step:
    return runs_of(name)[record].steps[index]


# --- whole corpus ----------------------------------------------------------------------------


def test_corpus_holds_100_runs_in_98_files() -> None:
    """The corpus reads as 100 runs from 98 trace files, four formats."""
    files = corpus_files()
    runs = [run for path in files for run in read_runs(path)]
    assert len(files) == 98
    assert len(runs) == 100
    assert {r.format for r in runs} == set(FOLDER_FORMATS.values())


@pytest.mark.parametrize("path", corpus_files(), ids=rel)
def test_corpus_file_format_is_detected(path: Path) -> None:
    """Each corpus file's format is detected from its content."""
    assert detect_format(path) == expected_format(path)


@pytest.mark.parametrize("path", corpus_files(), ids=rel)
def test_corpus_run_has_the_canonical_step_count(path: Path) -> None:
    """Each run has as many steps as FORMATS.md's canonical index counts."""
    runs = list(read_runs(path))
    assert [len(r.steps) for r in runs] == expected_counts(path)
    for run in runs:
        assert run.format == expected_format(path)
        assert not run.problems
        assert run.costs == () or len(run.costs) == len(run.steps)
        assert all(s.tool and isinstance(s.args, dict) for s in run.steps)


@pytest.mark.parametrize(("name", "counts"), sorted(PINNED_COUNTS.items()))
def test_pinned_step_counts(name: str, counts: list[int]) -> None:
    """Step counts verified by hand on a few files hold."""
    assert [len(r.steps) for r in runs_of(name)] == counts


def test_goal_is_the_task_text_trimmed() -> None:
    """Every corpus step carries its run's task as goal, at most 2,000 characters."""
    for path in corpus_files():
        for run in read_runs(path):
            goals = {s.goal for s in run.steps}
            assert len(goals) <= 1
            goal = goals.pop() if goals else "x"
            assert goal
            assert len(goal) <= 2000


# --- mini-swe-agent v1 -----------------------------------------------------------------------

V1 = "mini-swe-agent-gemini-3-pro/astropy__astropy-7336.traj.json"


def test_v1_steps_are_bash_commands_with_exit_codes() -> None:
    """A v1 step is the one bash block, with the return code and output of the next message."""
    first = step(V1, 0)
    assert (first.tool, dict(first.args), first.exit_code) == ("bash", {"command": "ls -la"}, 0)
    assert first.output is not None
    assert first.output.startswith("total 508\n")
    assert first.session == "astropy__astropy-7336"
    assert first.agent == "mini-swe-agent"
    assert first.cwd == "/testbed"
    assert first.message is not None
    assert first.message.startswith("I need to understand the structure")
    assert first.goal is not None
    assert first.goal.startswith("units.quantity_input decorator fails")
    run = step(V1, 2)
    assert run.args == {"command": "python3 reproduce_issue.py"}
    assert run.output is not None
    assert run.output.startswith("Traceback (most recent call last):")


def test_v1_submission_is_the_last_step() -> None:
    """The submit command counts as a step; its result is the raw diff without a return code."""
    last = runs_of(V1)[0].steps[-1]
    assert last.args["command"].startswith("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")
    assert last.exit_code is None
    assert last.output is not None
    assert last.output.startswith("diff --git a/astropy/units/decorators.py")


def test_v1_format_error_turns_are_skipped() -> None:
    """A turn with several bash blocks is no step, so the next command keeps the index."""
    name = "mini-swe-agent-gemini-3-pro/django__django-10097.traj.json"
    assert step(name, 7).args["command"] == "python3 reproduce_issue.py"
    assert step(name, 8).args["command"] == (
        'grep "user:pass authentication" django/core/validators.py'
    )


def test_v1_timeout_is_an_error_without_exit_code() -> None:
    """A timed-out command has the timeout notice as error and the partial output as output."""
    timed_out = step("mini-swe-agent-gemini-3-pro/scikit-learn__scikit-learn-25232.traj.json", 30)
    assert timed_out.args == {"command": "pytest sklearn/impute/tests/test_impute.py"}
    assert timed_out.exit_code is None
    assert timed_out.error is not None
    assert timed_out.error.startswith("The last command <command>pytest")
    assert timed_out.output is not None
    assert "test session starts" in timed_out.output


def test_v1_long_output_joins_head_and_tail() -> None:
    """An elided output reads as head, the elision note, then tail."""
    long = step("mini-swe-agent-gemini-3-pro/pylint-dev__pylint-6528.traj.json", 0)
    assert long.args == {"command": "ls -R"}
    assert long.exit_code == 0
    assert long.output is not None
    assert long.output.startswith(".:\nCODE_OF_CONDUCT.md\n")
    assert "\n[67261 characters elided]\n" in long.output


def test_v1_costs_come_from_each_turn() -> None:
    """Per-step usage is the response usage; the total is the recorded instance cost."""
    run = runs_of(V1)[0]
    assert run.costs[0].input_tokens == 1753
    assert run.costs[0].output_tokens == 190
    assert run.costs[0].cost_usd == pytest.approx(0.005786)
    assert run.total_cost_usd == pytest.approx(0.156707)
    assert run.meta["model"] == "google/gemini-3-pro-preview"
    assert run.meta["exit_status"] == "Submitted"


# --- mini-swe-agent v2 -----------------------------------------------------------------------

V2 = "mini-swe-agent-deepseek/deepseek_chat_test_1-100/django__django-14752.traj.json"


def test_v2_steps_are_tool_calls() -> None:
    """A v2 step is one tool call with the command from its JSON arguments."""
    first = step(V2, 0)
    assert first.tool == "bash"
    assert first.args == {
        "command": 'find /testbed -type f -name "*.py" | grep -i autocomplete | head -20'
    }
    assert first.exit_code == 0
    assert first.output == (
        "/testbed/django/contrib/admin/views/autocomplete.py\n"
        "/testbed/tests/admin_views/test_autocomplete_view.py\n"
        "/testbed/tests/admin_widgets/test_autocomplete_widget.py"
    )
    assert first.message is not None
    assert first.message.startswith("I'll start by exploring the codebase")


def test_v2_submission_takes_the_exit_message() -> None:
    """The final call has no tool message; the exit message's diff is its output."""
    last = step(V2, 30)
    assert last.args == {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat patch.txt"}
    assert last.output is not None
    assert last.output.startswith("diff --git a/django/contrib/admin/views/autocomplete.py")


def test_v2_exception_is_an_error_with_exit_minus_one() -> None:
    """An execution exception gives the error text and return code -1."""
    name = "mini-swe-agent-deepseek/deepseek_lite_dev_noparallel/pvlib__pvlib-python-1606.traj.json"
    failed = step(name, 10)
    assert failed.args == {"command": "pip install -e ."}
    assert failed.exit_code == -1
    assert failed.failed
    assert failed.error is not None
    assert "timed out after 60 seconds" in failed.error
    assert failed.output is not None
    assert failed.output.startswith("Obtaining file:///testbed")


def test_v2_costs_and_meta() -> None:
    """v2 usage and cost are read per turn, the model from the config."""
    run = runs_of(V2)[0]
    assert run.costs[0].input_tokens == 1995
    assert run.costs[0].output_tokens == 93
    assert run.total_cost_usd == pytest.approx(0.013638016)
    assert run.meta["model"] == "deepseek/deepseek-chat"
    assert run.meta["trajectory_format"] == "mini-swe-agent-1.1"


# --- SWE-agent -------------------------------------------------------------------------------

PYDICOM = "swe-agent/test_data__pydicom__pydicom-1458.traj"


def test_swe_agent_commands_and_shell_commands() -> None:
    """The interface commands of PROTOCOL §3.1 are shell commands, as SWE-agent runs them; the
    commands that act on the open file name it in paths; other commands are their own tools."""
    steps = runs_of(PYDICOM)[0].steps
    assert (steps[0].tool, dict(steps[0].args)) == ("bash", {"command": "create reproduce_bug.py"})
    assert steps[1].tool == "bash"
    command = steps[1].args["command"]
    assert command.startswith("edit 1:1\nimport numpy as np\n")
    assert command.endswith("\nend_of_edit")
    assert steps[1].paths == ("/pydicom__pydicom/reproduce_bug.py",)
    assert (steps[2].tool, dict(steps[2].args)) == ("bash", {"command": "python reproduce_bug.py"})
    assert steps[2].output is not None
    assert steps[2].output.startswith("Traceback")
    assert steps[2].exit_code is None
    assert dict(steps[3].args) == {"command": 'find_file "numpy_handler.py"'}
    assert steps[4].args == {"command": "open pydicom/pixel_data_handlers/numpy_handler.py 293"}
    assert steps[4].paths == ()  # open names its file
    assert steps[-1].tool == "submit"
    assert steps[0].agent == "primary"
    assert steps[0].cwd == "/pydicom__pydicom"


def test_swe_agent_rejected_edit_is_an_error() -> None:
    """An edit refused for syntax errors carries the error codes as error."""
    rejected = step(PYDICOM, 5)
    assert rejected.args["command"].startswith("edit ")
    assert rejected.error == "edit not applied: E999 SyntaxError: unmatched ']'"
    assert rejected.failed


def test_swe_agent_wrong_flag_is_an_error() -> None:
    """A CTF submission answered 'Wrong flag!' failed."""
    wrong = step("swe-agent/demo_ctf__crypto__eps.traj", 8)
    assert wrong.tool == "submit"
    assert wrong.error == "Wrong flag!"


def test_swe_agent_roles_are_agents(tmp_path: Path) -> None:
    """A multi-agent run (CodeR's roles): each step's agent is the one whose message issued it;
    a step no message issued keeps the run's first agent."""
    actions = [("Manager", "plan"), ("Reproducer", "python r.py"), ("Tester", "python r.py")]
    history: list[dict[str, Any]] = [{"role": "system", "content": "s", "agent": "Manager"}]
    for agent, action in actions:
        history.append({"role": "assistant", "action": action + "\n", "agent": agent})
    trajectory = [{"action": a + "\n", "observation": "ok"} for _, a in [*actions, ("", "ls")]]
    path = tmp_path / "roles.traj"
    path.write_text(json.dumps({"trajectory": trajectory, "history": history}), encoding="utf-8")
    (run,) = read_runs(path)
    assert [s.agent for s in run.steps] == ["Manager", "Reproducer", "Tester", "Manager"]


def test_swe_agent_function_calls_keep_their_arguments() -> None:
    """With SWE-agent 1.x tool calls in the history, the model's JSON arguments are the args."""
    edit = step("swe-agent/test_data__6e44b9__sweagenttestrepo-1c2844.traj", 2)
    assert edit.tool == "edit"
    assert edit.args == {
        "search": "def division(a: float, b: float) -> float",
        "replace": "def division(a: float, b: float) -> float:",
        "replace-all": False,
    }
    assert edit.agent == "main"


# --- OpenHands -------------------------------------------------------------------------------

MULTI = "openhands/multi_swe_bench_examples_output.jsonl"


def test_openhands_jsonl_has_one_run_per_line() -> None:
    """Each line of the eval output is a run, numbered by its 0-based line."""
    runs = runs_of(MULTI)
    assert [r.record for r in runs] == [0, 1, 2]
    assert [r.meta["instance_id"] for r in runs] == [
        "ponylang__ponyc-4595",
        "ponylang__ponyc-4593",
        "ponylang__ponyc-4588",
    ]
    assert runs[2].meta["error"].startswith("RuntimeError: Agent reached maximum iteration")
    assert runs[0].steps[0].agent == "CodeActAgent"
    assert runs[0].steps[0].session == "ponylang__ponyc-4595"


def test_openhands_run_step_has_exit_code_and_output() -> None:
    """A bash action takes its observation's content and exit code."""
    failed = step(MULTI, 1, record=1)
    assert failed.tool == "execute_bash"
    assert failed.args == {"command": "ls src/lib"}
    assert failed.exit_code == 2
    assert failed.output == "ls: cannot access 'src/lib': No such file or directory"
    assert failed.cwd == "/workspace/ponylang__ponyc__0.1"


def test_openhands_error_without_action_is_no_step() -> None:
    """An error observation caused by no action is kept in meta, not counted."""
    run = runs_of(MULTI)[1]
    assert run.meta["orphan_errors"] == [
        {
            "id": 29,
            "content": "Parameter 'command' is expected to be one of "
            "['view', 'create', 'str_replace', 'insert', 'undo_edit'].",
        }
    ]


def test_openhands_event_list_uses_the_model_arguments() -> None:
    """A str_replace_editor read keeps the model's command 'view'; finish is the last step."""
    steps = runs_of("openhands/runtime_trajs_wrong_initial_state.json")[0].steps
    assert [s.tool for s in steps] == [
        "str_replace_editor",
        "execute_bash",
        "str_replace_editor",
        "finish",
    ]
    assert steps[0].args == {"command": "view", "path": "/workspace"}
    assert steps[1].args["command"] == "mv /workspace/game_2048.py /workspace/2048.py"
    assert steps[1].exit_code == 0
    assert steps[0].goal == "Please rename game_2048.py to 2048.py"
    assert steps[0].message == (
        "I'll help you rename the file. First, let me check if the file exists and its location."
    )


def test_openhands_think_is_a_step_with_its_thought() -> None:
    """A think action is a step whose message is the thought."""
    steps = runs_of(MULTI)[0].steps
    thinks = [s for s in steps if s.tool == "think"]
    assert len(thinks) == 1
    assert thinks[0].message is not None
    assert thinks[0].message.startswith("It seems that the `ponyc` compiler is not available")
