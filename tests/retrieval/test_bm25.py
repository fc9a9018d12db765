"""BM25 backends: Lucene's formula by hand, rank-bm25 vs bm25s agreement, parameters, errors."""

from __future__ import annotations

import math

import pytest

from scopeguard.errors import ConfigurationError, InputError
from scopeguard.retrieval import Retriever, get_retriever
from scopeguard.retrieval.bm25 import BM25Retriever, BM25sRetriever, tokenize
from scopeguard.types import Document

pytest.importorskip("rank_bm25", reason="needs scopeguard[retrieval]")

DOCS = [
    Document(id="kiln", text="The pottery kiln fires clay pots at high heat."),
    Document(id="bees", text="Bees gather nectar; the hive stores honey for winter."),
    Document(id="pots", text="Clay pots crack when the kiln cools too fast, potters say. Clay matters."),
    Document(id="tide", text="Tides follow the moon and shape the harbour."),
]


def lucene(tf: int, df: int, n: int, dl: int, avgdl: float, k1: float, b: float) -> float:
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))


def test_tokenize_drops_lucene_stop_words() -> None:
    assert tokenize("The Kiln, and THE pots!") == ["kiln", "pots"]


def test_lucene_score_by_hand() -> None:
    r = BM25Retriever(k1=1.2, b=0.75)
    r.index(DOCS)
    lens = [len(tokenize(d.text)) for d in DOCS]
    avgdl = sum(lens) / len(lens)
    # "clay" is in kiln (tf 1) and pots (tf 2): df = 2
    expected = [
        lucene(1, 2, 4, lens[0], avgdl, 1.2, 0.75),
        0.0,
        lucene(2, 2, 4, lens[2], avgdl, 1.2, 0.75),
        0.0,
    ]
    assert r.scores("clay").tolist() == pytest.approx(expected)


@pytest.mark.parametrize("k1,b", [(0.9, 0.4), (1.5, 0.75), (0.1, 0.0)])
def test_rank_bm25_and_bm25s_give_the_same_scores(k1: float, b: float) -> None:
    pytest.importorskip("bm25s")
    a, s = BM25Retriever(k1=k1, b=b), BM25sRetriever(k1=k1, b=b)
    a.index(DOCS)
    s.index(DOCS)
    for q in ["clay kiln", "honey for the winter", "moon harbour tides clay", "unknownword"]:
        assert a.scores(q) == pytest.approx(s.scores(q), rel=1e-5, abs=1e-6)
        assert [h.document.id for h in a.search(q, 3)] == [h.document.id for h in s.search(q, 3)]


def test_parameters_change_scores() -> None:
    a, b = BM25Retriever(k1=0.9, b=0.4), BM25Retriever(k1=2.0, b=1.0)
    a.index(DOCS)
    b.index(DOCS)
    assert a.scores("clay").tolist() != pytest.approx(b.scores("clay").tolist())
    with pytest.raises(ConfigurationError, match="b must be"):
        BM25Retriever(b=1.5)
    with pytest.raises(ConfigurationError, match="k1"):
        BM25Retriever(k1=0)
    with pytest.raises(ConfigurationError, match="variant"):
        BM25Retriever(variant="atire")  # type: ignore[arg-type]


def test_okapi_variant_is_rank_bm25s_own() -> None:
    from rank_bm25 import BM25Okapi

    r = BM25Retriever(k1=1.5, b=0.75, variant="okapi")
    r.index(DOCS)
    ref = BM25Okapi([tokenize(d.text) for d in DOCS], k1=1.5, b=0.75)
    assert r.scores("clay pots").tolist() == pytest.approx(ref.get_scores(["clay", "pots"]).tolist())


def test_search_ranks_and_skips_non_matching_documents() -> None:
    r = get_retriever("bm25")
    assert isinstance(r, Retriever)
    r.index(DOCS)
    hits = r.search("clay matters", k=10)
    assert [h.document.id for h in hits] == ["pots", "kiln"]  # no shared term: not returned (as Lucene)
    assert [h.rank for h in hits] == [1, 2]
    assert hits[0].score > hits[1].score > 0
    assert r.search("zebra", k=3) == []
    batch = r.search_batch(["honey", "moon"], k=1)
    assert [[h.document.id for h in hs] for hs in batch] == [["bees"], ["tide"]]


def test_ties_rank_in_document_order() -> None:
    docs = [Document(id=f"d{i}", text="same words here") for i in range(3)]
    r = BM25Retriever()
    r.index(docs)
    assert [h.document.id for h in r.search("words", k=2)] == ["d0", "d1"]


def test_errors_are_clear() -> None:
    r = BM25Retriever()
    with pytest.raises(InputError, match="index"):
        r.search("clay")
    with pytest.raises(InputError, match="empty corpus"):
        r.index([])
    with pytest.raises(InputError, match=r"expected scopeguard\.Document"):
        r.index(["plain string"])  # type: ignore[list-item]
    r.index(DOCS)
    with pytest.raises(InputError, match="query is empty"):
        r.search("   ")
    with pytest.raises(InputError, match="positive integer"):
        r.search("clay", k=0)
