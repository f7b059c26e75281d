"""The session-state codec round-trips every field and refuses unknown formats clearly."""

from __future__ import annotations

import math
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from antiloop import Guard, Step
from antiloop.core.errors import StoreError
from antiloop.core.history import MessageRecord, SessionState, StepRecord, StreamState
from antiloop.core.result import Readings, SameResult
from antiloop.core.verdict import Action, Verdict
from antiloop.stores.codec import VERSION, StateCache, decode_state, encode_state

text = st.text(max_size=30)
opt_text = st.none() | text
opt_int = st.none() | st.integers(-(2**40), 2**40)
finite = st.floats(allow_nan=False)
files = st.lists(st.tuples(text, st.none() | text, st.none() | finite).map(tuple), max_size=3).map(
    tuple
)
readings = st.builds(
    Readings, text, opt_int, text, text, opt_text, opt_int, st.booleans(), opt_text, opt_int, files
)
same = st.none() | st.builds(SameResult, text, text)
step_records = st.builds(
    StepRecord,
    st.integers(0, 10**6),
    text,
    text,
    text,
    text,
    readings,
    st.lists(same, max_size=4).map(tuple),
)
vectors = st.none() | st.lists(st.floats(width=32, allow_nan=False), max_size=8).map(
    lambda xs: array("f", xs)
)
chain_values = st.lists(st.none() | st.integers() | text | st.booleans(), max_size=6).map(tuple)
messages = st.builds(MessageRecord, st.integers(0, 10**6), text, text, st.booleans(), vectors)


@st.composite
def streams(draw: st.DrawFn) -> StreamState:
    window_max = draw(st.none() | st.integers(1, 8))
    message_max = draw(st.none() | st.integers(1, 5))
    window = draw(st.lists(step_records, max_size=window_max))
    msgs = draw(st.lists(messages, max_size=message_max))
    return StreamState(
        window,
        msgs,
        draw(st.integers(0, 100)),
        draw(text),
        draw(st.integers(0, 100)),
        tuple(draw(st.lists(st.integers(0, 1000), max_size=16))),
        draw(st.integers(0, 100)),
        draw(st.dictionaries(text, text, max_size=4)),
        tuple(draw(st.lists(text, max_size=3))),
        draw(st.none() | st.dictionaries(text, chain_values, max_size=3)),
    )


verdicts = st.builds(
    Verdict,
    st.sampled_from(list(Action)),
    opt_text,
    opt_text,
    opt_text,
    text,
    text,
    st.lists(st.integers(0, 1000), max_size=5).map(tuple),
    opt_text,
)
states = st.builds(
    SessionState,
    st.integers(0, 10**9),
    opt_text,
    vectors,
    st.dictionaries(text, streams(), max_size=3),
    st.none() | verdicts,
)


@settings(max_examples=300, deadline=None)
@given(states)
def test_round_trip_keeps_every_field(state: SessionState) -> None:
    """decode(encode(state)) equals the state."""
    back = decode_state(encode_state(state))
    assert back == state


def test_surrogates_nan_and_a_real_guard_state_survive() -> None:
    """Lone surrogates, NaN mtimes and the state a Guard builds all round-trip."""
    guard = Guard()
    for i in range(6):
        guard.record(
            Step(tool="bash", args={"command": "pytest"}, output=f"{i % 2} failed", message="hm")
        )
    state = guard.store.peek("default")
    assert state is not None
    assert decode_state(encode_state(state)) == state
    odd = Readings(
        "\ud800", None, "s", "h", None, None, False, None, None, (("p", None, math.nan),)
    )
    back = decode_state(
        encode_state(
            SessionState(streams={"a": StreamState([StepRecord(0, "t", "o", "p", "c", odd)], [])})
        )
    )
    got = back.streams["a"].window[0].readings
    assert got.exact == "\ud800"
    assert math.isnan(got.files[0][2] or 0.0)


def test_unknown_version_is_a_clear_store_error() -> None:
    """Bytes of a newer format version are refused with a message naming both versions."""
    data = bytes([VERSION + 1]) + encode_state(SessionState())[1:]
    with pytest.raises(StoreError, match=rf"version {VERSION + 1}.*reads version {VERSION}"):
        decode_state(data)


@pytest.mark.parametrize("data", [b"", b"\x01garbage", b'{"json": 1}', bytes([VERSION]) + b"\x00"])
def test_damaged_bytes_are_a_store_error(data: bytes) -> None:
    """Empty, damaged or foreign bytes raise StoreError, never anything else."""
    with pytest.raises(StoreError):
        decode_state(data)


