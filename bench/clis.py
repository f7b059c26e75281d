"""The real agent CLIs, headless: antiloop's hooks against the same hooks answered by a no-op.

Each CLI (installed by `make clis`) plays one scripted session against the scripted model on
127.0.0.1 (tests/hooks/model_server.py): ten different shell commands (`sh step.sh N`), then
an answer; a run is the whole `claude -p` / `codex exec` / `gemini -p` process. Three set-ups,
each in a project of its own, run interleaved round by round so that all see the same load:

* **no-op**: the very events antiloop installs, each answered by `cat > /dev/null`: the CLI's
  own price of running any command hook;
* **native**: `antiloop install <agent> --project` as written, the native client
  (`antiloop-hook`) when it is built, the hook daemon warm (`install` starts it);
* **python**: the same with the Python client (`antiloop hook <agent>`), for comparison.

The per-call figure is the difference of the medians over the ten calls (each call costs a
PreToolUse and a PostToolUse hook; Gemini: BeforeTool, AfterTool). Whole runs vary by hundreds
of milliseconds on a shared machine, so each hook command also runs inside the same timing
wrapper in every set-up (`bash`, two clock reads, a subshell running the command): the median
time of one event as
the CLI ran it is the low-noise figure, and a call is two events. The first session: in fresh
projects, `antiloop install` (which starts the daemon and waits for it), then a first session
and a second one; the figure is the median of first minus second, beside the same with the
no-op hooks.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from tests.hooks.real_clis import CLIS, DIALECT, PINNED, CliProject, Say, shell

from antiloop.hooks import installer

CALLS = 10
TARGET_MS = 10.0
FIRST_TARGET_MS = 300.0
NOOP = "cat > /dev/null"


def _script(cli: str) -> list[object]:
    return [*(shell(cli, f"sh step.sh {n}") for n in range(CALLS)), Say("done")]


def _project(cli: str, root: Path) -> CliProject:
    project = CliProject(cli, root)
    # no redirection: Gemini asks before a `>>` headless
    (project.project / "step.sh").write_text('echo "step $1" >> steps.log\necho "step $1"\n')
    project.trust_folder()
    return project


def _time(project: CliProject, cli: str, tries: int = 3) -> float:
    """Seconds of one scripted run; a run the loaded machine let time out is run again."""
    import subprocess

    for _ in range(tries - 1):
        try:
            return _run_once(project, cli)
        except subprocess.TimeoutExpired:
            (project.project / "steps.log").unlink(missing_ok=True)
    return _run_once(project, cli)


def _run_once(project: CliProject, cli: str) -> float:
    ran = project.run(_script(cli))  # type: ignore[arg-type]
    steps = project.project / "steps.log"
    ran_all = steps.is_file() and len(steps.read_text().splitlines()) == CALLS
    steps.unlink(missing_ok=True)
    if ran.proc.returncode != 0 or len(ran.model.main_requests) != CALLS + 1 or not ran_all:
        raise RuntimeError(f"{cli}: the scripted run did not finish\n{ran.log}")
    return ran.seconds


TIMER = """#!/bin/bash
# bench/clis.py: run the hook command $2, add its wall time in microseconds to the log $1
start=$(date +%s%N)
(eval "$2")  # a subshell: the command's own `exec` ends it, not this wrapper
code=$?
echo $(( ($(date +%s%N) - start) / 1000 )) >> "$1"
exit $code
"""


def _timed(project: CliProject, command: str) -> str:
    """``command`` inside the timing wrapper, its times kept in ``<root>/events.log``."""
    import shlex

    timer = project.root / "timed.sh"
    timer.write_text(TIMER)
    timer.chmod(0o755)
    log = project.root / "events.log"
    return f"{shlex.quote(str(timer))} {shlex.quote(str(log))} {shlex.quote(command)}"


def event_times(project: CliProject) -> list[float]:
    """Milliseconds of each hook event the CLI ran so far (and forget them)."""
    log = project.root / "events.log"
    if not log.exists():
        return []
    times = [int(line) / 1000 for line in log.read_text().split()]
    log.unlink()
    return times


def _noop(project: CliProject, cli: str) -> None:
    """Every event antiloop installs, answered by `cat > /dev/null` (Codex: trusted)."""
    agent = DIALECT[cli]
    path = installer.settings_path(agent, "project", cwd=project.project)
    # the comment makes Codex's trust of "antiloop's" entries cover it; the shell ignores it
    installer.install(agent, path, f"{_timed(project, NOOP)} # antiloop hook {agent}")
    if cli == "codex":
        from antiloop.hooks import codex_trust

        codex_trust.record_trust(path, project.env)


def _hooked(project: CliProject, native: bool) -> None:
    agent = DIALECT[project.cli]
    command = installer.default_command(agent, native=native)
    if native and "antiloop-hook" not in command:
        raise RuntimeError("no native client: build it first (make native)")
    project.install("--command", _timed(project, command))
    from antiloop.hooks.daemon import ensure_running

    ensure_running(project.env)  # `install --command` starts none


def measure(
    cli: str, rounds: int, root: Path
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Seconds per run, and milliseconds per hook event, of each set-up, interleaved."""
    setups = {"no-op": _project(cli, root / "noop"), "native": _project(cli, root / "native")}
    setups["python"] = _project(cli, root / "python")
    _noop(setups["no-op"], cli)
    _hooked(setups["native"], native=True)
    _hooked(setups["python"], native=False)
    times: dict[str, list[float]] = {name: [] for name in setups}
    events: dict[str, list[float]] = {name: [] for name in setups}
    for project in setups.values():
        _time(project, cli)  # warm-up: the CLI's own caches, the daemon's first events
        event_times(project)
    for _ in range(rounds):
        for name, project in setups.items():
            times[name].append(_time(project, cli))
            events[name].extend(event_times(project))
    for project in setups.values():
        project.stop_daemon()
    return times, events


