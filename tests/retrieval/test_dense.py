"""Dense retrieval against the real packaged MiniLM and real FAISS (flat, HNSW, IVF), and the cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scopeguard.errors import InputError
from scopeguard.retrieval import get_retriever
from scopeguard.retrieval.dense import DenseRetriever, SentenceEncoder
from scopeguard.retrieval.embedding_cache import EmbeddingCache, text_key
from scopeguard.types import Document

pytest.importorskip("sentence_transformers", reason="needs scopeguard[embeddings]")
pytest.importorskip("faiss", reason="needs scopeguard[retrieval]")

PASSAGES = [
    Document(id="p-volcano", text="The volcano erupted overnight, sending ash over the nearby villages."),
    Document(id="p-football", text="The home team won the cup final after a late penalty kick."),
    Document(id="p-bread", text="Knead the dough, let it rise for an hour, then bake the loaf."),
    Document(id="p-rates", text="The central bank raised interest rates to slow inflation."),
    Document(id="p-orbit", text="The probe entered orbit around Jupiter after a six-year journey."),
]
QUERIES = {
    "Which match did the team win with a penalty?": "p-football",
    "How long should bread dough rise?": "p-bread",
    "Why did the bank change interest rates?": "p-rates",
}


class _NoModel:
    def encode(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the model was called although every text was cached")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("embeddings")


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("index_type", ["flat", "hnsw", "ivf"])
def test_minilm_finds_the_right_passage(cache_dir: Path, index_type: str) -> None:
    options: dict[str, Any] = {"nlist": 2, "nprobe": 2} if index_type == "ivf" else {}
    r = get_retriever("minilm", cache_dir=cache_dir, index_type=index_type, show_progress=False, **options)
    assert isinstance(r, DenseRetriever)
    r.index(PASSAGES)
    results = r.search_batch(list(QUERIES), k=3)
    for (query, expected), hits in zip(QUERIES.items(), results, strict=True):
        assert hits[0].document.id == expected, query
        assert [h.rank for h in hits] == [1, 2, 3]
        assert hits[0].score >= hits[1].score >= hits[2].score
        assert -1.0 <= hits[2].score <= hits[0].score <= 1.0 + 1e-5  # cosine
    # k larger than the corpus returns the whole corpus, each passage once
    every = r.search("volcanic ash", k=50)
    assert every[0].document.id == "p-volcano"
    assert sorted(h.document.id for h in every) == sorted(d.id for d in PASSAGES)


@pytest.mark.slow
@pytest.mark.integration
def test_cache_serves_a_second_run_without_the_model(cache_dir: Path) -> None:
    first = SentenceEncoder("minilm", cache_dir=cache_dir, show_progress=False)
    vecs = first.encode_documents([d.text for d in PASSAGES])
    assert vecs.shape == (5, 384) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert len(EmbeddingCache("minilm", cache_dir)) >= 5
    second = SentenceEncoder("minilm", cache_dir=cache_dir, show_progress=False)
    second._model = _NoModel()
    assert np.allclose(second.encode_documents([d.text for d in PASSAGES]), vecs)
    # the key covers the prompt: a prefixed text is not served from the unprefixed entry
    prefixed = SentenceEncoder("minilm", cache_dir=cache_dir, document_prompt="passage: ")
    prefixed._model = _NoModel()
    with pytest.raises(AssertionError, match="every text was cached"):
        prefixed.encode_documents([PASSAGES[0].text])


@pytest.mark.slow
@pytest.mark.integration
def test_identical_passages_tie_in_document_order(cache_dir: Path) -> None:
    twins = [Document(id=f"twin{i}", text="A lighthouse warns ships away from the rocks.") for i in range(3)]
    r = DenseRetriever("minilm", cache_dir=cache_dir, show_progress=False)
    r.index([PASSAGES[0], *twins])
    hits = r.search("lighthouse and ships", k=2)
    assert [h.document.id for h in hits] == ["twin0", "twin1"]
    assert hits[0].score == pytest.approx(hits[1].score)


def test_cache_shards_survive_reload_and_ignore_corrupt_files(tmp_path: Path) -> None:
    cache = EmbeddingCache("some/model", tmp_path)
    keys = [text_key("a"), text_key("b", prompt="q: ")]
    cache.put(keys, np.array([[1.0, 0.0], [0.0, 2.0]]))
    (cache.directory / "shard-broken.npz").write_bytes(b"not a zip")
    again = EmbeddingCache("some/model", tmp_path)
    got = again.get([*keys, text_key("c")])
    assert got[2] is None
    assert got[0] is not None and got[0].tolist() == [1.0, 0.0]
    assert got[1] is not None and got[1].tolist() == [0.0, 2.0]
    assert text_key("b") != text_key("b", prompt="q: ")
    assert EmbeddingCache("other/model", tmp_path).get(keys) == [None, None]


def test_a_shard_damaged_since_it_was_written_is_removed_not_raised(tmp_path: Path) -> None:
    cache = EmbeddingCache("some/model", tmp_path)
    cache.put([text_key("a")], np.array([[1.0, 0.0]]))
    cache.put([text_key("b")], np.array([[0.0, 2.0]]))
    first, second = sorted(cache.directory.glob("shard-*.npz"), key=lambda p: p.stat().st_mtime_ns)
    data = bytearray(second.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside a member: its CRC-32 no longer matches (zipfile.BadZipFile)
    second.write_bytes(bytes(data))
    got = EmbeddingCache("some/model", tmp_path).get([text_key("a"), text_key("b")])
    assert got[0] is not None and got[0].tolist() == [1.0, 0.0]
    assert got[1] is None  # encoded again by the caller
    assert first.exists() and not second.exists()


def test_cache_dir_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SCOPEGUARD_CACHE", str(tmp_path))
    assert EmbeddingCache("m").directory.parent == tmp_path / "embeddings"


def test_dense_errors(tmp_path: Path) -> None:
    r = DenseRetriever("minilm", cache_dir=tmp_path)
    with pytest.raises(InputError, match="index"):
        r.search("anything")
    with pytest.raises(InputError, match="empty corpus"):
        r.index([])
    with pytest.raises(InputError, match="is empty"):
        r.index([Document(id="blank", text="   ")])
