"""Rerankers (cross-encoder, MonoT5) on tiny random models built offline, and the two-stage retriever."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from scopeguard.errors import ConfigurationError, MissingDependencyError, ModelError
from scopeguard.retrieval import (
    CrossEncoderReranker,
    MonoT5Reranker,
    Reranker,
    Retriever,
    TwoStageRetriever,
    get_reranker,
    get_retriever,
)
from scopeguard.retrieval.base import Hit
from scopeguard.retrieval.rerank import DEFAULT_CROSS_ENCODER, DEFAULT_MONOT5
from scopeguard.types import Document
from tests.retrieval.tiny_rerankers import build_cross_encoder, build_monot5

CORPUS = [
    Document(id="p1", text="The Zorbian lighthouse was painted green in 1931 by the harbour guild."),
    Document(id="p2", text="Marlow pies are baked with quince and served cold at the spring fair."),
    Document(id="p3", text="The harbour guild of Zorbia meets every Tuesday beside the lighthouse."),
    Document(id="p4", text="The guild painted the lighthouse in spring."),
]
QUERY = "What colour is the Zorbian lighthouse?"
TEXTS = [d.text for d in CORPUS]


@pytest.fixture(scope="session")
def cross_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_cross_encoder(tmp_path_factory.mktemp("tiny-cross-encoder"))


@pytest.fixture(scope="session")
def monot5_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_monot5(tmp_path_factory.mktemp("tiny-monot5"))


def test_cross_encoder_scores_are_the_models_logits_in_any_batch_size(cross_encoder_dir: Path) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    reranker = get_reranker(f"cross-encoder:{cross_encoder_dir}", batch_size=3, device="cpu")
    assert isinstance(reranker, CrossEncoderReranker) and isinstance(reranker, Reranker)
    scores = reranker.score(QUERY, TEXTS)
    tok = AutoTokenizer.from_pretrained(cross_encoder_dir)
    model = AutoModelForSequenceClassification.from_pretrained(cross_encoder_dir).eval()
    with torch.inference_mode():
        expected = [float(model(**tok(QUERY, t, return_tensors="pt")).logits[0, 0]) for t in TEXTS]
    assert scores == pytest.approx(expected, abs=1e-5)
    assert len(set(round(s, 6) for s in scores)) == len(TEXTS)  # the test can tell orders apart
    one_batch = CrossEncoderReranker(cross_encoder_dir, batch_size=16, device="cpu").score(QUERY, TEXTS)
    assert one_batch == pytest.approx(scores, abs=1e-5)
    assert reranker.score(QUERY, []) == []


def test_cross_encoder_with_two_labels_scores_log_p_relevant(tmp_path: Path) -> None:
    reranker = CrossEncoderReranker(build_cross_encoder(tmp_path / "ce2", num_labels=2), device="cpu")
    scores = reranker.score(QUERY, TEXTS)
    assert len(scores) == len(TEXTS) and all(s < 0 for s in scores)
    three = CrossEncoderReranker(build_cross_encoder(tmp_path / "ce3", num_labels=3), device="cpu")
    with pytest.raises(ModelError, match="3 labels"):
        three.score(QUERY, TEXTS)


def test_monot5_scores_log_p_true_against_false(monot5_dir: Path) -> None:
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    reranker = get_reranker(f"monot5:{monot5_dir}", batch_size=2, device="cpu")
    assert isinstance(reranker, MonoT5Reranker)
    scores = reranker.score(QUERY, TEXTS)
    tok = AutoTokenizer.from_pretrained(monot5_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(monot5_dir).eval()
    false_id, true_id = tok.convert_tokens_to_ids(["false", "true"])
    expected = []
    with torch.inference_mode():
        for text in TEXTS:
            enc = tok(f"Query: {QUERY} Document: {text} Relevant:", return_tensors="pt")
            logits = model(**enc, decoder_input_ids=torch.zeros((1, 1), dtype=torch.long)).logits[0, 0]
            expected.append(float(torch.log_softmax(logits[[false_id, true_id]], dim=-1)[1]))
    assert scores == pytest.approx(expected, abs=1e-5)
    assert all(s < 0 for s in scores)
    assert MonoT5Reranker(monot5_dir, batch_size=16, device="cpu").score(QUERY, TEXTS) == pytest.approx(
        scores, abs=1e-5
    )


def test_registry_builds_bm25_then_rerank_by_path(cross_encoder_dir: Path) -> None:
    pytest.importorskip("rank_bm25", reason="needs scopeguard[retrieval]")
    spec = f"bm25-msmarco+rerank:cross-encoder:{cross_encoder_dir}"
    two = get_retriever(spec, candidates=3, batch_size=2, device="cpu")
    assert isinstance(two, TwoStageRetriever) and isinstance(two, Retriever)
    assert (two.first.k1, two.first.b) == (0.82, 0.68)  # type: ignore[attr-defined]
    assert two.candidates == 3 and two.reranker.batch_size == 2  # type: ignore[attr-defined]
    assert two.name == f"bm25+rerank:{cross_encoder_dir}"
    two.index(CORPUS)
    pool = two.first.search(QUERY, 3)
    scores = two.reranker.score(QUERY, [h.document.text for h in pool])
    expected = [h.document.id for _, h in sorted(zip(scores, pool, strict=True), key=lambda p: -p[0])]
    got = two.search(QUERY, k=2)
    assert [h.document.id for h in got] == expected[:2]
    assert [h.rank for h in got] == [1, 2]
    assert [h.score for h in got] == pytest.approx(sorted(scores, reverse=True)[:2])
    assert two.search_batch([QUERY, QUERY], k=2) == [got, got]


class ByLength:
    """A scripted reranker: longer passages score higher, except that ``tie`` texts all score 0."""

    name = "by-length"

    def __init__(self, tie: bool = False) -> None:
        self.tie = tie
        self.calls: list[int] = []

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.calls.append(len(texts))
        return [0.0 if self.tie else float(len(t)) for t in texts]


class Listed:
    """A first stage that returns the corpus in order (no extras needed)."""

    name = "listed"

    def index(self, documents: Sequence[Document]) -> None:
        self.docs = list(documents)

    def search(self, query: str, k: int = 10) -> list[Hit]:
        return [Hit(document=d, score=1.0, rank=r) for r, d in enumerate(self.docs[:k], 1)]

    def search_batch(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        return [self.search(q, k) for q in queries]


def test_two_stage_reranks_only_the_candidates_and_keeps_first_stage_order_on_ties() -> None:
    reranker = ByLength()
    two = TwoStageRetriever(Listed(), reranker, candidates=3)
    two.index(CORPUS)
    got = two.search(QUERY, k=2)
    assert reranker.calls == [3]  # p4 (the shortest) is never a candidate
    # p1 and p3 (70 characters) beat p2 (69); tied, they keep the first stage's order
    assert [h.document.id for h in got] == ["p1", "p3"]
    assert len(two.search(QUERY, k=4)) == 4 and reranker.calls[-1] == 4  # at least k candidates
    tied = TwoStageRetriever(Listed(), ByLength(tie=True), candidates=4)
    tied.index(CORPUS)
    assert [h.document.id for h in tied.search(QUERY, k=4)] == ["p1", "p2", "p3", "p4"]
    with pytest.raises(ConfigurationError, match="candidates"):
        TwoStageRetriever(Listed(), reranker, candidates=0)


def test_reranker_specs_and_errors() -> None:
    monot5 = get_reranker("monot5")
    assert isinstance(monot5, MonoT5Reranker) and monot5.model_name == DEFAULT_MONOT5
    ce = get_reranker("cross-encoder")
    assert isinstance(ce, CrossEncoderReranker) and ce.model_name == DEFAULT_CROSS_ENCODER
    assert isinstance(get_reranker("castorini/monot5-large-msmarco"), MonoT5Reranker)
    assert isinstance(get_reranker("cross-encoder/ms-marco-MiniLM-L-12-v2"), CrossEncoderReranker)
    with pytest.raises(ConfigurationError, match="needs a model name or path"):
        get_reranker("monot5:")
    with pytest.raises(ConfigurationError, match="bad options for reranker 'monot5'"):
        get_reranker("monot5", nonsense=1)
    with pytest.raises(ConfigurationError, match="batch_size"):
        get_reranker("monot5", batch_size=0)


def test_missing_model_is_a_model_error(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    reranker = get_reranker(f"cross-encoder:{tmp_path / 'no-such-model'}", device="cpu")
    with pytest.raises(ModelError, match="no-such-model"):
        reranker.score(QUERY, TEXTS)


def test_missing_extra_names_the_pip_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(MissingDependencyError, match=r"scopeguard\[rerank\]"):
        get_reranker("monot5").score(QUERY, TEXTS)
