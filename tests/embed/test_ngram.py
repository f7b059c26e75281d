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
