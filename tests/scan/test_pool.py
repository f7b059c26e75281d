"""Files scanned in worker processes give the serial scan's results, in the same order."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import multiprocessing
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from tests.conftest import SHARED, need_path

from antiloop.cli import main
from antiloop.embed.ngram import NgramEmbedder
from antiloop.scan import Scanner, pool

LOOPING = [
    {"tool": "Grep", "args": {"pattern": "a"}, "output": "x"},
    {"tool": "Grep", "args": {"pattern": "b"}, "output": "none"},
    {"tool": "Grep", "args": {"pattern": "b"}, "output": "none"},
    {"tool": "Read", "args": {"file_path": "a.py"}, "output": "1"},
]
STALLING = [
    {"tool": "Read", "args": {"file_path": f"f{i}.py"}, "output": str(i), "message": m}
    for i, m in enumerate(["Let me look at the parser."] * 3 + ["Let me look at the lexer."] * 5)
]


def _jsonl(path: Path, events: Sequence[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path


@pytest.fixture
def traces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder of small traces (loops, a clean run, an unreadable file), pooled however small."""
    monkeypatch.setattr(pool, "POOL_MIN_BYTES", 0)
    for i in range(6):
        _jsonl(tmp_path / f"loop{i}.jsonl", LOOPING[: 2 + i % 3] + LOOPING)
    _jsonl(tmp_path / "stall.jsonl", STALLING)
    _jsonl(tmp_path / "clean.jsonl", LOOPING[:1])
    (tmp_path / "notes.txt").write_text("no trace\n", encoding="utf-8")
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    return tmp_path


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["scan", *args])
    return code, out.getvalue(), err.getvalue()


def test_pooled_scan_equals_serial_scan_in_order(traces: Path) -> None:
    """Every result, views included, is the serial one, in the serial order."""
    serial = list(Scanner(views=True).scan_paths([traces]))
    pooled = list(Scanner(views=True, jobs=3).scan_paths([traces]))
    assert pooled == serial
    assert any(getattr(r, "loops", ()) for r in serial)


def test_cli_output_is_the_same_with_jobs(
    traces: Path, tmp_path_factory: pytest.TempdirFactory
) -> None:
    """``--jobs 1`` and ``--jobs 3`` write the same JSON, text, stderr and HTML report."""
    html = tmp_path_factory.mktemp("html")
    for extra in (["--json"], []):
        one = _cli(str(traces), *extra, "--jobs", "1", "--html", str(html / "one.html"))
        three = _cli(str(traces), *extra, "--jobs", "3", "--html", str(html / "three.html"))
        assert one[0] == three[0] == 1
        assert one[1] == three[1]
        assert one[2].replace("one.html", "three.html") == three[2]
        assert (html / "one.html").read_bytes() == (html / "three.html").read_bytes()


def test_progress_counts_files_in_order(traces: Path) -> None:
    """The progress callback sees each file once, counted up to the total."""
    seen: list[tuple[int, int]] = []
    list(Scanner(jobs=2).scan_paths([traces], progress=lambda d, t: seen.append((d, t))))
    total = len(list(traces.iterdir()))
    assert seen == [(i, total) for i in range(1, total + 1)]


def test_an_abandoned_scan_stops_its_workers(traces: Path) -> None:
    """Leaving the scan early ends the worker processes."""
    results = Scanner(jobs=2).scan_paths([traces])
    next(results)  # the first file, scanned in this process before the workers start
    next(results)
    assert multiprocessing.active_children()
    results.close()
    assert not multiprocessing.active_children()


def test_small_scans_stay_in_this_process(traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``POOL_MIN_BYTES`` in all, no worker is started."""
    monkeypatch.setattr(pool, "POOL_MIN_BYTES", 10**9)
    results = Scanner(jobs=2).scan_paths([traces])
    next(results)
    assert not multiprocessing.active_children()
    results.close()


class _Unpicklable(NgramEmbedder):
    """An embedder a spawned worker cannot receive."""

    def __reduce__(self) -> str | tuple[object, ...]:
        raise TypeError("not picklable")


def test_spawned_workers_need_a_picklable_embedder(
    traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without fork, an embedder that does not pickle scans serially, with the same results."""
    monkeypatch.setattr(pool, "_context", lambda: multiprocessing.get_context("spawn"))
    build = functools.partial(Scanner, embedder=_Unpicklable())
    assert pool.scan_files(build, sorted(traces.iterdir()), "auto", 2) is None
    scanner = Scanner(embedder=_Unpicklable(), jobs=2)
    assert list(scanner.scan_paths([traces])) == list(Scanner().scan_paths([traces]))


def test_spawned_workers_give_the_same_results(
    traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spawned workers (macOS, Windows, a threaded parent) scan as forked ones do."""
    monkeypatch.setattr(pool, "_context", lambda: multiprocessing.get_context("spawn"))
    files = sorted(traces.iterdir())[:3]
    assert list(Scanner(jobs=2).scan_paths(files)) == list(Scanner().scan_paths(files))


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_forked_workers_give_the_same_results(
    traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forked workers (Linux, a single-threaded parent: the command) scan as this process does."""
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork on this platform")
    monkeypatch.setattr(pool, "_context", lambda: multiprocessing.get_context("fork"))
    assert list(Scanner(jobs=2).scan_paths([traces])) == list(Scanner().scan_paths([traces]))


class _Marked:
    """A file scanner that says which scanner read each file, and in which process."""

    def __init__(self, mark: str) -> None:
        self.mark = mark

    def scan_one(self, path: Path, format: str) -> list[tuple[str, str, bool]]:
        return [(path.name, self.mark, multiprocessing.parent_process() is None)]


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_forked_workers_are_copies_of_this_scanner(
    traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given this process's scanner, forked workers start from it (not from ``build``), after
    it scanned the first file here; the results stay in file order."""
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork on this platform")
    monkeypatch.setattr(pool, "_context", lambda: multiprocessing.get_context("fork"))
    files = sorted(traces.iterdir())
    results = pool.scan_files(lambda: _Marked("built"), files, "auto", 2, local=_Marked("here"))
    assert results is not None
    got = [item for items in results for item in items]
    assert [name for name, _, _ in got] == [f.name for f in files]
    assert {mark for _, mark, _ in got} == {"here"}
    assert [here for _, _, here in got] == [True] + [False] * (len(files) - 1)


def test_a_threaded_process_is_not_forked() -> None:
    """A second thread (a native one counts too, on Linux) makes the workers spawned."""
    gate = threading.Event()
    thread = threading.Thread(target=gate.wait)
    thread.start()
    try:
        assert pool._context().get_start_method() == "spawn"
    finally:
        gate.set()
        thread.join()


def test_jobs_must_be_a_positive_number(capsys: pytest.CaptureFixture[str]) -> None:
    """``--jobs 0`` or ``--jobs x`` is a usage error."""
    for bad in ("0", "x"):
        with pytest.raises(SystemExit) as stop:
            main(["scan", ".", "--jobs", bad])
        assert stop.value.code == 2
        assert "expected a number of processes" in capsys.readouterr().err


def test_the_corpus_pooled_equals_serial() -> None:
    """On the shared corpus' real runs, a pooled scan is the serial scan, result for result."""
    corpus = need_path(SHARED / "corpus", "the shared corpus beside the repository")
    serial = list(Scanner(views=True).scan_paths([corpus]))
    assert list(Scanner(views=True, jobs=2).scan_paths([corpus])) == serial
