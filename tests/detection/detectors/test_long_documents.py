"""Long documents: ``fast`` and ``lexical`` refuse over ``max_chars`` at once and stay linear below it.

The model-free tests replace MiniLM with a fake token encoder (a fixed vector per word); the
tests marked ``slow`` load the real MiniLM once for the module.
"""

from __future__ import annotations

import functools
import random
import re
import time
import zlib
from collections.abc import Sequence

import numpy as np
import pytest

from scopeguard.detection.detectors.fast import FastDetector
from scopeguard.detection.detectors.lexical import LexicalDetector
from scopeguard.detection.read import fast as fast_module
from scopeguard.detection.read.fast import FastFeaturizer
from scopeguard.detection.read.text import content_stem_set, content_stems, sentence_windows
from scopeguard.detection.read.token_encoder import TokenEmbeddings
from scopeguard.errors import ConfigurationError, DocumentTooLongError
from scopeguard.types import Document

# Invented words and names (no dataset text).
_WHO = (
    "The ferry guild",
    "Warden Ilsa Marrow",
    "The Tamsworth choir",
    "A team of surveyors",
    "The mill owners",
)
_DID = ("repaired", "painted", "measured", "sold", "moved", "inspected")
_WHAT = (
    "the east pier",
    "a signal tower",
    "the grain barges",
    "the tide gauge",
    "a copper bell",
    "the dunes",
)
_WHEN = ("before the autumn fair", "after {n} days of rain", "for {n} silver marks", "at dawn", "in secret")


def synthetic_document(n_chars: int, *, seed: int = 3) -> str:
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    while size <= n_chars:
        when = rng.choice(_WHEN).format(n=rng.randint(2, 999))
        out.append(f"{rng.choice(_WHO)} {rng.choice(_DID)} {rng.choice(_WHAT)} {when}.")
        if rng.random() < 0.15:
            out.append("\n\n")
        size += len(out[-1]) + 1
    return " ".join(out)[:n_chars]


QUESTION = "Which signal tower did Warden Ilsa Marrow inspect?"


@functools.cache
def _vector(word: str, dim: int = 8) -> np.ndarray:
    v = np.random.default_rng(zlib.crc32(word.encode())).normal(size=dim).astype(np.float32)
    return v / np.linalg.norm(v)


class FakeTokenEncoder:
    """Stands in for :class:`TokenEncoder`: one fixed unit vector per lower-cased word, no model."""

    @staticmethod
    def max_similarity(queries: np.ndarray, keys: np.ndarray) -> np.ndarray:
        if not len(queries) or not len(keys):
            return np.ones(len(queries), dtype=np.float32)
        return np.asarray((queries @ keys.T).max(axis=1))

    def __init__(self, name: str = "minilm", **_: object) -> None:
        self.name = name
        self.stacked: list[int] = []

    def embed(self, texts: Sequence[str]) -> list[TokenEmbeddings]:
        out = []
        for text in texts:
            words = list(re.finditer(r"\w+", text))
            vectors = np.array([_vector(m.group(0).lower()) for m in words], dtype=np.float32)
            pieces = tuple(m.group(0).lower() for m in words)
            out.append(TokenEmbeddings(vectors.reshape(-1, 8), pieces, tuple(m.span() for m in words)))
        return out

    def stack(self, texts: Sequence[str]) -> np.ndarray:
        self.stacked.append(len(texts))
        return np.concatenate([e.vectors for e in self.embed(texts)])


@pytest.fixture(scope="module")
def two_mb() -> str:
    return synthetic_document(2_000_000)


@pytest.fixture
def fake_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fast_module, "TokenEncoder", FakeTokenEncoder)


