"""The hidden-state probe on real models: Gemma 3 270M through llama.cpp, a tiny transformers model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs scopeguard[probe]")

from scopeguard.detection.detectors.probe import ProbeDetector
from scopeguard.detection.head.mlp import TrainSettings, train_head
from scopeguard.detection.read.hidden_states import HiddenStateFeatures, resolve_llm
from scopeguard.errors import ConfigurationError, DocumentTooLongError, ModelError
from scopeguard.types import Document

DOC = "The Falcons beat the Herons 3-1 at home on Saturday. Their striker scored twice."
LONG_DOC = " ".join(["The match report goes on and on about the weather in the city."] * 30)


@pytest.fixture(scope="module")
def gemma(tmp_path_factory: pytest.TempPathFactory) -> HiddenStateFeatures:
    pytest.importorskip("llama_cpp", reason="needs scopeguard[local]")
    try:
        resolve_llm("gemma3-270m")
    except ModelError as exc:
        pytest.skip(str(exc))
    cache = str(tmp_path_factory.mktemp("hs-cache"))
    return HiddenStateFeatures(llm="gemma3-270m", backend="llama_cpp", cache_root=cache, n_threads=1)


@pytest.mark.slow
@pytest.mark.integration
def test_gemma_uses_unused0_and_bos(gemma: HiddenStateFeatures) -> None:
    assert gemma.token == ("<unused0>", 6)
    ids, prefix_len, notes = gemma.build_input("Who won?", DOC)
    assert ids[0] == gemma.backend.bos_id and ids[-1] == 6 and notes == ()
    assert 0 < prefix_len < len(ids)
    ident = gemma.identity
    assert ident["backend"] == "llama_cpp" and ident["bos"] is True and ident["template"] == "probe_input"


@pytest.mark.slow
@pytest.mark.integration
def test_long_documents_are_truncated_or_rejected(gemma: HiddenStateFeatures) -> None:
    small = HiddenStateFeatures.from_identity(gemma.identity, max_tokens=64, cache_root=gemma._cache_root)
    small._backend, small._token = gemma.backend, gemma.token  # same model, smaller window
    ids, _, notes = small.build_input("Who won the match?", LONG_DOC)
    assert len(ids) == 64 and ids[-1] == 6 and "truncated" in notes[0]
    tail = gemma.backend.tokenize(small._suffix.replace("{question}", "Who won the match?"))
    assert ids[-len(tail) - 1 : -1] == tail  # the question is kept whole, the document was cut
    strict = HiddenStateFeatures.from_identity(gemma.identity, max_tokens=64, strict=True)
    strict._backend, strict._token = gemma.backend, gemma.token
    with pytest.raises(DocumentTooLongError, match="only"):
        strict.build_input("Who won the match?", LONG_DOC)


@pytest.mark.slow
@pytest.mark.integration
def test_reused_document_prefix_gives_identical_features(gemma: HiddenStateFeatures) -> None:
    a, pa, _ = gemma.build_input("Who won?", DOC)
    b, pb, _ = gemma.build_input("Why was the coach fined?", DOC)
    gemma.backend.last_hidden(a, pa)
    reused = gemma.backend.last_hidden(b, pb)  # document prefix kept from the call before
    gemma.backend.forget()  # type: ignore[attr-defined]
    fresh = gemma.backend.last_hidden(b, pb)
    np.testing.assert_array_equal(reused, fresh)
    assert reused.shape == (640,) and np.isfinite(reused).all()
    assert not np.allclose(reused, gemma.backend.last_hidden(a, pa))


@pytest.mark.slow
@pytest.mark.integration
def test_probe_detector_with_a_trained_head(gemma: HiddenStateFeatures, tmp_path: Path) -> None:
    doc = Document(id="m", text=DOC)
    pairs = [("Who did the Falcons beat?", doc), ("Why was the Falcons coach fined?", doc)]
    x = gemma.batch_features(pairs, progress=False)
    assert x.shape == (2, 640)
    assert (Path(gemma.cache.directory) / "identity.json").is_file()  # cached on disk
    head = train_head(
        x,
        np.array([0, 1], dtype=np.float32),
        None,
        None,
        detector="probe",
        features=gemma.identity,
        settings=TrainSettings(epochs=5, lr=1e-2),
    )
    head.save(tmp_path / "head")
    det = ProbeDetector(tmp_path / "head", cache_root=gemma._cache_root, n_threads=1)
    v = det.detect("Who did the Falcons beat?", doc)
    assert v.detector == "probe" and v.score is not None and 0.0 <= v.score <= 1.0
    assert v.label == ("out_of_scope" if v.score >= 0.5 else "in_scope")
    np.testing.assert_allclose(v.score, head.predict_proba(x[:1])[0], rtol=1e-5)  # same features


@pytest.mark.slow
def test_transformers_backend_on_a_local_folder(tmp_path: Path) -> None:
    """A tiny randomly initialised Llama with MiniLM's tokenizer: the transformers path, for real."""
    tf = pytest.importorskip("transformers")
    from scopeguard.models import minilm_path

    tok = tf.AutoTokenizer.from_pretrained(minilm_path())
    cfg = tf.LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    tf.LlamaForCausalLM(cfg).save_pretrained(tmp_path / "tiny")
    tok.save_pretrained(tmp_path / "tiny")
    with pytest.raises(ModelError, match="no known unused token"):
        _ = HiddenStateFeatures(llm=str(tmp_path / "tiny"), cache_root=str(tmp_path / "c")).token
    feats = HiddenStateFeatures(llm=str(tmp_path / "tiny"), token="[unused0]", cache_root=str(tmp_path / "c"))
    assert feats.backend_name == "transformers" and feats.token[0] == "[unused0]"
    rows, notes = feats.pair_features("Who won?", [Document(text=DOC)])
    assert rows.shape == (1, 32) and np.isfinite(rows).all() and notes == ()
    with pytest.raises(ConfigurationError, match="needs a GGUF"):
        _ = HiddenStateFeatures(llm=str(tmp_path / "tiny"), backend="llama_cpp").backend


