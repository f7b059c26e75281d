"""``procedure_of`` calls for an instruction count: the module before the rows, or after.

Run under valgrind, once with N calls and once with none; the difference over N is the cost of
a call (bench/results/canonical-rows.md). The module before is ``canon_old`` (canonical.py of
commit 31f9ce5, importing ``canon_old_shell``, its ``_shell.py``) on ``sys.path``.

    PYTHONHASHSEED=0 valgrind --tool=cachegrind --cache-sim=no \
        python bench/canonical_rows.py new shell 2000
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from bench.workload import steps

Call = tuple[str, dict[str, Any], str | None]


def _shell_calls() -> list[Call]:
    commands = [
        *(f"grep -rn 'value_{i}' src/mod{i % 50}" for i in range(1000)),
        *(f"cd src && pytest tests/test_m{i}.py -q -k 'a and b' | tail -n 5" for i in range(500)),
        *(f'rg -n --glob "*.py" foo{i} src/' for i in range(500)),
        *(f"npm run build{i % 3} && make -C lib{i}" for i in range(500)),
        *(f"timeout 60 python -m pytest tests/t{i}.py::test_x -x" for i in range(500)),
    ]
    return [("Bash", {"command": c}, None) for c in commands]


def _warm_up() -> list[Call]:
    commands = (
        "grep -rn 'x' src",
        "cd a && pytest t.py -k 'a' | tail -n 5",
        'rg -n --glob "*.py" f src/',
        "npm run build",
        "timeout 6 python -m pytest t.py",
    )
    return [
        *(("Bash", {"command": c}, None) for c in commands),
        ("Read", {"file_path": "/repo/x.py"}, "/repo"),
        ("Edit", {"file_path": "a.py", "old_string": "a", "new_string": "b"}, None),
        ("Grep", {"pattern": "aB", "path": "src"}, None),
    ]


def main(which: str, kind: str, n: int) -> None:
    """Make ``n`` calls of ``kind`` (shell, stream, json) with the old or the new module."""
    module = importlib.import_module("canon_old" if which == "old" else "antiloop.core.procedure")
    if kind == "shell":
        calls = _shell_calls()
    else:
        calls = [(s["tool"], s["args"], s.get("cwd")) for s in steps(3000, 300)]
        if kind == "json":
            calls = [c for c in calls if c[0] != "Bash"]
    procedure_of = module.procedure_of
    for tool, args, cwd in [*_warm_up(), *calls[:n]]:
        procedure_of(tool, args, (), cwd)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