def test_sentence_splitting_is_linear_on_runs_of_initials() -> None:
    text = "Names: " + "J. R. " * 20_000  # 120 KB that is one "sentence": took minutes before
    started = time.perf_counter()
    sentences = sentence_windows(text)
    assert time.perf_counter() - started < 3.0
    assert len(sentences) == 667 and sentences[0].startswith("Names: J. R. J. R.")
    # the joining rule itself is unchanged
    assert sentence_windows("Names: J. R. Tolkien wrote. Then Dr. Who left. See No. 5 in the list.") == [
        "Names: J. R. Tolkien wrote.",
        "Then Dr. Who left.",
        "See No. 5 in the list.",
    ]


def test_content_stem_set_equals_the_set_of_content_stems() -> None:
    text = synthetic_document(20_000)
    assert content_stem_set(text) == set(content_stems(text))


@pytest.mark.usefixtures("fake_encoder")
def test_fast_refuses_a_2mb_document_before_any_work(two_mb: str) -> None:
    det = FastDetector()
    text = two_mb
    started = time.perf_counter()
    with pytest.raises(DocumentTooLongError, match=r"500,000 characters of FastDetector") as info:
        det.detect(QUESTION, text)
    assert time.perf_counter() - started < 10.0
    assert info.value.limit == 500_000 and info.value.n_tokens == 2_000_000
    assert "max_chars" in str(info.value)
    encoder = det.featurizer.encoder
    assert isinstance(encoder, FakeTokenEncoder) and encoder.stacked == []  # nothing was embedded


@pytest.mark.usefixtures("fake_encoder")
def test_max_chars_counts_all_documents_and_is_configurable() -> None:
    docs = [synthetic_document(600, seed=1), synthetic_document(600, seed=2)]
    with pytest.raises(DocumentTooLongError, match=r"1,200 characters"):
        FastDetector(max_chars=1000).detect(QUESTION, docs)
    assert FastDetector(max_chars=1200).detect(QUESTION, docs).label in ("in_scope", "out_of_scope")
    unlimited = FastDetector(max_chars=None)
    assert unlimited.max_chars is None and unlimited.featurizer.max_chars is None
    assert unlimited.detect(QUESTION, docs).score is not None
    with pytest.raises(DocumentTooLongError, match="FastFeaturizer"):
        FastFeaturizer(max_chars=100).features(QUESTION, [Document(text=docs[0])])
    for bad in (0, -5, 2.5, "10", True):
        with pytest.raises(ConfigurationError, match="max_chars"):
            FastDetector(max_chars=bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="max_chars"):
            LexicalDetector(max_chars=bad)  # type: ignore[arg-type]


@pytest.mark.usefixtures("fake_encoder")
def test_document_cache_is_bounded_by_bytes() -> None:
    feat = FastFeaturizer(cache_mb=0.05)  # 52 KB
    encoder = feat.encoder
    assert isinstance(encoder, FakeTokenEncoder)
    big = Document(text=synthetic_document(40_000))  # ~6,000 words x 32 bytes: over the cap
    feat.features(QUESTION, [big])
    feat.features("Who painted the dunes?", [big])
    assert len(encoder.stacked) == 2 and feat.cached_bytes == 0  # never kept
    small = [Document(text=synthetic_document(2_000, seed=s)) for s in range(40)]
    for doc in small:
        feat.features(QUESTION, [doc])
    assert 0 < feat.cached_bytes <= 0.05 * 2**20
    n = len(encoder.stacked)
    feat.features("Who sold the grain barges?", [small[-1]])  # the most recent one is still cached
    assert len(encoder.stacked) == n
    feat.features("Who sold the grain barges?", [small[0]])  # the oldest was evicted
    assert len(encoder.stacked) == n + 1


def test_lexical_handles_2mb_and_refuses_over_its_limit(two_mb: str) -> None:
    text = two_mb
    started = time.perf_counter()
    verdict = LexicalDetector().detect(QUESTION, text)
    assert time.perf_counter() - started < 10.0
    assert verdict.label == "in_scope" and verdict.uncovered == ()
    with pytest.raises(DocumentTooLongError, match=r"LexicalDetector\(max_chars=") as info:
        LexicalDetector(max_chars=1_000_000).detect(QUESTION, text)
    assert info.value.limit == 1_000_000
    assert LexicalDetector(max_chars=None).max_chars is None


