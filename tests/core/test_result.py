"""Result readings and the same-result rule (docs/protocol.md sections 4 and 6)."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest
from tests.conftest import SHARED, need_path

from antiloop.core.result import Readings, SameResult, read_result, same_result, scrub
from antiloop.core.step import FileState, step_from_dict

CASES = SHARED / "conformance" / "cases"


def run(output: str | None, error: str | None = None, exit_code: int | None = None) -> Readings:
    """Readings of a shell step that runs something."""
    return read_result("bash", True, output, error, exit_code, {})


def grep(output: str | None, error: str | None = None) -> Readings:
    """Readings of a grep step."""
    return read_result("grep", False, output, error, None, {})


# --- realistic runner outputs --------------------------------------------------------------

PYTEST = """\
============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-8.3.3, pluggy-1.5.0
rootdir: /home/dev/game
collected 13 items

tests/test_jump.py ..F.F.F......                                      [100%]

=================================== FAILURES ===================================
___________________________ test_case_2 ____________________________

    def test_case_2():
>       assert jump(2) == 2
E       AssertionError: assert 1 == 2

tests/test_jump.py:12: AssertionError
=========================== short test summary info ============================
FAILED tests/test_jump.py::test_case_2 - AssertionError: assert 1 == 2
FAILED tests/test_jump.py::test_case_4 - AssertionError: assert 1 == 4
FAILED tests/test_jump.py::test_case_6 - AssertionError: assert 1 == 6
========================= 3 failed, 10 passed in {t}s =========================
"""

PYTEST_ERRORS = """\
==================================== ERRORS ====================================
_______________________ ERROR collecting tests/test_b.py _______________________
ImportError while importing test module '/home/dev/app/tests/test_b.py'.
E   ModuleNotFoundError: No module named 'requests'
=========================== short test summary info ============================
FAILED tests/test_a.py::test_one - assert 0 == 1
ERROR tests/test_b.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
=================== 1 failed, 4 passed, 1 error in 0.31s ===================
"""

PYTEST_GREEN = """\
tests/test_jump.py .............                                      [100%]

============================== 13 passed in 0.20s ==============================
"""

PYTEST_QUIET = "..F.\n1 failed, 3 passed, 2 warnings in 1.02s\n"

UNITTEST = """\
..FE.F.
======================================================================
ERROR: test_load (tests.test_io.LoadTest.test_load)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/home/dev/app/tests/test_io.py", line 9, in test_load
    load("missing.json")
FileNotFoundError: [Errno 2] No such file or directory: 'missing.json'

----------------------------------------------------------------------
Ran 7 tests in 0.004s

FAILED (failures=2, errors=1)
"""

UNITTEST_OK = """\
.......
----------------------------------------------------------------------
Ran 7 tests in 0.003s

OK
"""

JEST = """\
FAIL src/app/app.spec.ts
  Player
    ✕ jump 0 (3 ms)
    ✓ walk 0 (1 ms)

Test Suites: 1 failed, 1 total
Tests:       2 failed, 5 passed, 7 total
Snapshots:   0 total
Time:        {t} s
Ran all test suites.
"""

JEST_GREEN = """\
PASS src/app/app.spec.ts
Test Suites: 1 passed, 1 total
Tests:       7 passed, 7 total
Snapshots:   0 total
Time:        1.2 s
"""

VITEST = """\
 \u276f src/app.test.ts (7 tests | 2 failed) 12ms
   \u00d7 jumps twice
   \u00d7 lands

 Test Files  1 failed (1)
      Tests  2 failed | 5 passed (7)
   Start at  04:28:00
   Duration  {t}ms (transform 25ms, setup 0ms, collect 20ms, tests 12ms)
"""

MOCHA = """\
  Player
    ✓ walks
    1) jumps

  5 passing (15ms)
  3 failing

  1) Player
       jumps:
     AssertionError [ERR_ASSERTION]: 1 == 2
"""

GO_TEST = """\
=== RUN   TestJump
--- FAIL: TestJump (0.00s)
    jump_test.go:12: got 1, want 2
=== RUN   TestLand
--- FAIL: TestLand (0.00s)
    land_test.go:8: got 0, want 1
FAIL
FAIL\tgithub.com/dev/game\t0.012s
"""

GO_OK = "PASS\nok  \tgithub.com/dev/game\t0.011s\n"

CARGO = """\
running 5 tests
test a ... ok
test b ... FAILED
test result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s

running 4 tests
test c ... FAILED
test result: FAILED. 3 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

error: 2 targets failed:
    `--lib`
    `--test integration`
"""

MAVEN = """\
[INFO] Running com.example.AppTest
[ERROR] Tests run: 6, Failures: 2, Errors: 0, Skipped: 0, Time elapsed: 0.05 s <<< FAILURE! - \
in com.example.AppTest
[INFO] Running com.example.IoTest
[ERROR] Tests run: 4, Failures: 0, Errors: 1, Skipped: 0, Time elapsed: 0.01 s <<< ERROR! - \
in com.example.IoTest
[INFO]
[INFO] Results:
[INFO]
[ERROR] Failures:
[ERROR]   AppTest.jump:12 expected:<2> but was:<1>
[INFO]
[ERROR] Tests run: 10, Failures: 2, Errors: 1, Skipped: 0
[INFO]
[INFO] BUILD FAILURE
"""

RSPEC = """\
..F.F

Failures:

  1) Player jumps
     Failure/Error: expect(player.jump).to eq(2)

Finished in 0.02345 seconds (files took 0.1 seconds to load)
5 examples, 2 failures
"""


@pytest.mark.parametrize(
    ("output", "failing"),
    [
        (PYTEST.format(t="0.52"), 3),
        (PYTEST_ERRORS, 2),
        (PYTEST_GREEN, 0),
        (PYTEST_QUIET, 1),
        (UNITTEST, 3),
        (UNITTEST_OK, 0),
        (JEST.format(t="4.1"), 2),
        (JEST_GREEN, 0),
        (VITEST.format(t="312"), 2),
        (MOCHA, 3),
        (GO_TEST, 2),
        (GO_OK, 0),
        (CARGO, 3),
        (MAVEN, 3),
        (RSPEC, 2),
        ("checking...\n", None),
    ],
    ids=[
        "pytest",
        "pytest-errors",
        "pytest-green",
        "pytest-quiet",
        "unittest",
        "unittest-ok",
        "jest",
        "jest-green",
        "vitest",
        "mocha",
        "go-test",
        "go-ok",
        "cargo-summed",
        "maven-summary-over-classes",
        "rspec",
        "no-summary",
    ],
)
def test_failing_count_from_runner_summaries(output: str, failing: int | None) -> None:
    """Each runner's summary gives its failing tests, 0 without failures, None without one."""
    assert run(output).failing == failing


