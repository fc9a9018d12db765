"""The SBERT-NLI baseline on the real packaged MiniLM (mpnet is the default; MiniLM keeps CI fast)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs scopeguard[embeddings]")
pytest.importorskip("sentence_transformers", reason="needs scopeguard[embeddings]")

from scopeguard.detection.detectors.nli import NLIDetector
from scopeguard.detection.detectors.registry import get_detector
from scopeguard.detection.head.mlp import TrainSettings, train_head
from scopeguard.detection.read.embeddings import EmbeddingFeatures
from scopeguard.errors import ConfigurationError
from scopeguard.types import Document

pytestmark = [pytest.mark.slow, pytest.mark.integration]

DOC = Document(id="m", text="The Falcons beat the Herons 3-1 at home on Saturday.")
OTHER = Document(id="o", text="A new bakery opened on Main Street, selling rye bread.")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("features"))


def test_features_are_u_v_abs_diff_for_both_poolings(cache: str) -> None:
    cls = EmbeddingFeatures(embedding_model="minilm", pooling="cls", cache_root=cache)
    mean = EmbeddingFeatures(embedding_model="minilm", pooling="mean", cache_root=cache)
    rows_c, _ = cls.pair_features("Who won?", [DOC])
    rows_m, _ = mean.pair_features("Who won?", [DOC])
    assert rows_c.shape == rows_m.shape == (1, 3 * 384)
    u, v, d = np.split(rows_m[0], 3)
    np.testing.assert_allclose(d, np.abs(u - v), atol=1e-6)
    assert abs(float(np.linalg.norm(u)) - 1.0) < 1e-3  # the model's own pipeline normalises
    assert not np.allclose(rows_c, rows_m)
    with pytest.raises(ConfigurationError, match="cls, mean"):
        EmbeddingFeatures(embedding_model="minilm", pooling="max")  # type: ignore[arg-type]


def test_document_embeddings_are_cached_by_content(cache: str, monkeypatch: pytest.MonkeyPatch) -> None:
    feats = EmbeddingFeatures(embedding_model="minilm", pooling="mean", cache_root=cache)
    encoded: list[str] = []
    real = feats._encode

    def counting(texts: list[str], *, progress: bool = False) -> np.ndarray:
        encoded.extend(texts)
        return real(texts, progress=progress)

    monkeypatch.setattr(feats, "_encode", counting)
    first, _ = feats.pair_features("Who won the match?", [DOC, OTHER])
    fresh = EmbeddingFeatures(embedding_model="minilm", pooling="mean", cache_root=cache)
    monkeypatch.setattr(fresh, "_encode", counting)
    second, _ = fresh.pair_features("Who won the match?", [DOC.model_copy(update={"id": "renamed"}), OTHER])
    assert encoded.count(DOC.text) <= 1 and encoded.count(OTHER.text) <= 1  # second time: from disk
    assert encoded.count("Who won the match?") == 2  # questions are always embedded
    np.testing.assert_allclose(first, second, atol=1e-6)


def test_trained_head_detects_and_scores_each_document(cache: str) -> None:
    feats = EmbeddingFeatures(embedding_model="minilm", pooling="cls", cache_root=cache)
    pairs = [
        ("Who did the Falcons beat?", DOC),
        ("What was the score?", DOC),
        ("Why was the Falcons coach fined?", DOC),
        ("How much does the rye bread cost?", OTHER),
        ("Where did the bakery open?", OTHER),
        ("Who owns the bakery's delivery van?", OTHER),
    ]
    x = feats.batch_features(pairs, progress=False)
    y = np.array([0, 0, 1, 1, 0, 1], dtype=np.float32)
    head = train_head(
        x, y, None, None, detector="nli", features=feats.identity, settings=TrainSettings(epochs=40, lr=1e-2)
    )
    det = NLIDetector(head, cache_root=cache)
    assert det.extractor.identity == feats.identity
    v = det.detect("Who did the Falcons beat?", [DOC])
    assert v.detector == "nli" and v.score is not None and 0.0 <= v.score <= 1.0
    assert v.label == ("out_of_scope" if v.score >= 0.5 else "in_scope")
    both = det.detect("Who did the Falcons beat?", [OTHER, DOC])
    alone = det.detect("Who did the Falcons beat?", [OTHER])
    assert both.score == pytest.approx(min(v.score, alone.score or 1.0), abs=1e-6)


def test_registry_loads_a_saved_head(cache: str, tmp_path: Path) -> None:
    feats = EmbeddingFeatures(embedding_model="minilm", pooling="mean", cache_root=cache)
    x = feats.batch_features([("Who won?", DOC), ("Why was he fined?", DOC)], progress=False)
    train_head(
        x, np.array([0, 1], dtype=np.float32), None, None, detector="nli", features=feats.identity
    ).save(tmp_path / "h")
    det = get_detector("nli", model=str(tmp_path / "h"), cache_root=cache)
    assert det.detect("Who won?", DOC.text).label in ("in_scope", "out_of_scope")
