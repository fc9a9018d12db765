"""Ray Data scale-out (scopeguard.scale) against a real local Ray: equal to the single-process path.

The slow tests start one local Ray (2 CPUs) for the module; everything skips without ``[ray]``.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from scopeguard.data import Dataset, LabeledQuestion
from scopeguard.detection.read.embeddings import EmbeddingFeatures
from scopeguard.detection.read.hidden_states import HiddenStateFeatures
from scopeguard.detection.signals import extract_signals
from scopeguard.errors import ConfigurationError, InputError, MissingDependencyError, ModelError
from scopeguard.generation import Generator
from scopeguard.retrieval.dense import DenseRetriever
from scopeguard.scale import _features, extract_fast_features, extract_features, generate_sharded, index_dense
from scopeguard.scale._ray import require_ray
from scopeguard.testing import EloqChatModel, invented_document
from scopeguard.types import Document

TOPICS = ["harbour", "budget", "library", "railway", "school", "market", "bridge", "park", "museum"]
DOCS = [
    Document(id=f"doc{i}", text=f"{invented_document(t, words=40)} Topic {t} number {i}.")
    for i, t in enumerate(TOPICS)
]


def test_missing_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray.data", None)  # import ray.data now raises ImportError
    with pytest.raises(MissingDependencyError, match=r"pip install 'scopeguard\[ray\]'"):
        require_ray()


def test_index_vectors_checks_the_shape() -> None:
    retriever = DenseRetriever("minilm", cache=False)
    with pytest.raises(InputError, match="one embedding row per document"):
        retriever.index_vectors(DOCS, np.zeros((len(DOCS) - 1, 8), dtype=np.float32))


def test_bad_settings_are_refused_before_ray_starts(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="shards must be at least 1"):
        generate_sharded("fake", DOCS, tmp_path, shards=0)
    refused = r"supports EmbeddingFeatures .* and HiddenStateFeatures .*, got object"
    with pytest.raises(ConfigurationError, match=refused):
        extract_features(object(), [("q?", DOCS[0])])
    with pytest.raises(InputError, match="no \\(question, documents\\) items"):
        extract_fast_features([])
    with pytest.raises(InputError, match="a non-empty list of Documents"):
        extract_fast_features([("q?", [])])


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    ray = pytest.importorskip("ray", reason="needs scopeguard[ray]")
    pytest.importorskip("ray.data", reason="needs scopeguard[ray]")
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True)
    yield
    ray.shutdown()


@pytest.mark.slow
def test_dense_index_on_ray_equals_single_process(ray_local: None) -> None:
    pytest.importorskip("sentence_transformers", reason="needs scopeguard[embeddings]")
    pytest.importorskip("faiss", reason="needs scopeguard[retrieval]")
    single = DenseRetriever("minilm", cache=False, show_progress=False)
    single.index(DOCS)
    on_ray = DenseRetriever("minilm", cache=False, show_progress=False)
    index_dense(on_ray, DOCS, concurrency=2, batch_size=3)  # several batches over two actors
    expected = single.encoder.encode_documents([d.text for d in DOCS])
    got = on_ray._index.reconstruct_n(0, len(DOCS))
    np.testing.assert_allclose(got, expected, atol=1e-5)
    for query in ("railway number 3", "museum plan"):
        assert [h.document.id for h in on_ray.search(query, k=3)] == [
            h.document.id for h in single.search(query, k=3)
        ]


@pytest.mark.slow
def test_nli_features_on_ray_equal_batch_features(ray_local: None, tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers", reason="needs scopeguard[embeddings]")
    features = EmbeddingFeatures(embedding_model="minilm", pooling="cls", cache_root=str(tmp_path))
    pairs = [(f"What did the council decide about the {t}?", d) for t, d in zip(TOPICS, DOCS, strict=True)]
    pairs.append((pairs[0][0], DOCS[1]))  # a repeated question: embedded once
    got = extract_features(features, pairs, concurrency=2, batch_size=4)
    expected = features.batch_features(pairs, progress=False)
    assert got.shape == expected.shape == (len(pairs), 3 * 384)
    np.testing.assert_allclose(got, expected, atol=1e-5)


def _no_ray(*args: object, **kwargs: object) -> None:
    raise AssertionError("nothing should go to Ray: every row is in the driver's cache")


@pytest.mark.slow
def test_probe_hidden_states_on_ray_equal_batch_features_and_resume_from_the_cache(
    ray_local: None, smollm2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # questions on three documents, interleaved, and one pair twice
    pairs = [(f"What did the council decide about the {TOPICS[k]}?", DOCS[k % 3]) for k in range(7)]
    pairs.append(pairs[1])
    single = HiddenStateFeatures(llm=str(smollm2), cache_root=str(tmp_path / "single"), n_threads=1)
    expected = single.batch_features(pairs, progress=False)
    on_ray = HiddenStateFeatures(llm=str(smollm2), cache_root=str(tmp_path / "ray"), n_threads=1)
    got = extract_features(on_ray, pairs, concurrency=2, batch_size=1)
    assert got.shape == expected.shape == (len(pairs), on_ray.backend.n_embd)  # type: ignore[attr-defined]
    np.testing.assert_allclose(got, expected, atol=1e-4)
    assert not np.allclose(got[0], got[3])  # same document, other question: other state
    monkeypatch.setattr(_features, "map_texts", _no_ray)
    np.testing.assert_array_equal(extract_features(on_ray, pairs), got)
    # and the single-process path reads what Ray put in the cache
    np.testing.assert_array_equal(on_ray.batch_features(pairs, progress=False), got)


@pytest.mark.slow
def test_probe_worker_without_the_model_file_says_so(ray_local: None, smollm2: Path, tmp_path: Path) -> None:
    link = tmp_path / "model.gguf"
    link.symlink_to(smollm2)
    features = HiddenStateFeatures(llm=str(link), cache_root=str(tmp_path / "cache"), n_threads=1)
    assert features.cache.get("nothing") is None  # the driver opened the model and its cache
    link.unlink()  # as on a node where the path does not exist
    with pytest.raises(ModelError, match="model path must exist on every node"):
        extract_features(features, [("Who built the harbour?", DOCS[0])], concurrency=1)


@pytest.mark.slow
def test_fast_features_on_ray_equal_the_featurizer_and_feed_training(
    ray_local: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("sentence_transformers", reason="needs scopeguard[embeddings]")
    from scopeguard.detection.read import fast

    monkeypatch.setenv("SCOPEGUARD_CACHE", str(tmp_path))  # the driver's cache, read by training
    single = [(f"What did the council decide about the {TOPICS[k]}?", DOCS[k % 3]) for k in range(6)]
    items: list[tuple[str, Document | list[Document]]] = [*single, ("Which bridge?", [DOCS[0], DOCS[7]])]
    got = extract_fast_features(items, concurrency=2, batch_size=1)
    featurizer = fast.FastFeaturizer("minilm")
    expected = [featurizer.features(q, [d] if isinstance(d, Document) else d) for q, d in items]
    assert got.shape == (len(items), 2)
    np.testing.assert_allclose(got, [[v[f] for f in fast.FEATURES] for v in expected], atol=1e-5)
    # train-detector's signals come from the same cache: no featurizer is built
    monkeypatch.setattr(fast, "FastFeaturizer", _no_ray)
    questions = tuple(
        LabeledQuestion(id=f"q{k}", doc_id=d.id, question=q, label="in_scope")
        for k, (q, d) in enumerate(single)
    )
    signals = extract_signals(Dataset(documents={d.id: d for d in DOCS}, questions=questions), progress=False)
    row = {f"q{k}": k for k in range(len(single))}
    np.testing.assert_allclose(signals.coverage, [got[row[i], 0] for i in signals.ids])
    np.testing.assert_allclose(signals.alignment, [got[row[i], 1] for i in signals.ids])


def _questions(folder: Path) -> list[tuple[str, str, str]]:
    rows = [json.loads(line) for line in (folder / "questions.jsonl").open(encoding="utf-8")]
    return [(r["id"], r["label"], r["question"]) for r in rows]


@pytest.mark.slow
def test_sharded_generation_equals_one_process_and_resumes(ray_local: None, tmp_path: Path) -> None:
    docs = [{"doc_id": f"d{i}", "text": invented_document(f"plan-{i}")} for i in range(6)]
    single = Generator(EloqChatModel(), concurrency=2, progress=False).run(docs, tmp_path / "single")
    # killed after shard 0 of an earlier 3-shard run: its finished documents are merged, not redone
    first = generate_sharded(functools.partial(EloqChatModel), docs[:2], tmp_path / "ray", shards=1)
    assert first.docs_done_run == 2
    summary = generate_sharded(functools.partial(EloqChatModel), docs, tmp_path / "ray", shards=2)
    assert summary.docs_done_run == 4 and len(summary.shards) == 2
    assert summary.docs_merged == single.docs_done == 6
    assert _questions(tmp_path / "ray") == _questions(tmp_path / "single")
    docs_rows = (tmp_path / "ray" / "documents.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(r)["doc_id"] for r in docs_rows] == [d["doc_id"] for d in docs]
    again = generate_sharded(functools.partial(EloqChatModel), docs, tmp_path / "ray", shards=3)
    assert again.docs_done_run == 0 and again.shards == () and again.docs_merged == 6