def test_jest_reads_tests_line_not_test_suites() -> None:
    """jest's count comes from the Tests: line, not from the Test Suites: line."""
    out = "Test Suites: 3 failed, 3 total\nTests:       1 failed, 9 passed, 10 total\n"
    assert run(out).failing == 1


def test_maven_without_summary_sums_class_lines() -> None:
    """Maven per-class lines count when the run printed no summary line."""
    out = "[ERROR] Tests run: 3, Failures: 1, Errors: 1, Skipped: 0, Time elapsed: 0.1 s\n"
    assert run(out).failing == 2


def test_junit4_text_runner_summary() -> None:
    """The plain JUnit 4 runner's 'Tests run: N,  Failures: M' reads as M failing."""
    assert run("FAILURES!!!\nTests run: 10,  Failures: 2\n").failing == 2


def test_failing_summary_after_ansi_colours() -> None:
    """Colour codes around a summary do not hide it."""
    out = "\x1b[1m\x1b[31m      Tests \x1b[39m\x1b[22m 2 failed | 5 passed (7)\n".replace(
        "\x1b[39m\x1b[22m ", "\x1b[39m\x1b[22m  "
    )
    assert run(out).failing == 2


def test_failing_not_read_from_file_contents() -> None:
    """A summary inside a file shown by read is no failing count."""
    r = read_result("read", False, PYTEST.format(t="0.5"), None, None, {})
    assert (r.failing, r.error_line) == (None, None)


def test_failing_read_from_error_field_of_any_tool() -> None:
    """The error field is always read, whatever the operation."""
    r = read_result("read", False, "", "Tests:       2 failed, 1 passed, 3 total\n", None, {})
    assert r.failing == 2


# --- error lines ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "line"),
    [
        ("building...\nError: Cannot find module 'x'\nmore\n", "Error: Cannot find module 'x'"),
        (
            "error[E0425]: cannot find value `y` in this scope\n",
            "error[E0425]: cannot find value `y` in this scope",
        ),
        (
            "src/a.ts(3,5): error TS2304: Cannot find name 'q'.\n",
            "src/a.ts(3,5): error TS2304: Cannot find name 'q'.",
        ),
        ('npm error Missing script: "lint"\n', 'npm error Missing script: "lint"'),
        ("x = d['k']\nKeyError: 'k'\n", "KeyError: 'k'"),
        ('ok\nFATAL: role "dev" does not exist\n', 'FATAL: role "dev" does not exist'),
        ("Unhandled exception in thread\n", "Unhandled exception in thread"),
        ("running\nFAIL src/app/app.spec.ts\n", "FAIL src/app/app.spec.ts"),
        ("    --- FAIL: TestJump/sub (0.00s)\n", "--- FAIL: TestJump/sub (<dur>)"),
        ("FAILED (failures=1)\n", "FAILED (failures=1)"),
        (
            "Traceback (most recent call last):\n"
            '  File "a.py", line 3, in <module>\n'
            "    log.error(x)\n"
            "    ^^^^^^^^^\n"
            "app.errors.Boom: went wrong\n",
            "app.errors.Boom: went wrong",
        ),
    ],
)
def test_error_line_forms(output: str, line: str) -> None:
    """The first line that reads as an error is the error line, scrubbed and trimmed."""
    assert run(output).error_line == line


@pytest.mark.parametrize(
    "output",
    [
        "Error: (none)\n",
        "Compiled with 0 errors\n",
        "no errors found\n",
        "errors: 0, warnings: 2\n",
        "terrors and mirrors\n",
        "the stderr stream\n",
        "a FAILURES banner is not a FAIL line: === FAILURES ===\n",
        "AssertionError without a colon\n",
    ],
)
def test_not_error_lines(output: str) -> None:
    """Lines that say there is no error, or hold the word only inside another, are none."""
    assert run(output).error_line is None


def test_no_error_line_is_skipped_for_the_next() -> None:
    """After a line saying there is no error, the search goes on to the next line."""
    assert run("Error: (none)\nfatal: not a git repository\n").error_line == (
        "fatal: not a git repository"
    )


def test_error_field_comes_before_output() -> None:
    """The error field's error line wins over the output's."""
    r = run("error: from output\n", "Error: from stderr\n")
    assert r.error_line == "Error: from stderr"


def test_error_line_not_from_file_contents() -> None:
    """read, grep, list and edit output is file content: no error line from it."""
    for op in ("read", "grep", "list", "edit"):
        r = read_result(op, False, "raise ValueError: x\nError: boom\n", None, None, {})
        assert r.error_line is None


def test_error_line_is_scrubbed() -> None:
    """Volatile values in the error line are scrubbed, so two runs compare."""
    a = run("Error: timed out after 3012ms at 2025-11-30T04:28:00Z\n")
    b = run("Error: timed out after 2999ms at 2025-11-30T04:29:13Z\n")
    assert a.error_line == b.error_line == "Error: timed out after <dur> at <date>"


def test_error_line_with_non_ascii_text() -> None:
    """A text whose lower-casing changes length still yields its error line."""
    assert run("İstanbul\nerror: düşük\n").error_line == "error: düşük"


def test_error_line_in_huge_output_tail() -> None:
    """A huge output with the error only at its end still gives the error line."""
    out = "ok line\n" * 200_000 + "Error: at the end\n"
    assert run(out).error_line == "Error: at the end"


# --- scrubbing --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "scrubbed"),
    [
        ("3 failed, 10 passed in 0.52s", "3 failed, 10 passed in <dur>"),
        ("Build failed in 87ms", "Build failed in <dur>"),
        ("jump 0 (3 ms)", "jump 0 (<dur>)"),
        ("Time:        4.1 s", "Time:        <dur>"),
        ("took 1m30s and 2h30m", "took <dur> and <dur>"),
        ("Finished in 0.02345 seconds", "Finished in <dur>"),
        ("at 04:28:00.123 PM", "at <time>"),
        ("2025-11-30T04:28:00+01:00 start", "<date> start"),
        ("on 30/11/2025 and Nov 30, 2025 and 30 Nov 2025", "on <date> and <date> and <date>"),
        ("<Foo object at 0x7f3a9c2e1b40>", "<Foo object at 0x<hex>>"),
        (
            "server pid 4242 started; PID: 17; ppid=1",
            "server pid <pid> started; PID: <pid>; ppid=<pid>",
        ),
        ("process group 77 killed", "process group <pid> killed"),
        ("[1] 12345", "[1] <pid>"),
        ("wrote /tmp/pytest-of-dev/pytest-12/test_a0/out.txt: ok", "wrote <tmp>: ok"),
        ("see /var/folders/xy/abc123/T/tmpk3j2 now", "see <tmp> now"),
        (r"C:\Users\me\AppData\Local\Temp\tmp42.txt", "C:<tmp>"),
    ],
)
def test_scrub_replaces_volatile_values(text: str, scrubbed: str) -> None:
    """Durations, times, dates, hex addresses, pids and temporary paths are replaced."""
    assert scrub(text) == scrubbed