class _StubBackend:
    """Just enough of a backend for ``identity`` (nothing is computed)."""

    name = "stub"
    architecture = "llama"
    vocab_size = 100
    context_length = 256
    bos_id = None
    eos_id = 2

    def single_token_id(self, token: str) -> int | None:
        return None


def _stubbed(llm: str, cache: Path, **kw: object) -> HiddenStateFeatures:
    feats = HiddenStateFeatures(llm=llm, cache_root=str(cache), **kw)  # type: ignore[arg-type]
    feats._backend = _StubBackend()
    return feats


def test_layer_is_part_of_the_identity_and_the_cache_namespace(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    last = _stubbed(str(tmp_path / "model"), tmp_path / "c")
    fourth = _stubbed(str(tmp_path / "model"), tmp_path / "c", layer=-4)
    assert last.identity["layer"] == -1 and fourth.identity["layer"] == -4
    assert {k: v for k, v in last.identity.items() if k != "layer"} == {
        k: v for k, v in fourth.identity.items() if k != "layer"
    }
    assert last.cache.directory != fourth.cache.directory  # features of one layer never serve another
    assert (
        _stubbed(str(tmp_path / "model"), tmp_path / "c", layer=-4).cache.directory == fourth.cache.directory
    )
    assert HiddenStateFeatures.from_identity(fourth.identity).layer == -4  # what a saved head restores
    old_head = {k: v for k, v in last.identity.items() if k != "layer"}  # saved before layers existed
    assert HiddenStateFeatures.from_identity(old_head).layer == -1
    with pytest.raises(ConfigurationError, match="integer"):
        HiddenStateFeatures(llm=str(tmp_path / "model"), layer="-4")  # type: ignore[arg-type]


def test_gguf_models_read_any_block_with_llama_cpp(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"")  # never loaded: the backend is chosen before the model is opened
    assert HiddenStateFeatures(llm=str(gguf)).backend_name == "llama_cpp"
    assert HiddenStateFeatures(llm=str(gguf), layer=-4).backend_name == "llama_cpp"
    assert HiddenStateFeatures(llm=str(gguf), backend="llama_cpp", layer=12).backend_name == "llama_cpp"
    with pytest.raises(ConfigurationError, match=r"layer 0.*backend='transformers'"):
        HiddenStateFeatures(llm=str(gguf), backend="llama_cpp", layer=0)
    with caplog.at_level("INFO", logger="scopeguard.detection.read.hidden_states"):
        feats = HiddenStateFeatures(llm=str(gguf), layer=0)
    assert feats.backend_name == "transformers" and "transformers backend" in caplog.text


def test_probe_detector_takes_the_layer_from_its_head(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    ident = _stubbed(str(tmp_path / "model"), tmp_path / "c", layer=-4).identity
    x = np.random.default_rng(0).normal(size=(4, 8)).astype(np.float32)
    head = train_head(
        x,
        np.array([0, 1, 0, 1], dtype=np.float32),
        None,
        None,
        detector="probe",
        features=ident,
        settings=TrainSettings(epochs=1),
    )
    head.save(tmp_path / "head")
    det = ProbeDetector(tmp_path / "head", cache_root=str(tmp_path / "c"))
    assert det.layer == -4 and det.extractor.layer == -4  # type: ignore[attr-defined]
    assert ProbeDetector(tmp_path / "head", layer=-4).layer == -4
    with pytest.raises(ConfigurationError, match="trained on layer -4"):
        ProbeDetector(tmp_path / "head", layer=-1)


@pytest.mark.slow
def test_transformers_backend_reads_the_requested_layer(tmp_path: Path) -> None:
    """SmolLM2 135M (GGUF converted once for transformers): layer -4 is another vector of the same size."""
    try:
        resolve_llm("smollm2")
    except ModelError as exc:
        pytest.skip(str(exc))
    cache = str(tmp_path / "c")
    last = HiddenStateFeatures(llm="smollm2", backend="transformers", cache_root=cache, n_threads=1)
    fourth = HiddenStateFeatures(
        llm="smollm2", backend="transformers", layer=-4, cache_root=cache, n_threads=1
    )
    a, _ = last.pair_features("Who won?", [Document(text=DOC)])
    b, _ = fourth.pair_features("Who won?", [Document(text=DOC)])
    hidden = last.backend.model.config.hidden_size  # type: ignore[attr-defined]
    assert a.shape == b.shape == (1, hidden) and np.isfinite(b).all()
    assert not np.allclose(a, b)
    assert last.cache.directory != fourth.cache.directory
    n = last.backend.n_layers  # type: ignore[attr-defined]
    first = HiddenStateFeatures(
        llm="smollm2", backend="transformers", layer=n - 3, cache_root=cache, n_threads=1
    )
    np.testing.assert_allclose(first.pair_features("Who won?", [Document(text=DOC)])[0], b, rtol=1e-5)
    with pytest.raises(ConfigurationError, match=rf"valid layers are {-(n + 1)} to {n}"):
        _ = HiddenStateFeatures(llm="smollm2", backend="transformers", layer=n + 1, cache_root=cache).backend
