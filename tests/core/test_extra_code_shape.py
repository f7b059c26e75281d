"""code_shape: which edits only touch comments or white space, per language."""

from __future__ import annotations

import pytest

from antiloop.core.extra.code_shape import diff_changes, language_of, only_cosmetic, shape


@pytest.mark.parametrize(
    ("old", "new", "path"),
    [
        ("x = 1\n", "x = 1  # why\n", "a.py"),
        ("x = 1\ny = 2\n", "x = 1\n\n\ny = 2   \n", "a.py"),
        ("def f():\n    return 1\n", "def f():\n    # one\n    return 1\n", "a.py"),
        ("x = f(a, b)", "x = f( a,b )", "a.py"),
        ("int x = 1;", "int  x = 1; // set x", "a.c"),
        ("a();\nb();", "a();\n/* a block\n   comment */\nb();", "src/a.ts"),
        ("  return a;", "return a;", "Main.java"),
        ("echo a # b", "echo a", "run.sh"),
        ("key: 1", "key: 1  # note", "conf.yaml"),
        ("select 1;", "select 1; -- one", "q.sql"),
        ("<p>a</p>", "<p>a</p><!-- x -->", "index.html"),
        ("", "// Correctly handle parent default options", "command_parser.pony"),
        ("a\n", "a   \n\n", "NOTES"),
    ],
)
def test_comment_and_white_space_changes_are_cosmetic(old: str, new: str, path: str) -> None:
    """Comments, blank lines, trailing and insignificant white space do not count."""
    assert only_cosmetic(old, new, path)


@pytest.mark.parametrize(
    ("old", "new", "path"),
    [
        ("x = 1", "x = 2", "a.py"),
        ("x = 1", "    x = 1", "a.py"),  # indentation is Python syntax
        ('s = "# a"', 's = "# b"', "a.py"),  # a hash inside a string is no comment
        ('s = "a b"', 's = "a  b"', "a.py"),  # spaces inside a string count
        ("x = 1", "x = 1  # type: ignore", "a.py"),  # a comment tools read
        ("import os", "#!/usr/bin/env python\nimport os", "a.py"),
        ("x = 1", "x = 1  # noqa: E501", "a.py"),
        ("int x;", "intx;", "a.c"),  # one space between words is syntax
        ("f(a, b)", "f(a,\n  b)", "a.js"),  # a line break is never white space
        ('u = "http://x"', 'u = "http://y"', "a.go"),  # // inside a string
        ("echo a#b", "echo a", "run.sh"),  # '#' inside a word is no shell comment
        ("a: 1", "  a: 1", "conf.yaml"),  # YAML indentation is syntax
        ("x = 1 // c", "x = 2 // c", "a.rs"),
        ("a\n", "  a\n", "NOTES"),  # unknown language: only blank lines and line ends
        ("a # b", "a", "NOTES"),
    ],
)
def test_real_changes_are_not_cosmetic(old: str, new: str, path: str) -> None:
    """A change to code, strings, syntax white space or pragma comments is a change."""
    assert not only_cosmetic(old, new, path)


def test_language_by_extension_and_name() -> None:
    """The extension (any case) names the language; Makefile by name; unknown is plain."""
    assert language_of("src/A.PY").name == "python"
    assert language_of("x/Makefile").name == "make"
    assert language_of("x.unknown").name == "plain"
    assert language_of(None).name == "plain"


def test_shape_keeps_strings_and_drops_comments() -> None:
    """The shape of a line is its code squeezed, its strings verbatim."""
    assert shape('x  =  "a  # b"   # c\n\n', "a.py") == 'x="a  # b"'
    assert shape("    y = 1\n", "a.py") == "    y=1"
    assert shape("    y = 1\n", "a.c") == "y=1"


def test_unified_diff_change_blocks() -> None:
    """Each run of removed/added lines between context lines is one change block."""
    body = (
        "--- a/r.py\n+++ b/r.py\n@@ -1,4 +1,4 @@\n x\n-y = 1\n+y = 1  # note\n z\n-w\n+w2\n"
        "--- a/s.py\n+++ b/s.py\n@@ -1 +1 @@\n-a\n+a \n"
    )
    assert diff_changes(body) == [
        ("r.py", "y = 1", "y = 1  # note"),
        ("r.py", "w", "w2"),
        ("s.py", "a", "a "),
    ]


def test_moved_lines_are_a_change() -> None:
    """A line removed in one place and added in another is no cosmetic edit."""
    body = "+++ b/r.py\n@@ -1,3 +1,3 @@\n-a = 1\n b = 2\n+a = 1\n"
    changes = diff_changes(body)
    assert len(changes) == 2
    assert not all(only_cosmetic(old, new, p) for p, old, new in changes)


def test_apply_patch_and_search_replace_forms() -> None:
    """The apply_patch envelope and SEARCH/REPLACE blocks are read too."""
    patch = "*** Begin Patch\n*** Update File: app.js\n@@\n-run();\n+run(); // go\n*** End Patch"
    assert diff_changes(patch) == [("app.js", "run();", "run(); // go")]
    blocks = "<<<<<<< SEARCH\nx = 1\n=======\nx = 1  # one\n>>>>>>> REPLACE\n"
    assert diff_changes(blocks, "a.py") == [("a.py", "x = 1\n", "x = 1  # one\n")]
    assert diff_changes("no diff here") == []