@pytest.mark.parametrize(
    "text",
    [
        "building: 40%",
        "src/app/app.ts:12:5: ERROR",
        "Python 3.11.7, pytest-8.3.3",
        "collected 13 items",
        "a.py:10:12:34 long line",
        "3 sessions, 2 seconds_ago, 1st place",
        "src/tmp/x and ./tmp/y and /tmpfile",
        "processed 12 files",
        "version 1.2.3456",
    ],
)
def test_scrub_keeps_meaningful_numbers(text: str) -> None:
    """Counts, line numbers, versions, percentages and non-temp paths stay as they are."""
    assert scrub(text) == text


def test_scrub_returns_same_object_when_nothing_changes() -> None:
    """A text without volatile values is not copied."""
    text = "nothing volatile here\n" * 10
    assert scrub(text) is text


def test_scrub_unicode_and_surrogates() -> None:
    """Non-ASCII text and lone surrogates survive scrubbing."""
    assert scrub("測試 ✓ in 3ms \ud800") == "測試 ✓ in <dur> \ud800"


def test_scrub_huge_text_in_slices() -> None:
    """A text larger than one slice is scrubbed whole, across slice boundaries."""
    text = "step took 12ms\n" * 150_000
    assert scrub(text) == "step took <dur>\n" * 150_000


# --- match readings ---------------------------------------------------------------------------


def test_match_set_ignores_order() -> None:
    """grep/list results with the same lines in another order are the same set."""
    a = grep("src/a.ts\nsrc/b.ts\nsrc/c.ts\n")
    b = grep("src/c.ts\nsrc/a.ts\nsrc/b.ts\n")
    assert (a.matches, a.match_count, a.count_only) == (b.matches, 3, False)


def test_match_count_only_number() -> None:
    """An output that only gives a number reads as that count."""
    r = grep("Found 12 files\n")
    assert (r.match_count, r.count_only) == (12, True)


def test_match_header_line_is_not_a_match() -> None:
    """A 'Found N files' header above the list is not one of the matches."""
    a = grep("Found 2 files\nsrc/a.ts\nsrc/b.ts\n")
    b = grep("src/b.ts\nsrc/a.ts\n")
    assert (a.matches, a.match_count) == (b.matches, 2)


@pytest.mark.parametrize("output", ["", None, "\n  \n", "No files found", "No matches found"])
def test_empty_output_reads_as_none_found(output: str | None) -> None:
    """An empty output, or one saying nothing was found, is zero matches."""
    r = grep(output)
    assert (r.match_count, r.count_only) == (0, True)


def test_match_reading_only_for_grep_and_list() -> None:
    """Other operations have no match reading."""
    r = read_result("read", False, "a\nb\n", None, None, {})
    assert (r.matches, r.match_count) == (None, None)


def test_match_lines_are_scrubbed() -> None:
    """Match lines compare after scrubbing."""
    assert grep("log: done in 3ms\n").matches == grep("log: done in 4ms\n").matches


# --- other readings ---------------------------------------------------------------------------


def test_head_is_one_short_line_of_scrubbed_output() -> None:
    """The head is the scrubbed output's start, white space collapsed, at most 50 chars."""
    r = run("  first   line\n\tsecond in 0.5s " + "x" * 80)
    assert r.head.startswith("first line second in <dur> xxx")
    assert len(r.head) == 50
    assert r.head.endswith("…")


def test_head_from_error_without_output() -> None:
    """Without output, the head is the start of the error."""
    assert run(None, "boom\n").head == "boom"


def test_files_sorted_by_path() -> None:
    """File states come sorted by path as (path, sha256, mtime)."""
    states = {"b.py": FileState("bb", 2.0), "a.py": FileState(None, 1.0)}
    r = read_result("edit", False, "ok", None, None, states)
    assert r.files == (("a.py", None, 1.0), ("b.py", "bb", 2.0))


def test_exact_differs_from_scrubbed_only_when_something_was_scrubbed() -> None:
    """The scrubbed digest equals the exact one when nothing was scrubbed."""
    plain = run("hello\n")
    timed = run("hello in 3ms\n")
    assert plain.exact == plain.scrubbed
    assert timed.exact != timed.scrubbed


def test_output_and_error_do_not_run_together() -> None:
    """('ab', '') and ('a', 'b') are different results."""
    assert run("ab", "").exact != run("a", "b").exact


def test_huge_output_is_read() -> None:
    """A 2.5 MB output is read in slices and its digests are stable."""
    out = "line with 3ms\n" * 180_000
    a = run(out)
    b = run(out.replace("3ms", "4ms"))
    assert a.exact != b.exact
    assert a.scrubbed == b.scrubbed


# --- the same-result rule ---------------------------------------------------------------------


def test_same_exact_output() -> None:
    """Byte-identical output is the same result, named by its start."""
    same = same_result(run("checking...\n"), run("checking...\n"))
    assert same is not None
    assert same.label == "checking..."


def test_same_when_only_durations_differ() -> None:
    """Two test runs differing only in durations are the same, named by the failing count."""
    same = same_result(
        run(PYTEST.format(t="0.52"), exit_code=1), run(PYTEST.format(t="0.61"), exit_code=1)
    )
    assert same == SameResult("3 failing", same.digest if same else "")


def test_exit_code_veto() -> None:
    """Another exit code is another result, even with the same output."""
    assert same_result(run("checking...\n", exit_code=1), run("checking...\n", exit_code=0)) is None


def test_exit_code_missing_on_one_side_is_no_veto() -> None:
    """An exit code only one result has does not veto."""
    assert same_result(run("x\n", exit_code=1), run("x\n")) is not None


def test_failing_count_veto() -> None:
    """Fewer failing tests is progress even with the same first error line."""
    a = run("E   AssertionError: x\n== 3 failed, 1 passed in 1s ==\n", exit_code=1)
    b = run("E   AssertionError: x\n== 2 failed, 2 passed in 1s ==\n", exit_code=1)
    assert a.error_line == b.error_line
    assert same_result(a, b) is None


def test_same_error_line_is_the_same_result() -> None:
    """Another text with the same error line is the same result, named by the line."""
    a = run("step 1\nerror: cannot open config\n", exit_code=2)
    b = run("step 2\nerror: cannot open config\n", exit_code=2)
    same = same_result(a, b)
    assert same is not None
    assert same.label == "error: cannot open config"