def test_state_cache_hands_back_what_it_saved_only_for_the_same_bytes() -> None:
    """The cache returns the saved object for identical bytes and decodes anything else."""
    cache = StateCache(size=2)
    state = SessionState(steps=1)
    data = encode_state(state)
    cache.saved("s", data, state)
    assert cache.load("s", data) is state
    assert cache.load("s", data) is not state  # taken: a second load decodes
    cache.saved("s", data, state)
    other = encode_state(SessionState(steps=2))
    assert cache.load("s", other).steps == 2
    assert cache.load("s", None) == SessionState()


def _v1_bytes(state: SessionState) -> bytes:
    """The state in format version 1 (steps nested as tuples, not marshalled bytes)."""
    import marshal

    new = marshal.loads(encode_state(state)[1:])  # noqa: S302 - our own bytes
    streams = []
    for agent, data in new[3]:
        s = marshal.loads(data)  # noqa: S302
        streams.append((agent, (s[0], tuple(marshal.loads(b) for b in s[1]), *s[2:])))  # noqa: S302
    return bytes([1]) + marshal.dumps((*new[:3], tuple(streams), new[4]), 4)


def test_format_version_1_is_still_read() -> None:
    """States written by the previous format (version 1) decode to the same state."""
    guard = Guard()
    for i in range(5):
        guard.record(Step(tool="bash", args={"command": f"ls {i % 2}"}, output="x"))
    state = guard.store.peek("default")
    assert state is not None
    assert VERSION == 2
    assert decode_state(_v1_bytes(state)) == state


def test_a_window_that_moves_is_encoded_as_it_now_is() -> None:
    """A record appended, dropped or replaced in a window shows in the next encoding."""
    readings = Readings("e", None, "s", "h", None, None, False, None, None, ())
    records = [StepRecord(i, "t", "o", f"p{i}", "c", readings) for i in range(6)]
    stream = StreamState(records[:3], [])
    state = SessionState(steps=3, streams={"a": stream})
    assert decode_state(encode_state(state)) == state
    assert decode_state(encode_state(state)) == state  # the memoised window
    stream.window.append(records[3])
    del stream.window[0]
    assert decode_state(encode_state(state)).streams["a"].window == records[1:4]
    stream.window[1] = records[5]
    assert decode_state(encode_state(state)).streams["a"].window == [
        records[1],
        records[5],
        records[3],
    ]
    stream.window.clear()
    assert decode_state(encode_state(state)).streams["a"].window == []


def test_state_cache_takes_only_a_state_saved_at_the_same_version() -> None:
    """take() hands out the saved object only for the version it was saved with."""
    cache = StateCache()
    state = SessionState(steps=1)
    cache.saved("s", encode_state(state), state, version=7)
    assert cache.take("s", 8) is None
    assert cache.take("s", None) is None
    assert cache.take("s", 7) is state
    assert cache.take("s", 7) is None  # handed out: the store saves it back
    cache.saved("s", encode_state(state), state)
    assert cache.take("s", None) is None


def test_a_stream_changed_in_place_is_encoded_as_it_now_is() -> None:
    """Counters, stopped procedures and a message's vector set later all show when re-encoded."""
    message = MessageRecord(0, "hm", "hm", False)
    stream = StreamState([], [message])
    state = SessionState(steps=1, streams={"a": stream, "b": StreamState([], [])})
    assert decode_state(encode_state(state)) == state
    stream.run = 3
    assert decode_state(encode_state(state)).streams["a"].run == 3
    stream.stopped["d"] = "fp"
    assert decode_state(encode_state(state)).streams["a"].stopped == {"d": "fp"}
    stream.fail_steps = (1, 2)
    assert decode_state(encode_state(state)).streams["a"].fail_steps == (1, 2)
    message.vector = array("f", [0.5])
    assert decode_state(encode_state(state)) == state
    stream.messages.append(MessageRecord(1, "x", "x", False))
    assert decode_state(encode_state(state)) == state


def test_opt_in_chains_round_trip_and_older_streams_have_none() -> None:
    """A stream's chains are encoded (and re-encoded when changed); a stream without is None."""
    stream = StreamState([], [], chains={"hidden-repeat": (1, "p", (2, 3))})
    state = SessionState(steps=2, streams={"a": stream})
    assert decode_state(encode_state(state)) == state
    stream.chains = {**(stream.chains or {}), "cosmetic-rerun": (2, "q")}
    assert decode_state(encode_state(state)).streams["a"].chains == stream.chains
    assert stream.chains is not None
    stream.chains["hidden-repeat"] = (5, "p", (4,))
    assert decode_state(encode_state(state)).streams["a"].chains == stream.chains
    import marshal

    raw = marshal.loads(encode_state(state)[1:])  # noqa: S302 - our own bytes
    agent, data = raw[3][0]
    short = marshal.dumps(marshal.loads(data)[:11], 4)  # noqa: S302 - a stream before the opt-ins
    old = bytes([VERSION]) + marshal.dumps((*raw[:3], ((agent, short),), *raw[4:]), 4)
    assert decode_state(old).streams["a"].chains is None