def first_sessions(cli: str, rounds: int, root: Path) -> tuple[list[float], list[float]]:
    """First session minus second in fresh projects: (antiloop just installed, no-op hooks)."""
    hooked: list[float] = []
    noop: list[float] = []
    for n in range(rounds):
        for name, out in (("first", hooked), ("first-noop", noop)):
            project = _project(cli, root / f"{name}-{n}")
            if out is hooked:
                project.install()
            else:
                _noop(project, cli)
            first = _time(project, cli)
            second = _time(project, cli)
            project.stop_daemon()
            out.append(first - second)
    return hooked, noop


def run(quick: bool = False) -> str:
    """Measure and return the markdown section."""
    from tests.hooks.real_clis import binary

    rounds = 2 if quick else 4
    firsts = 1 if quick else 2
    load = os.getloadavg()
    begun = time.time()
    rows: list[str] = []
    event_rows: list[str] = []
    first_rows: list[str] = []
    verdicts: list[str] = []
    for cli in CLIS:
        try:
            binary(cli)
        except BaseException as exc:  # pytest's skip outside pytest
            rows.append(f"| {cli} | not installed: {exc} | | | | |")
            event_rows.append(f"| {cli} | not installed | | | | | |")
            continue
        with tempfile.TemporaryDirectory(prefix=f"bench-{cli}-") as tmp:
            times, events = measure(cli, rounds, Path(tmp))
            deltas, noop_deltas = first_sessions(cli, firsts, Path(tmp))
        med = {name: statistics.median(values) for name, values in times.items()}
        ev = {name: statistics.median(values) for name, values in events.items()}
        whole = (med["native"] - med["no-op"]) / CALLS * 1000
        native = 2 * (ev["native"] - ev["no-op"])
        python = 2 * (ev["python"] - ev["no-op"])
        event_rows.append(
            f"| {cli} {PINNED[cli]} | {len(events['no-op'])} | {ev['no-op']:.1f} ms "
            f"| {ev['native']:.1f} ms | {ev['python']:.1f} ms | {native:+.1f} ms "
            f"| {python:+.1f} ms |"
        )
        first = statistics.median(deltas) * 1000
        noop_first = statistics.median(noop_deltas) * 1000
        spread = max(times["no-op"]) - min(times["no-op"])
        rows.append(
            f"| {cli} {PINNED[cli]} | {med['no-op']:.2f} s | {med['native']:.2f} s "
            f"| {med['python']:.2f} s | {whole:+.0f} ms | {spread:.2f} s |"
        )
        first_rows.append(
            f"| {cli} {PINNED[cli]} | {', '.join(f'{d * 1000:+.0f}' for d in deltas)} ms "
            f"| {first:+.0f} ms | {', '.join(f'{d * 1000:+.0f}' for d in noop_deltas)} ms "
            f"| {noop_first:+.0f} ms |"
        )
        verdicts.append(
            f"{cli}: {native:+.1f} ms a call ({'met' if native <= TARGET_MS else 'not met'}), "
            f"first session {first:+.0f} ms ({'met' if first <= FIRST_TARGET_MS else 'not met'})"
        )
        print(rows[-1])
        print(event_rows[-1])
        print(first_rows[-1])
    end_load = os.getloadavg()
    return "\n".join(
        [
            "## Real agent CLIs: antiloop's hooks against a no-op hook",
            "",
            f"Each CLI ran one scripted session of {CALLS} different shell commands and an "
            "answer against the scripted model on 127.0.0.1, the whole `claude -p` / `codex "
            "exec` / `gemini -p` process timed, in three projects interleaved round by round "
            f"({rounds} rounds after a warm-up run each): the same events answered by `{NOOP}` "
            "(the CLI's own price of any command hook), antiloop's command as `antiloop "
            "install` writes it with the native client `antiloop-hook` (the hook daemon warm), "
            "and with the Python client (`antiloop hook <agent>`), each hook command inside the "
            "same timing wrapper. Each hook event as the CLI ran it (median of every event of "
            "the rounds; a tool call is two events):",
            "",
            "| CLI | events | no-op hook | antiloop, native client | antiloop, Python client "
            "| native over no-op, a call | Python over no-op, a call |",
            "|---|---|---|---|---|---|---|",
            *event_rows,
            "",
            "The whole runs (medians), for scale: they vary from one round to the next by more "
            "than the hooks' whole cost, so their difference says little:",
            "",
            "| CLI | no-op hooks | antiloop, native | antiloop, Python "
            f"| native minus no-op / {CALLS} calls | spread of the no-op runs |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
            f"First session on a machine: {firsts} fresh projects, each `antiloop install` "
            "(which starts the hook daemon and waits until it answers), then a first session "
            "and a second one, first minus second; beside it the same in fresh projects with "
            "the no-op hooks (the CLI's own first-run work):",
            "",
            "| CLI | antiloop: first minus second | median | no-op hooks: first minus second "
            "| median |",
            "|---|---|---|---|---|",
            *first_rows,
            "",
            f"Targets: <= {TARGET_MS:g} ms a call over the no-op hook, first session <= "
            f"{FIRST_TARGET_MS:g} ms slower. " + "; ".join(verdicts) + ".",
            "",
            f"Load average (1, 5, 15 min) {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f} at the "
            f"start and {end_load[0]:.1f}, {end_load[1]:.1f}, {end_load[2]:.1f} at the end of "
            f"{time.time() - begun:.0f} s on {os.cpu_count()} cores, shared with other work.",
        ]
    )