def test_error_line_veto() -> None:
    """Another error line is another result."""
    a = run("line\nerror: one\n", exit_code=1)
    b = run("line\nerror: two\n", exit_code=1)
    assert same_result(a, b) is None


def test_polling_progress_is_not_the_same() -> None:
    """A changing percentage is progress."""
    assert same_result(run("building: 40%\n"), run("building: 80%\n")) is None


def test_same_match_set_named_by_count() -> None:
    """Grep results with the same lines in another order are the same, 'N matches'."""
    same = same_result(grep("a\nb\nc\n"), grep("c\nb\na\n"))
    assert same is not None
    assert same.label == "3 matches"


def test_same_count_other_lines_is_not_the_same() -> None:
    """Grep results with as many lines, but other ones, are another result."""
    assert same_result(grep("a:1\nb:2\n"), grep("c:3\nd:4\n")) is None


def test_count_only_compares_counts() -> None:
    """When a result gives only a number, counts compare."""
    same = same_result(grep("Found 12 files"), grep("12 files"))
    assert same is not None
    assert same.label == "12 matches"
    assert same_result(grep("Found 12 files"), grep("Found 13 files")) is None


def test_empty_against_found_is_not_the_same() -> None:
    """Nothing found, then something found: the state moved."""
    assert same_result(grep(""), grep("a\n")) is None


def test_no_change_by_hash() -> None:
    """The same file hash after both attempts is 'no change', whatever the texts."""
    s = {"src/app.ts": FileState("ab" * 32, 1.0)}
    a = read_result("edit", False, "updated", None, None, s)
    b = read_result("edit", False, None, "String to replace not found", None, s)
    same = same_result(a, b)
    assert same is not None
    assert same.label == "no change"


def test_file_hash_veto() -> None:
    """Another file hash after the attempt is another result."""
    a = read_result("edit", False, "ok", None, None, {"a": FileState("11", 1.0)})
    b = read_result("edit", False, "ok", None, None, {"a": FileState("22", 1.0)})
    assert same_result(a, b) is None


def test_mtime_used_without_hashes() -> None:
    """Without hashes on both sides the mtime compares."""
    a = read_result("edit", False, "x", None, None, {"a": FileState(None, 1.0)})
    b = read_result("edit", False, "y", None, None, {"a": FileState("22", 1.0)})
    c = read_result("edit", False, "x", None, None, {"a": FileState(None, 2.0)})
    assert same_result(a, b) == SameResult("no change", same_result(a, b).digest)  # type: ignore[union-attr]
    assert same_result(a, c) is None


def test_other_files_are_no_change_nor_veto() -> None:
    """Files only one side knows neither make 'no change' nor veto."""
    a = read_result("edit", False, "x", None, None, {"a": FileState("11")})
    b = read_result("edit", False, "y", None, None, {"b": FileState("22")})
    assert same_result(a, b) is None
    c = read_result("edit", False, "x", None, None, {"b": FileState("22")})
    assert same_result(a, c) is not None  # exact output, no common file


def test_label_order_prefers_no_change_then_failing() -> None:
    """The label names the first matched criterion: no change, failing, error, matches."""
    s = {"t.py": FileState("cc")}
    out = "error: x\n== 1 failed in 1s ==\n"
    a = read_result("test", True, out, None, 1, s)
    assert same_result(a, a).label == "no change"  # type: ignore[union-attr]
    b = run(out, exit_code=1)
    assert same_result(b, b).label == "1 failing"  # type: ignore[union-attr]


def test_digest_is_stable_and_short() -> None:
    """The result digest is 8 hex digits, the same for equal loops."""
    first = same_result(run("error: x\n"), run("error: x\n"))
    again = same_result(run("error: x\n"), run("error: x\n"))
    assert first is not None
    assert first == again
    assert len(first.digest) == 8
    int(first.digest, 16)


def test_label_is_cut_at_50() -> None:
    """A long error line makes a label of at most 50 characters."""
    line = "error: " + "word " * 30
    same = same_result(run(line), run(line))
    assert same is not None
    assert len(same.label) <= 50


# --- the conformance cases that exercise results ------------------------------------------

RESULT_CASES = {
    "p01-exact-repeat": ("grep", False, [True]),
    "p04-polling-progress": ("read", False, [False, False]),
    "p05-same-failing-count": ("test", True, [True]),
    "p06-failing-count-changes": ("test", True, [False]),
    "p07-edit-no-change": ("edit", False, [True]),
    "p24-same-error-line": ("build", True, [True]),
    "p25-jest-summary": ("test", True, [True]),
    "p27-large-unicode": ("read", False, [True]),
    "p29-same-count-rg-files": ("grep", False, [True]),
    "p32-exit-code-moves": ("bash", True, [False]),
    "p33-repeat-beats-fail-streak": ("build", True, [False, True]),
    "p34-same-count-other-lines": ("grep", False, [False]),
}


@pytest.mark.parametrize("case_id", sorted(RESULT_CASES))
def test_conformance_results(case_id: str) -> None:
    """Adjacent steps of each conformance case are the same result exactly where expected."""
    path = need_path(CASES / f"{case_id}.json", "a conformance case")
    operation, runs, expected = RESULT_CASES[case_id]
    case = json.loads(path.read_text(encoding="utf-8"))
    steps = [step_from_dict(e) for e in case["events"] if isinstance(e, dict)]
    readings = [
        read_result(operation, runs, s.output, s.error, s.exit_code, s.file_states) for s in steps
    ]
    got = [same_result(a, b) is not None for a, b in pairwise(readings)]
    assert got == expected


# ------------------------------------------------------------------------------------------
# The cache of recent texts and the fast paths give the same readings.


def test_repeated_text_reads_the_same_with_its_own_exit_code_and_files() -> None:
    """A text read again gives the same readings; the exit code and files are the step's own."""
    out = "=== 2 failed, 3 passed in 0.52s ===\nError: boom\n"
    first = read_result("test", True, out, "warn", 1, {})
    again = read_result("test", True, out, "warn", 1, {})
    moved = read_result("test", True, out, "warn", 0, {"a.py": FileState("ab", 1.0)})
    assert again == first
    assert (moved.exit_code, moved.files) == (0, (("a.py", "ab", 1.0),))
    assert (moved.failing, moved.error_line, moved.head) == (
        first.failing,
        first.error_line,
        first.head,
    )


def test_cached_text_keeps_the_operation_apart() -> None:
    """The same text read by a grep and by a command gives each its own readings."""
    out = "src/a.py:1: error here\nsrc/b.py:2: x\n"
    as_grep = read_result("grep", False, out, None, None, {})
    as_bash = read_result("bash", True, out, None, None, {})
    assert (as_grep.match_count, as_grep.error_line) == (2, None)
    assert (as_bash.matches, as_bash.error_line) == (None, "src/a.py:1: error here")


