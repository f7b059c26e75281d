"""The vectors of a scan, kept by text: each distinct message is embedded once."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import pytest

from antiloop.core.errors import ConfigError
from antiloop.core.step import Step
from antiloop.embed.ngram import NgramEmbedder
from antiloop.scan import Scanner
from antiloop.scan.vectors import ScanVectors
from antiloop.traces import Run


class Counting:
    """An ngram embedder that records what it is asked to embed."""

    id = "ngram-v1"

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.asked.append(list(texts))
        return NgramEmbedder().embed(texts)


def test_a_text_is_embedded_once_and_its_vector_is_the_embedders() -> None:
    """A text seen before is not sent again; the vectors are exactly the embedder's."""
    inner = Counting()
    vectors = ScanVectors(inner)
    first = vectors.embed(["tests fail", "tests fail", "a patch"])
    again = vectors.embed(["a patch", "new text"])
    assert inner.asked == [["tests fail", "a patch"], ["new text"]]
    plain = NgramEmbedder().embed(["tests fail", "a patch", "new text"])
    assert first == [plain[0], plain[0], plain[1]]
    assert again == plain[1:]
    assert (vectors.hits, vectors.misses) == (2, 3)


def test_the_cache_keeps_the_most_recent_texts() -> None:
    """Past ``maxsize`` texts the least recently used is embedded again."""
    inner = Counting()
    vectors = ScanVectors(inner, maxsize=2)
    vectors.embed(["a"])
    vectors.embed(["b"])
    vectors.embed(["a"])  # a is now the most recent
    vectors.embed(["c"])  # b goes
    vectors.embed(["a", "b"])
    assert inner.asked == [["a"], ["b"], ["c"], ["b"]]


def test_single_precision_vectors_are_the_embedders_and_kept_with_the_texts() -> None:
    """``vector32`` gives the embedder's vector as single floats, embeds a text once, and
    forgets it with the text (the least recently used goes)."""
    inner = Counting()
    vectors = ScanVectors(inner, maxsize=2)
    first = vectors.vector32("tests fail")
    assert first == array("f", NgramEmbedder().embed(["tests fail"])[0])
    assert first.typecode == "f"
    vectors.embed(["b"])
    assert vectors.vector32("tests fail") is first  # the most recent again
    vectors.embed(["c"])  # b goes
    vectors.embed(["d"])  # "tests fail" goes
    assert vectors.vector32("tests fail") is not first
    assert inner.asked == [["tests fail"], ["b"], ["c"], ["d"], ["tests fail"]]
    assert (vectors.hits, vectors.misses) == (1, 5)


def test_the_embedders_id_and_thresholds_show_through() -> None:
    """The id and a calibrated threshold of the inner embedder are the cache's."""

    class Calibrated(NgramEmbedder):
        stagnation_threshold = 0.5

    vectors = ScanVectors(Calibrated())
    assert vectors.id == "ngram-v1"
    assert vectors.stagnation_threshold == 0.5
    with pytest.raises(AttributeError):
        _ = vectors.no_such_attribute


def test_a_short_answer_is_a_config_error() -> None:
    """An embedder that returns fewer vectors than texts is named."""

    class Short(NgramEmbedder):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            return super().embed(texts)[:-1]

    with pytest.raises(ConfigError, match="returned 1 vectors for 2 texts"):
        ScanVectors(Short()).embed(["a", "b"])


def test_a_scan_embeds_a_repeated_message_once() -> None:
    """Across the runs of one scan, a message that comes back is not embedded again."""
    inner = Counting()
    scanner = Scanner(embedder=inner)
    messages = ["Looking at the parser.", "Looking at the lexer.", "Now the tests."] * 3
    for record in range(2):
        steps = tuple(
            Step(tool="Read", args={"file_path": f"{record}-{i}.py"}, output=str(i), message=m)
            for i, m in enumerate(messages)
        )
        scanner.scan_run(Run(file="x.jsonl", record=record, format="jsonl", steps=steps))
    embedded = [t for call in inner.asked for t in call]
    assert sorted(embedded) == sorted(set(messages))
