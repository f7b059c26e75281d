"""The stdlib n-gram embedder."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from antiloop.embed import Embedder, cosine
from antiloop.embed.ngram import NgramEmbedder

TEXTS = [
    "pytest: 3 failed, 12 passed",
    "The login bug is fixed.",
    "Ünïcödé and emoji 🚀 survive",
    "",
]


def test_vectors_are_unit_length_with_the_configured_dimension() -> None:
    """Every vector, blank text included, has length dim and L2 norm 1."""
    emb = NgramEmbedder()
    for vec in emb.embed(TEXTS):
        assert len(vec) == 512
        assert math.isclose(math.sqrt(sum(x * x for x in vec)), 1.0, rel_tol=1e-9)


def test_is_an_embedder_with_a_stable_id() -> None:
    """NgramEmbedder satisfies the protocol, and its id names non-default parameters."""
    assert isinstance(NgramEmbedder(), Embedder)
    assert NgramEmbedder().id == "ngram-v1"
    assert NgramEmbedder(dim=1024).id == "ngram-v1-d1024-n3-5-w"
    assert NgramEmbedder(n_max=3, words=False).id == "ngram-v1-d512-n3-3"


def test_rejects_bad_parameters() -> None:
    """A dimension below 2 or an empty n-gram range is refused."""
    with pytest.raises(ValueError, match="NgramEmbedder"):
        NgramEmbedder(dim=1)
    with pytest.raises(ValueError, match="NgramEmbedder"):
        NgramEmbedder(n_min=0)
    with pytest.raises(ValueError, match="NgramEmbedder"):
        NgramEmbedder(n_min=4, n_max=3)


def test_same_vectors_in_another_process_with_another_hash_seed() -> None:
    """The vectors do not depend on the process or on PYTHONHASHSEED."""
    here = NgramEmbedder().embed(TEXTS)
    code = (
        "import json, sys; from antiloop.embed.ngram import NgramEmbedder; "
        "print(json.dumps(NgramEmbedder().embed(json.loads(sys.argv[1]))))"
    )
    for seed in ("1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code, json.dumps(TEXTS)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(out.stdout) == here


def test_near_repeats_score_higher_than_unrelated_texts() -> None:
    """A reworded-by-one-word repeat is closer than an unrelated text."""
    a, near, far = NgramEmbedder().embed(
        [
            "Running the test suite again to check the login fix",
            "Running the test suite once more to check the login fix",
            "Deployed the docs site to the staging bucket",
        ]
    )
    assert cosine(a, near) > 0.8
    assert cosine(a, far) < 0.3
    assert cosine(a, near) > cosine(a, far) + 0.5


def test_case_and_whitespace_do_not_matter() -> None:
    """Texts that differ only in case and spacing get the same vector."""
    a, b = NgramEmbedder().embed(["Tests  PASS\n now", "tests pass now"])
    assert a == b


def test_blank_texts_are_equal_to_each_other() -> None:
    """Empty and whitespace-only texts share one vector, so blank messages look alike."""
    empty, spaces, word = NgramEmbedder().embed(["", "  \n\t", "done"])
    assert empty == spaces
    assert cosine(empty, word) < 0.5


def test_empty_batch_gives_no_vectors() -> None:
    """Embedding no texts returns an empty list."""
    assert NgramEmbedder().embed([]) == []


def _reference(embedder: NgramEmbedder, text: str) -> list[float]:
    """The embedder as first written: each feature hashed and added one by one, in Python."""
    import re
    import unicodedata
    import zlib

    norm = re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text).casefold()).strip()
    if not norm:
        features = {"\x00\x00empty"}
    else:
        padded = f" {norm} "
        features = set()
        for n in range(embedder.n_min, embedder.n_max + 1):
            features.update(padded[i : i + n] for i in range(max(1, len(padded) - n + 1)))
        if embedder.words:
            features.update("\x00" + w for w in re.findall(r"\w+", norm))
    vec = [0.0] * embedder.dim
    for feature in features:
        h = zlib.crc32(feature.encode("utf-8", "surrogatepass"))
        vec[h % embedder.dim] += 1.0 if h & 0x80000000 else -1.0
    total = math.sqrt(sum(x * x for x in vec))
    return [x / total for x in vec] if total else _reference(embedder, "")


EXACT_TEXTS = [
    "",
    "a",
    "ab",
    "pytest: 3 failed, 12 passed in 0.42s",
    "THOUGHT: The test still fails with the same AssertionError; let me look at utils.py again.",
    "Ünïcödé ﬁle \uff2e\uff21\uff2d\uff25 and emoji 🙂 and a lone surrogate \udcff here",
    "x" * 5000,
    "word " * 300,
]


@pytest.mark.parametrize(
    "embedder",
    [NgramEmbedder(), NgramEmbedder(dim=64, n_min=2, n_max=3, words=False), NgramEmbedder(dim=2)],
)
def test_the_vectors_are_exactly_those_of_the_first_implementation(
    embedder: NgramEmbedder, shared: object
) -> None:
    """Calibrated thresholds belong to ``ngram-v1``: its vectors must not change, bit for bit."""
    from pathlib import Path

    texts = list(EXACT_TEXTS)
    corpus = Path(str(shared)) / "corpus"
    for path in sorted(corpus.rglob("*.json*"))[:3]:
        raw = path.read_text(encoding="utf-8", errors="replace")
        texts += [raw[i : i + 700] for i in range(0, min(len(raw), 70_000), 7_000)]
    for _ in range(2):  # the second time from the remembered buckets
        for text in texts:
            assert embedder.embed([text])[0] == _reference(embedder, text), text[:80]