def test_long_start_gives_the_same_head_as_the_whole_start() -> None:
    """A head read from a short start is the head of the whole start, cut the same way."""
    words = " ".join(f"w{i}" for i in range(300))
    r = read_result("read", False, words + "\n", None, None, {})
    assert r.head == words[:49].rstrip() + "…"
    spaced = "a" + " " * 120 + "b " * 10
    assert read_result("read", False, spaced, None, None, {}).head == "a b b b b b b b b b b"


def test_non_ascii_error_line_is_read_like_ascii() -> None:
    """An error line in a text with non-ASCII characters is found at the same line."""
    out = "héllo wörld\nsomething failed: ünïcode error\nError: second\n"
    line = read_result("bash", True, out, None, 1, {}).error_line
    assert line == "something failed: ünïcode error"


@pytest.mark.parametrize("size", [10, 5000])
def test_secrets_in_the_head_and_error_line_are_redacted(size):
    """What session state keeps of an output (its head, its error line) holds no secret."""
    text = "Error: bad key sk-proj-abcdefghijklmnopqrstuvwx\n" + "x" * size
    readings = read_result("bash", True, text, None, 1, {})
    assert "sk-proj-abcdefghijklmnopqrstuvwx" not in readings.head
    assert readings.error_line == "Error: bad key [REDACTED]"


# ------------------------------------------------------------------------------------------
# Readings at their edges: slices of large texts, digests, heads, match counts, error lines.

SLICE = 1024 * 1024  # the slice size the docstring of antiloop.core.result names


def _is_hex16(digest: str | None) -> bool:
    return digest is not None and len(digest) == 16 and int(digest, 16) >= 0


# ------------------------------------------------------------------------------------------
# Labels and heads: at most 50 characters, cut with "…" after the last word that fits.


def test_an_error_line_of_exactly_50_characters_is_its_own_label() -> None:
    """The label limit is 50 characters inclusive: a 50-character line is kept whole."""
    line = "error: " + "a" * 43
    same = same_result(run(line), run(line))
    assert same is not None
    assert same.label == line


def test_a_cut_label_keeps_49_characters_without_a_trailing_blank() -> None:
    """A longer line is cut to 49 characters, its trailing blank dropped, then "…"."""
    line = "error: " + "a" * 41 + " bcdefgh"  # the 49th character is the blank
    same = same_result(run(line), run(line))
    assert same is not None
    assert same.label == "error: " + "a" * 41 + "…"
    longer = "error: " + "b" * 60
    assert same_result(run(longer), run(longer)).label == "error: " + "b" * 42 + "…"  # type: ignore[union-attr]


def test_a_head_is_decoded_whole_even_when_its_start_cuts_a_character() -> None:
    """A start cut inside a multi-byte character still gives a head (the cut character dropped)."""
    out = "a" + " " * 300 + "é" * 400  # 800 bytes end inside an "é"
    assert run(out).head == "a " + "é" * 47 + "…"
    cut_at_100 = "b" * 99 + "é" + "c" * 100  # the first 100 bytes end inside the "é"
    assert run(cut_at_100).head == "b" * 49 + "…"


def test_a_short_head_is_the_whole_output_collapsed() -> None:
    """An output of one short line is its own head."""
    assert run("all   good\n").head == "all good"
    assert run("").head == ""


# ------------------------------------------------------------------------------------------
# Scrubbing.


@pytest.mark.parametrize(
    ("text", "scrubbed"),
    [
        # a hex address starts with 0x; 3x1080 is a size, and what follows is still scrubbed
        ("resize to 3x1080 now", "resize to 3x1080 now"),
        ("3x1080 then 0x1f2e3d4c in 5ms", "3x1080 then 0x<hex> in <dur>"),
        # a month-first date at the very start, in any case
        ("Nov 30, 2025 release", "<date> release"),
        ("nov 30, 2025", "<date>"),
        ("(Dec 1st, 2025)", "(<date>)"),
        # "5, 2025" after a word that is no month is no date; what follows is still scrubbed
        ("item 5, 2025 items took 3ms", "item 5, 2025 items took <dur>"),
        # a date inside a temporary path is part of the path; what follows is still scrubbed
        ("wrote /tmp/run-2025-11-30/out.txt in 3ms", "wrote <tmp> in <dur>"),
        ("on 2025-11-30 at /dev/shm/x", "on <date> at <tmp>"),
        ("[12] 4242", "[12] <pid>"),
    ],
)
def test_scrub_values_in_context(text: str, scrubbed: str) -> None:
    """Each volatile value is replaced where it is, and only there."""
    assert scrub(text) == scrubbed


def test_scrub_of_a_text_of_many_slices_without_volatile_values_is_the_text() -> None:
    """A text of several slices with nothing to replace comes back as it is (not a copy)."""
    text = "plain line\n" * 250_000
    assert scrub(text) is text


def test_scrub_of_a_text_of_many_slices_changed_in_one_slice_only() -> None:
    """Slices without volatile values are kept, the one with them is scrubbed."""
    text = "plain line\n" * 200_000 + "took 12ms\n"
    assert scrub(text) == "plain line\n" * 200_000 + "took <dur>\n"


def test_scrub_never_cuts_a_value_at_a_slice_boundary() -> None:
    """Slices are cut after a newline: a value across the slice size is still one value."""
    text = "a" * (SLICE - 3) + " 12ms\n" + "next 3ms\n"
    assert scrub(text) == "a" * (SLICE - 3) + " <dur>\n" + "next <dur>\n"
    line_start = "a" * (SLICE + 5) + "\n" + "12ms rest\n"
    assert scrub(line_start) == "a" * (SLICE + 5) + "\n" + "<dur> rest\n"


# ------------------------------------------------------------------------------------------
# Error lines: the str path (non-ASCII text whose lower-casing keeps its length), the regex
# path (text whose lower-casing changes length), the ASCII view, ANSI colours, long lines.


@pytest.mark.parametrize(
    ("output", "line"),
    [
        ("error: é boom", "error: é boom"),  # at the very start, text ending in a letter
        ("é: the build is fatal", "é: the build is fatal"),  # the keyword ends the text
        ("é KeyError: 'x'", "é KeyError: 'x'"),
        ("é\nValueException: bad", "ValueException: bad"),
        ("é\nerror: first\nexception: second\nfatal: third\n", "error: first"),
        ("é\nerror: one\nerror: two\n", "error: one"),
        ("é\nfatal: first\nerror: second\n", "fatal: first"),
        ("é\nerror: first\nFAIL later\n", "error: first"),
    ],
)
def test_error_lines_of_non_ascii_text(output: str, line: str) -> None:
    """Non-ASCII text is searched as ASCII text is: the first line that reads as an error."""
    assert run(output).error_line == line


