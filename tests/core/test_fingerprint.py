"""The fingerprint string: build, escape, parse back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from antiloop.core import fingerprint


def test_build_has_five_parts_in_order():
    """A fingerprint is AGENT, agent, operation, context, then summary#digest."""
    fp = fingerprint.build("Explorer", "grep", "double jump@src", "2 matches", "abcd1234")
    assert fp == "AGENT::explorer::grep::double jump@src::2 matches#abcd1234"
    assert fingerprint.parse(fp).context == "double jump@src"


def test_context_is_cut_to_80_with_an_ellipsis():
    """A long context is cut to 80 characters, ending in an ellipsis."""
    fp = fingerprint.build("a", "bash", "x" * 200, "out", "00000000")
    context = fingerprint.parse(fp).context
    assert len(context) == 80
    assert context.endswith("…")


def test_summary_is_cut_to_50():
    """The result summary keeps at most 50 characters before the digest."""
    fp = fingerprint.build("a", "bash", "c", "y" * 120, "00000000")
    summary, _, digest = fingerprint.parse(fp).result.rpartition("#")
    assert len(summary) == 50
    assert digest == "00000000"


def test_newlines_and_colons_are_escaped():
    """New lines become spaces, runs of colons one colon, and no part starts or ends with one."""
    assert fingerprint.escape(":::a\n\tb::c::") == "a  b:c"


def test_parse_rejects_other_strings():
    """A string that is not a fingerprint is a ValueError."""
    with pytest.raises(ValueError, match="not an antiloop fingerprint"):
        fingerprint.parse("AGENT::a::b")


def test_digest_is_stable():
    """The digest is the same in every process: no salt."""
    assert fingerprint.digest8("same") == "5bf1936c"


@given(st.text(), st.text(), st.text(), st.text(), st.text(min_size=8, max_size=8))
def test_any_parts_parse_back_into_five(agent, op, context, summary, digest):
    """Whatever the parts hold, the fingerprint splits back into exactly five parts."""
    fp = fingerprint.build(agent, op, context, summary, "0" * 8)
    parts = fingerprint.parse(fp)
    assert parts.prefix == "AGENT"
    for part in parts[1:]:
        assert not part.startswith(":")
        assert not part.endswith(":")
        assert "\n" not in part
