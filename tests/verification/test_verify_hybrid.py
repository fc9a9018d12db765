"""Reciprocal-rank fusion of two retrievers, and the retrievers the verifier builds by name."""

from __future__ import annotations

import pytest
from verify_helpers import CORPUS, TinyRetriever

from scopeguard.errors import ConfigurationError
from scopeguard.retrieval.base import Hit, Retriever
from scopeguard.types import Document
from scopeguard.verification import HybridRetriever, make_retriever, rrf_fuse


def hits(*ids: str) -> list[Hit]:
    return [
        Hit(document=Document(id=i, text=f"text {i}"), score=10.0 - r, rank=r) for r, i in enumerate(ids, 1)
    ]


def test_rrf_scores_and_order() -> None:
    fused = rrf_fuse([hits("a", "b", "c"), hits("c", "a", "d")], k=4, rrf_k=60)
    assert [h.document.id for h in fused] == ["a", "c", "b", "d"]
    assert fused[0].score == pytest.approx(1 / 61 + 1 / 62)
    assert fused[1].score == pytest.approx(1 / 63 + 1 / 61)
    assert [h.rank for h in fused] == [1, 2, 3, 4]
    weighted = rrf_fuse([hits("a", "b"), hits("b", "a")], k=2, weights=[1.0, 3.0])
    assert [h.document.id for h in weighted] == ["b", "a"]
    assert len(rrf_fuse([hits("a", "b", "c")], k=2)) == 2


class Reversed(TinyRetriever):
    """Same hits as TinyRetriever, in reverse order (a second, disagreeing ranker)."""

    def search(self, query: str, k: int = 10) -> list[Hit]:
        found = super().search(query, 100)[::-1][:k]
        return [Hit(document=h.document, score=h.score, rank=r) for r, h in enumerate(found, 1)]


def test_hybrid_retriever_implements_the_protocol_and_fuses() -> None:
    first, second = TinyRetriever("one"), Reversed("two")
    hybrid = HybridRetriever(first, second, depth=10)
    assert isinstance(hybrid, Retriever)
    assert hybrid.name == "hybrid(one+two)"
    hybrid.index(CORPUS)
    assert first.docs == second.docs == CORPUS
    q = "Zorbian lighthouse painted green by the guild"
    got = hybrid.search(q, k=3)
    ranks_one = {h.document.id: h.rank for h in first.search(q, 10)}
    ranks_two = {h.document.id: h.rank for h in second.search(q, 10)}
    expected = sorted(ranks_one, key=lambda i: -(1 / (60 + ranks_one[i]) + 1 / (60 + ranks_two[i])))
    assert [h.document.id for h in got] == expected[:3]
    assert hybrid.search_batch([q, q], k=2) == [got[:2], got[:2]]
    with pytest.raises(ConfigurationError, match="depth"):
        HybridRetriever(first, second, depth=0)


def test_make_retriever_names() -> None:
    pytest.importorskip("rank_bm25", reason="needs scopeguard[retrieval]")
    bm25 = make_retriever("bm25")
    assert (bm25.k1, bm25.b) == (0.82, 0.68)  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="valid names: bm25, dense, hybrid"):
        make_retriever("splade")


@pytest.mark.slow
@pytest.mark.integration
def test_real_hybrid_of_bm25_and_minilm() -> None:
    pytest.importorskip("sentence_transformers", reason="needs scopeguard[embeddings]")
    pytest.importorskip("faiss", reason="needs scopeguard[retrieval]")
    hybrid = make_retriever("hybrid")
    hybrid.index(CORPUS)
    got = hybrid.search("What colour was the Zorbian lighthouse painted?", k=3)
    assert got[0].document.id == "p1"
    assert {h.document.id for h in got} == {"p1", "p2", "p3"}  # dense ranks every passage
    assert "minilm" in hybrid.name and "bm25" in hybrid.name