@pytest.mark.parametrize(
    "output",
    [
        "é terrors and mirrors",
        "é: two errors were ignored",
        "é: the nonfatal warning",
        "é: nonfatal: warning",
        "é: myerror: not cased",
        "é: save_error_file done",
        "é: log_fatal_count",
    ],
)
def test_no_error_line_in_non_ascii_text(output: str) -> None:
    """Inside another word, or a lower-case ``…error:``, the keyword is no error (non-ASCII)."""
    assert run(output).error_line is None


@pytest.mark.parametrize(
    ("output", "line"),
    [
        ("error: boom", "error: boom"),  # at the start, no newline at the end
        ("the build is fatal", "the build is fatal"),  # the keyword ends the text
        ("error: first\nfatal: second\n", "error: first"),
        ("error: first\nexception: second\n", "error: first"),
        ("error: one\nerror: two\n", "error: one"),
        ("fatal: first\nerror: second\n", "fatal: first"),
        ("error: first\nFAIL later\n", "error: first"),
        ("FAIL a\nFAIL b\n", "FAIL a"),
        ("line one\nline two\nFAIL src/x.ts\n", "FAIL src/x.ts"),
        ("Error: code X\n", "Error: code X"),
    ],
)
def test_the_first_error_line_wins(output: str, line: str) -> None:
    """Of several error lines the first is read, whole."""
    assert run(output).error_line == line


@pytest.mark.parametrize(
    ("output", "line"),
    [
        ('x\nTraceback (most recent call last):\n  File "a.py", line 1\nStopIteration\n', None),
        ('Traceback (most recent call last):\n  File "a.py", line 1\nStopIteration', None),
        ('\n\nTraceback (most recent call last):\n  File "a.py", line 1\nSystemExit: 2\n', None),
        ("done\nTraceback (most recent call last):\n", "Traceback (most recent call last):"),
    ],
)
def test_a_traceback_at_a_line_start_gives_its_last_line(output: str, line: str | None) -> None:
    """A traceback's last line is the error line, even without an error word in it."""
    want = line or output.rstrip("\n").rsplit("\n", 1)[1]
    assert run(output).error_line == want
    assert run("İ\n" + output).error_line == want  # the regex path reads it too


def test_a_traceback_inside_a_line_is_no_error_line() -> None:
    """The traceback header only counts at a line start."""
    assert run("he said Traceback (most recent call last): scary\n").error_line is None


@pytest.mark.parametrize(
    ("output", "line"),
    [
        ("İstanbul\nall good\n", None),
        ("İstanbul\nError: (none)\nfatal: real one\n", "fatal: real one"),
        ("İ" * 30 + "\nall fine\nerror: x\n", "error: x"),
        ("İ" * 300 + "\n" + "ok\n" * 50 + "error: late\n", "error: late"),
    ],
)
def test_error_lines_of_text_whose_lower_case_is_longer(output: str, line: str | None) -> None:
    """Text whose lower-casing changes its length is read at the right lines."""
    assert run(output).error_line == line


def test_ansi_colours_are_not_part_of_the_error_line() -> None:
    """Colour codes around an error line are dropped, in a small and in a huge output."""
    assert run("\x1b[31merror\x1b[0m: x\n").error_line == "error: x"
    huge = "ok line\n" * 80_000 + "\x1b[1;31mError\x1b[0m: at the end\n"
    assert run(huge).error_line == "Error: at the end"


def test_two_long_lines_with_other_errors_are_other_error_lines() -> None:
    """A line longer than the 400 kept characters keeps the part with its error word."""
    a = run("x" * 1000 + " error: missing module alpha\n", exit_code=1)
    b = run("x" * 1000 + " error: missing module beta\n", exit_code=1)
    assert a.error_line is not None
    assert "error: missing module alpha" in a.error_line
    assert same_result(a, b) is None
    late = run("ok\n" + "y" * 399 + " error: late in the line\n")
    assert "error: late in the line" in (late.error_line or "")


def test_a_long_error_line_is_cut_to_400_characters() -> None:
    """An error line is at most 400 characters."""
    line = run("error: " + "word " * 200 + "\n").error_line
    assert line == ("error: " + "word " * 200)[:400].rstrip()


# ------------------------------------------------------------------------------------------
# Failing counts.


def test_failing_counts_of_output_and_error_add_up() -> None:
    """A count in the error field and one in the output are summed."""
    r = run("== 1 failed in 1s ==\n", "Tests:       2 failed, 3 passed, 5 total\n")
    assert r.failing == 3


@pytest.mark.parametrize(
    ("output", "failing"),
    [
        ("== 1 failed in 1s ==\n== 2 failed, 1 error in 2s ==\n", 4),
        ("Tests:       1 failed, 2 total\nTests:       2 failed, 4 total\n", 3),
        (" Tests  1 failed | 1 passed (2)\n Tests  2 failed | 1 passed (3)\n", 3),
        (
            "Ran 2 tests in 0.1s\n\nFAILED (failures=1)\nRan 3 tests in 0.1s\n\n"
            "FAILED (failures=1, errors=1)\n",
            3,
        ),
        # per-class lines without a summary add up
        (
            "[ERROR] Tests run: 3, Failures: 1, Errors: 0, Skipped: 0, Time elapsed: 0.1 s\n"
            "[ERROR] Tests run: 4, Failures: 2, Errors: 0, Skipped: 0, Time elapsed: 0.2 s\n",
            3,
        ),
        # with a summary, the summary counts, not the per-class lines shown
        (
            "[ERROR] Tests run: 3, Failures: 1, Errors: 0, Skipped: 0, Time elapsed: 0.1 s\n"
            "[ERROR] Tests run: 10, Failures: 2, Errors: 1, Skipped: 0\n",
            3,
        ),
    ],
)
def test_several_summaries_of_one_runner_add_up(output: str, failing: int) -> None:
    """Two summary lines of one runner in one output (two runs, two modules) are summed."""
    assert run(output).failing == failing


# ------------------------------------------------------------------------------------------
# Match readings and file states in the comparison.


def test_a_count_only_reading_compares_with_a_listing_by_count() -> None:
    """ "Found 2 files" and a list of two files are the same number found."""
    a, b = grep("Found 2 files"), grep("a.py\nb.py")
    same = same_result(a, b)
    assert same is not None
    assert same.label == "2 matches"
    assert same_result(b, a) == same  # the digest does not depend on the order
    assert same_result(grep("Found 3 files"), b) is None


