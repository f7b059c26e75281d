"""The wheel a user installs: it builds, installs in a clean venv with only the ``embed`` extra,
carries its licence, and runs ``antiloop demo`` (issue 13)."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_installs_alone_and_runs_the_demo(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = dist.glob("antiloop-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", f"{wheel}[embed]"],
        check=True,
        capture_output=True,
        timeout=600,
    )
    listed = subprocess.run(
        [str(py), "-m", "pip", "list", "--format=freeze"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.lower()
    assert "pytest" not in listed  # nothing of the developers' extras
    assert "onnxruntime" in listed
    licence = list(
        (env_dir / "lib").glob("python3*/site-packages/antiloop-*.dist-info/licenses/LICENSE")
    )
    assert licence, "the wheel carries no LICENSE"
    assert "Apache License" in licence[0].read_text()
    home = tmp_path / "home"
    home.mkdir()
    demo = subprocess.run(
        [str(env_dir / "bin" / "antiloop"), "demo"],
        capture_output=True,
        text=True,
        cwd=home,
        env={k: v for k, v in os.environ.items() if k != "ANTILOOP_STORE"} | {"HOME": str(home)},
        stdin=subprocess.DEVNULL,
        timeout=300,
        check=False,
    )
    assert demo.returncode == 0, demo.stderr
    assert "AGENT::code-writer::edit::game/config.py::no change#" in demo.stdout
    assert "6 of 6 runs stopped" in demo.stdout
