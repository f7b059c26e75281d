"""Shared fixtures, and the rule for what a test needs: skip on a laptop, fail under CI=true."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import NoReturn

import pytest
from hypothesis import settings

# No Hypothesis deadline: a per-example time limit is a timed assertion, and on a shared, loaded
# machine (or under the mutation run's instrumentation) an example can take seconds.
settings.register_profile("antiloop", deadline=None)
settings.load_profile("antiloop")

ROOT = Path(__file__).resolve().parents[1]
# ../shared beside the repository; ANTILOOP_TEST_SHARED names it for a copy of the tests run
# elsewhere (the mutation run works in a copy under mutants/).
SHARED = Path(os.environ.get("ANTILOOP_TEST_SHARED") or ROOT.parent / "shared")
IN_CI = os.environ.get("CI", "").lower() == "true"

# Under mutation testing (the copy under mutants/) hypothesis tries 20 fixed examples, not 100
# random ones: each surviving mutant runs every test that reaches it, and a kill must not depend
# on the draw.
if ROOT.name == "mutants":
    from hypothesis import settings

    settings.register_profile("mutation", max_examples=20, derandomize=True)
    settings.load_profile("mutation")

# Hook processes started by the tests answer in-process: a hook daemon started by one test
# would outlive it. The daemon's own tests (tests/hooks/test_daemon.py) turn it back on, in a
# socket directory of their own.
os.environ["ANTILOOP_HOOKD"] = "0"

# Steps answered while a test's store was down are journaled (antiloop.outage) in a directory
# of the run's own, never in the home directory; the replicas a test starts inherit it.
if "ANTILOOP_JOURNAL" not in os.environ:
    import tempfile

    os.environ["ANTILOOP_JOURNAL"] = tempfile.mkdtemp(prefix="antiloop-journal-")
# The fault tests written before the retries see each store failure at once; the outage tests
# (tests/stores/test_outage*.py) set their retry window themselves.
os.environ.setdefault("ANTILOOP_RETRY_WINDOW", "0")


def missing(what: str) -> NoReturn:
    """Skip for want of ``what``; under CI=true fail naming it (CI has everything)."""
    if IN_CI:
        pytest.fail(f"{what} (required under CI=true)")
    pytest.skip(what, allow_module_level=True)


def need_path(path: Path, what: str) -> Path:
    """``path`` if it exists, else skip (fail under CI=true) saying ``what`` is missing."""
    if not path.exists():
        missing(f"{what} is missing: {path}")
    return path


def need_module(name: str, extra: str) -> None:
    """Import ``name`` or skip (fail under CI=true, where dev installs every extra)."""
    try:
        importlib.import_module(name)
    except ImportError:
        missing(f"{name} is not importable (pip install -e '.[{extra}]')")


@pytest.fixture(autouse=True)
def _cold_caches() -> None:
    """Each test starts with the core's caches empty: what a test sees never depends on the
    tests before it (random order, xdist), and a mutant's code runs instead of a remembered
    answer of the original (the mutation run forks from a process that ran every test)."""
    from antiloop.core import procedure, result

    for module in (procedure, result):
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()
        module._known.clear()


@pytest.fixture
def shared() -> Path:
    """The read-only shared folder beside the repository (skips when absent, fails in CI)."""
    return need_path(SHARED, "the shared folder beside the repository")