def test_one_line_found_is_one_match() -> None:
    """The label says "1 match" for one line found."""
    assert same_result(grep("src/a.py"), grep("src/a.py")).label == "1 match"  # type: ignore[union-attr]


def test_a_match_reading_only_one_side_has_is_no_veto() -> None:
    """A result of another operation (no match set) against a grep result: no veto."""
    listing = read_result("read", False, "a\nb", None, None, {})
    found = grep("a\nb")
    assert same_result(listing, found) is not None
    assert same_result(found, listing) is not None


def test_an_error_line_only_one_side_has_is_no_veto() -> None:
    """The same failing count, an error line on one side only: the same result."""
    a = run("error: boom\n== 2 failed in 1s ==\n", exit_code=1)
    b = run("== 2 failed in 2s ==\n", exit_code=1)
    assert (a.error_line, b.error_line) == ("error: boom", None)
    assert same_result(a, b).label == "2 failing"  # type: ignore[union-attr]
    assert same_result(b, a).label == "2 failing"  # type: ignore[union-attr]


def test_another_error_line_vetoes_the_same_failing_count() -> None:
    """The same failing count with another error line on each side: not the same result."""
    a = run("error: one\n== 2 failed in 1s ==\n", exit_code=1)
    b = run("error: two\n== 2 failed in 1s ==\n", exit_code=1)
    assert same_result(a, b) is None
    assert same_result(b, a) is None


def test_a_file_without_readings_is_neither_no_change_nor_a_veto() -> None:
    """A file with no hash and no mtime on one side cannot be compared: no veto, no label."""
    bare = read_result("edit", False, "same", None, None, {"a": FileState(None, None)})
    full = read_result("edit", False, "same", None, None, {"a": FileState("22", 2.0)})
    assert same_result(bare, full) == same_result(full, bare)
    assert same_result(bare, full).label == "same"  # type: ignore[union-attr]
    assert same_result(bare, bare).label == "same"  # type: ignore[union-attr]


def test_the_digests_are_16_hex_digits() -> None:
    """Exact, scrubbed and match digests are 16 hex digits, small or huge, cached or not."""
    small = run("took 3ms\n")
    assert _is_hex16(small.exact)
    assert _is_hex16(small.scrubbed)
    assert small.exact != small.scrubbed
    assert _is_hex16(grep("Found 12 files").matches)
    assert _is_hex16(grep("a\nb").matches)
    huge = run("took 3ms\n" * 40_000)
    assert _is_hex16(huge.exact)
    assert _is_hex16(huge.scrubbed)
    assert huge.exact != huge.scrubbed


def test_a_volatile_value_in_the_error_field_only_is_scrubbed() -> None:
    """Two errors that differ only in a duration are the same scrubbed text."""
    a = read_result("read", False, "same output", "took 3ms", None, {})
    b = read_result("read", False, "same output", "took 4ms", None, {})
    assert a.exact != b.exact
    assert a.scrubbed == b.scrubbed
    assert read_result("read", False, None, "took 3ms", None, {}).head == "took <dur>"


def test_readings_of_other_operations_have_no_match_reading() -> None:
    """A command's readings have no match set, count or count-only flag."""
    r = run("a\nb\n")
    assert (r.matches, r.match_count, r.count_only) == (None, None, False)


# ------------------------------------------------------------------------------------------
# The cache of recent texts.


def test_a_cached_text_with_another_exit_code_keeps_every_other_reading() -> None:
    """Read again with another exit code and files, a text keeps all its other readings."""
    for op, out in (("grep", "src/a.py\nsrc/b.py\n"), ("grep", "Found 4 files"), ("test", "E\n")):
        first = read_result(op, op == "test", out, "error: in 3ms", 1, {})
        moved = read_result(op, op == "test", out, "error: in 3ms", 2, {"f": FileState("ab")})
        assert (moved.exit_code, moved.files) == (2, (("f", "ab", None),))
        assert (
            moved.exact,
            moved.scrubbed,
            moved.head,
            moved.matches,
            moved.match_count,
            moved.count_only,
            moved.error_line,
            moved.failing,
        ) == (
            first.exact,
            first.scrubbed,
            first.head,
            first.matches,
            first.match_count,
            first.count_only,
            first.error_line,
            first.failing,
        )


def test_more_texts_than_the_cache_keeps_are_read_right() -> None:
    """Past the cache size, old texts are forgotten and every text still reads right."""
    for i in range(1100):
        assert run(f"== {i} failed in 1s ==\n").failing == i
    assert run("== 3 failed in 1s ==\n").failing == 3


# ------------------------------------------------------------------------------------------
# Huge texts (over 256 KiB together): read in slices, not through the cache.

HUGE_LINES = 30_000  # about 600 KB of grep output


def _listing(order: range) -> str:
    return "".join(f"src/module_{i:05d}.py\n" for i in order)


def test_a_huge_grep_output_is_a_match_set() -> None:
    """A huge grep output reads as its set of lines, in any order, like a small one."""
    a = read_result("grep", False, _listing(range(HUGE_LINES)), None, 0, {})
    b = read_result("grep", False, _listing(range(HUGE_LINES - 1, -1, -1)), None, 0, {})
    assert (a.match_count, a.count_only) == (HUGE_LINES, False)
    assert a.matches == b.matches
    assert _is_hex16(a.matches)
    assert a.head == "src/module_00000.py src/module_00001.py src/modul…"
    assert (a.error_line, a.failing, a.exit_code) == (None, None, 0)
    same = same_result(a, b)
    assert same is not None
    assert same.label == f"{HUGE_LINES} matches"
    fewer = read_result("grep", False, _listing(range(HUGE_LINES - 1)), None, 0, {})
    assert same_result(a, fewer) is None
    spaced = "".join(f"src/m{i}.py: a match here\n" for i in range(HUGE_LINES))
    assert read_result("grep", False, spaced, None, 0, {}).match_count == HUGE_LINES


def test_a_huge_error_without_output_is_no_match() -> None:
    """A grep with a huge error and no output found nothing: the error's lines are no matches."""
    r = read_result("grep", False, "", "fatal: cannot read\n" + "noise line\n" * 30_000, None, {})
    assert (r.match_count, r.count_only) == (0, True)
    assert r.error_line == "fatal: cannot read"
    assert r.head == "fatal: cannot read noise line noise line noise li…"


def test_a_huge_command_output_gives_every_reading() -> None:
    """A huge test run reads its error line, failing count, head, exit code and files."""
    out = "collected 9 items\n" + "progress line\n" * 30_000 + "E   KeyError: 'x'\n"
    out += "== 2 failed, 7 passed in 3.2s ==\n"
    states = {"t.py": FileState("cd", 5.0)}
    r = read_result("test", True, out, None, 1, states)
    assert (r.error_line, r.failing, r.exit_code) == ("E KeyError: 'x'", 2, 1)
    assert (r.matches, r.match_count, r.count_only) == (None, None, False)
    assert r.head == "collected 9 items progress line progress line pro…"
    assert r.files == (("t.py", "cd", 5.0),)