# ---------------------------------------------------------------------------- the real MiniLM

# An invented document of 165 words (written for this test; no dataset text).
NORMAL_DOC = (
    "The village of Harrowmere held its first lantern regatta on the lake last Sunday evening. "
    "Forty-two boats, most of them built by local families from salvaged timber, drifted past the old "
    "mill carrying paper lanterns in every colour. Organiser Petra Lindqvist said the idea came from a "
    "school project about winter festivals in northern fishing towns. The council paid for safety "
    "launches and a first-aid tent, while the bakery on Quay Street donated three hundred cinnamon buns.\n\n"
    "Judges awarded the prize for the brightest boat to the Okonkwo twins, whose raft carried a lantern "
    "shaped like a heron. A second prize went to a retired ferry captain who rowed alone in a boat painted "
    "with constellations. Rain began shortly after nine o'clock, and most visitors sheltered under the "
    "market awning until the fireworks. Lindqvist hopes to make the regatta an annual event and has asked "
    "the county for a small grant to buy reusable lanterns, since the paper ones do not survive a wet night."
)
# (coverage, alignment, uncovered) computed by the code before length-sorted batching (commit acf5d6f).
PINNED = {
    "Who won the prize for the brightest boat at the Harrowmere regatta?": (
        0.8333333333333334,
        0.9063833951950073,
        (),
    ),
    "How much did the county grant for the reusable lanterns cost?": (0.8, 0.8481205701828003, ("cost",)),
    "Which orchestra played at the opening of the Harrowmere regatta?": (
        0.4,
        0.6280365586280823,
        ("orchestra played", "opening"),
    ),
}


@pytest.fixture(scope="module")
def fast() -> FastDetector:
    pytest.importorskip("sentence_transformers", reason="needs scopeguard[embeddings]")
    return FastDetector()


@pytest.mark.slow
@pytest.mark.integration
def test_features_of_a_normal_document_are_unchanged(fast: FastDetector) -> None:
    for question, (cov, align, uncovered) in PINNED.items():
        values, got = fast.featurizer.analyse(question, [Document(text=NORMAL_DOC)])
        assert values["coverage"] == pytest.approx(cov, abs=1e-9)
        assert values["alignment"] == pytest.approx(align, abs=1e-4)
        assert got == uncovered


@pytest.mark.slow
@pytest.mark.integration
def test_length_sorted_batches_keep_each_texts_vectors(fast: FastDetector) -> None:
    encoder = fast.featurizer.encoder
    texts = [NORMAL_DOC[:400], "A short one.", NORMAL_DOC[400:600], "Lanterns.", NORMAL_DOC]
    together = encoder.embed(texts)
    for text, emb in zip(texts, together, strict=True):
        alone = encoder.embed([text])[0]
        assert emb.pieces == alone.pieces and emb.spans == alone.spans
        np.testing.assert_allclose(emb.vectors, alone.vectors, atol=1e-5)
    stacked = encoder.stack(texts)
    concat = np.concatenate([e.vectors for e in together])
    assert stacked.shape == concat.shape
    # the same rows, in another order: every row finds itself
    np.testing.assert_allclose(encoder.max_similarity(concat, stacked), 1.0, atol=1e-5)


@pytest.mark.slow
@pytest.mark.integration
def test_real_fast_refuses_2mb_and_answers_200kb(fast: FastDetector) -> None:
    started = time.perf_counter()
    with pytest.raises(DocumentTooLongError):
        fast.detect(QUESTION, synthetic_document(2_000_000))
    assert time.perf_counter() - started < 10.0

    doc = synthetic_document(200_000)  # ~1 to 3 minutes on one busy core; the cache makes the rest cheap
    verdict = fast.detect(QUESTION, doc)
    assert verdict.label == "in_scope" and verdict.score is not None
    started = time.perf_counter()
    assert fast.detect("Who moved the tide gauge at dawn?", doc).label == "in_scope"
    assert time.perf_counter() - started < 10.0
