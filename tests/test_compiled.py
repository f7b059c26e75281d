"""Which build of the core modules a run loads: pure Python, or mypyc's (`make unit-compiled`).

The main suite runs the pure modules; `make unit-compiled` sets ANTILOOP_COMPILED=1 and points
PYTHONPATH at the compiled build, and then every module the build compiles must be an
extension module, in this process and in the processes it starts (the conformance suite runs
the ``antiloop`` command).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from antiloop.core.procedure import procedure_of

ROOT = Path(__file__).resolve().parents[1]
COMPILED = os.environ.get("ANTILOOP_COMPILED") == "1"


def _compiled_modules() -> list[str]:
    """The modules pyproject.toml's mypyc hook compiles, as dotted names."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    hook = config["tool"]["hatch"]["build"]["targets"]["wheel"]["hooks"]["mypyc"]
    paths = [Path(p).relative_to("src") for p in hook["include"]]
    return [".".join(p.with_suffix("").parts) for p in paths]


def _suffix(name: str) -> str:
    return Path(str(importlib.import_module(name).__file__)).suffix


def test_the_hook_compiles_the_hot_modules() -> None:
    assert "antiloop.core.procedure" in _compiled_modules()
    assert all(m.startswith("antiloop.") for m in _compiled_modules())


def test_the_run_loads_the_build_it_tests() -> None:
    """Compiled modules under ANTILOOP_COMPILED=1, pure ones otherwise (no stray .so in src/)."""
    want = ".so" if COMPILED else ".py"
    assert {m: _suffix(m) for m in _compiled_modules()} == dict.fromkeys(_compiled_modules(), want)


def test_a_process_the_run_starts_loads_the_same_build() -> None:
    code = "import antiloop.core.procedure as c; print(c.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ
    ).stdout
    assert Path(out.strip()).suffix == (".so" if COMPILED else ".py")


def test_shell_step_paths_that_are_no_strings_are_left_out() -> None:
    """Compiled code checks declared types: a step's JSON paths are not always strings."""
    bad: Any = [["x"], 3, "a.c"]
    proc = procedure_of("Bash", {"command": "make", "timeout": 5}, bad)
    assert (proc.operation, proc.paths) == ("build", ("a.c",))