def test_a_huge_file_shown_by_read_gives_no_error_line_nor_count() -> None:
    """A huge file content gives neither an error line nor a failing count."""
    out = "Error: inside the file\n== 3 failed in 1s ==\n" + "text\n" * 60_000
    r = read_result("read", False, out, None, None, {})
    assert (r.error_line, r.failing) == (None, None)
    assert r.head == "Error: inside the file == 3 failed in <dur> == te…"


def test_a_huge_error_of_a_read_gives_its_error_line_and_count() -> None:
    """The error field of any tool is read, huge or not; the head stays the output's."""
    err = "fatal: bad object\n" + "trace\n" * 60_000 + "Tests:       2 failed, 3 total\n"
    r = read_result("read", False, "Error: in the file\n", err, None, {})
    assert (r.error_line, r.failing) == ("fatal: bad object", 2)
    assert r.head == "Error: in the file"
    alone = read_result("read", False, None, err, None, {})
    assert alone.head == "fatal: bad object trace trace trace trace trace t…"


def test_a_huge_output_larger_than_a_slice_keeps_the_head_of_its_start() -> None:
    """The head of a text of several slices is the start of its first slice."""
    out = "first words here\n" + "middle\n" * 400_000 + "last words\n"
    r = run(out)
    assert r.head == "first words here middle middle middle middle midd…"


def test_huge_texts_differing_only_in_durations_are_the_same() -> None:
    """The scrubbed digest of a huge output and error ignores durations in both."""
    a = run("step in 3ms\n" * 30_000, "warn after 5ms\n" * 30_000, 1)
    b = run("step in 4ms\n" * 30_000, "warn after 6ms\n" * 30_000, 1)
    assert a.exact != b.exact
    assert a.scrubbed == b.scrubbed
    assert same_result(a, b) is not None


def test_a_single_line_reads_as_a_count_only_when_short() -> None:
    """A lone line under 80 characters may be a count; a longer one is a line found."""
    short = grep("Found" + " " * 66 + "12 files")  # 79 characters
    assert (short.match_count, short.count_only) == (12, True)
    long = grep("Found" + " " * 67 + "12 files")  # 80 characters
    assert (long.match_count, long.count_only) == (1, False)


def test_a_single_line_with_a_lone_surrogate_is_one_line_found() -> None:
    """A lone surrogate in a lone line does not stop the reading."""
    assert (grep("\ud800 x").match_count, grep("\ud800 x").count_only) == (1, False)


@pytest.mark.parametrize(
    ("output", "count"),
    [
        ("Found 3 files in src/ and lib/", 1),  # a lone line is never a header
        ("Found 1 file\nsrc/a.py", 1),  # a header above one line found
        ("\nFound 2 files\na\nb", 2),  # the header after a blank line
        ("\n\nFound 2 files\n\na\nb\n", 2),
    ],
)
def test_a_found_header_is_dropped_above_the_lines_only(output: str, count: int) -> None:
    """ "Found N files" above the lines is no line found; a lone line is one."""
    assert (grep(output).match_count, grep(output).count_only) == (count, False)


@pytest.mark.parametrize(
    ("output", "line"),
    [
        ("é\nError: (none)\nfatal: real one\n", "fatal: real one"),
        ("FAILED with 0 errors\nFAIL src/a.ts\n", "FAIL src/a.ts"),
        ("é\nFAILED with 0 errors\nFAIL src/a.ts\n", "FAIL src/a.ts"),
        ("error: first\ntimed out later\n", "error: first"),
        ("é\nerror: first\ntimed out later\n", "error: first"),
        (
            '  Traceback (most recent call last): fatal\n  File "a.py"\nSystemExit: 2\n',
            "SystemExit: 2",
        ),
    ],
)
def test_the_search_goes_on_after_a_line_without_error(output: str, line: str) -> None:
    """After a line that says there is no error the next error line is read; the first wins."""
    assert run(output).error_line == line


@pytest.mark.parametrize("before", ["é" * 40, "é" * 20 + "a" * 10, "a" * 40, "€" * 30])
def test_a_secret_across_the_start_read_for_the_head_is_redacted_whole(before: str) -> None:
    """The head of a long output never shows the start of a secret, whatever precedes it."""
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    head = run(f"{before} {token}" + " tail" * 20).head
    assert "ghp_" not in head
    assert head == _cut_head(f"{before} [REDACTED]" + " tail" * 20)


def _cut_head(text: str) -> str:
    """A text cut as a head is: 49 characters, the trailing blank dropped, then "…"."""
    return text[:49].rstrip() + "…"


@pytest.mark.parametrize("size", [512 * 1024 + 64 * 1024, 512 * 1024 + 63 * 1024])
def test_an_error_line_across_the_first_512_kib_is_read_whole(size: int) -> None:
    """A text of up to 576 KiB is searched whole: an error line across 512 KiB is not cut."""
    start = "ok\n" * ((512 * 1024 - 10) // 3)
    start += "x" * (512 * 1024 - 10 - len(start)) + "\n"
    text = start + "error: this line crosses the mark\n"
    text += "y" * (size - len(text) - 1) + "\n"
    assert run(text).error_line == "error: this line crosses the mark"


@pytest.mark.parametrize(
    ("output", "line"),
    [
        # the error word at character 300 of a long line: the line's first 400 characters
        ("y" * 299 + " error: A" + "z" * 200, "y" * 299 + " error: A" + "z" * 92),
        # at character 301: the 400 characters from 100 before the word
        ("y" * 300 + " error: A" + "z" * 200, "y" * 99 + " error: A" + "z" * 200),
        # a line of exactly 400 characters is kept whole
        ("y" * 349 + " error: A" + "z" * 42 + "\nnext\n", "y" * 349 + " error: A" + "z" * 42),
        # a line shorter than 400 characters is kept whole, wherever its error word is
        (
            "p" * 500 + "\n" + "y" * 319 + " error: A" + "z" * 22 + "\n",
            "y" * 319 + " error: A" + "z" * 22,
        ),
        # a long line late in the text, its error word near its start: its first 400 characters
        ("p" * 349 + "\nab error: B" + "z" * 500, "ab error: B" + "z" * 389),
    ],
)
def test_the_part_of_a_long_line_kept_as_its_error_line(output: str, line: str) -> None:
    """A line longer than 400 characters keeps its first 400, or, when its error word lies past
    character 300, the 400 from 100 characters before the word."""
    assert run(output).error_line == line
