"""Hidden states from the verdict's own decode (llama.cpp's eval callback), against a real model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scopeguard.detection.read.reader import verdict_messages
from scopeguard.errors import ConfigurationError
from scopeguard.llamacpp import resolve_layers

DOC = (
    "The Brindlewick library opened in March 2019. The building cost 4 million pounds and was "
    "designed by the local firm Harrow & Pike. Its roof carries 300 solar panels."
)
QUESTIONS = ("How much did the Brindlewick library cost?", "Who was the first head librarian of Brindlewick?")


def test_layers_are_numbered_like_transformers_hidden_states() -> None:
    assert resolve_layers([-1, -4, 3, 30], 30) == (30, 27, 3)
    with pytest.raises(ConfigurationError, match="layer 0"):
        resolve_layers([0], 30)
    with pytest.raises(ConfigurationError, match="outside"):
        resolve_layers([31], 30)
    with pytest.raises(ConfigurationError, match="outside"):
        resolve_layers([-31], 30)


@pytest.mark.slow
@pytest.mark.integration
def test_the_verdict_read_returns_hidden_states_without_changing_the_verdict(smollm2: Path) -> None:
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts
    from scopeguard.detection.read.llamacpp_probe import LlamaCppHiddenStates

    tapped = LlamaCppVerdicts(smollm2, n_threads=1, n_ctx=1024, layers=(-1, -3, 2), persist_states=False)
    plain = LlamaCppVerdicts(smollm2, n_threads=1, n_ctx=1024, persist_states=False)
    n_layer = tapped.layers[0]  # -1 is the top: the model's layer count
    assert tapped.layers == (n_layer, n_layer - 2, 2) and plain.layers == ()
    scores = [tapped.score(verdict_messages(q, DOC)) for q in QUESTIONS]  # the second reuses the document
    for q, s in zip(QUESTIONS, scores, strict=True):
        assert s.margin == plain.score(verdict_messages(q, DOC)).margin  # the same decode
        assert s.hidden is not None and s.hidden.shape == (3, tapped._llm.n_embd())
        assert np.isfinite(s.hidden).all() and (np.linalg.norm(s.hidden, axis=1) > 0).all()
    assert plain.score(verdict_messages(QUESTIONS[0], DOC)).hidden is None
    # different questions, different states; the same question read afresh, the same state
    assert not np.allclose(scores[0].hidden, scores[1].hidden)
    fresh = LlamaCppVerdicts(smollm2, n_threads=1, n_ctx=1024, layers=(-1, -3, 2), persist_states=False)
    again = fresh.score(verdict_messages(QUESTIONS[1], DOC)).hidden
    assert again is not None
    for a, b in zip(again, scores[1].hidden, strict=True):
        assert np.corrcoef(a, b)[0, 1] > 0.999  # up to llama.cpp's batch-size rounding
    # the final state is what llama.cpp's own embeddings API returns for the last token
    ids = tapped._ids(verdict_messages(QUESTIONS[0], DOC))
    reference = _embeddings_api_last_state(smollm2, ids)
    assert np.corrcoef(reference, scores[0].hidden[0])[0, 1] > 0.999
    # the paper probe's llama.cpp backend reads through the same wrapper and tap, at any layer
    probe = LlamaCppHiddenStates(str(smollm2), n_ctx=1024, n_threads=1)
    assert np.corrcoef(probe.last_hidden(ids), reference)[0, 1] > 0.999
    block = LlamaCppHiddenStates(str(smollm2), n_ctx=1024, n_threads=1, layer=2).last_hidden(ids)
    assert np.corrcoef(block, scores[0].hidden[2])[0, 1] > 0.999


def _embeddings_api_last_state(model: Path, ids: list[int]) -> np.ndarray:
    """The last token's final state from a context made with embedding=True and pooling NONE."""
    import llama_cpp

    from scopeguard.llamacpp import load_llama

    llm = load_llama(
        model,
        purpose="a reference",
        embedding=True,
        pooling_type=llama_cpp.LLAMA_POOLING_TYPE_NONE,
        n_ctx=1024,
        n_batch=1024,
        n_ubatch=1024,
        n_threads=1,
    )
    try:
        llm._batch.reset()
        llm._batch.set_batch(ids, 0, True)
        llm._ctx.decode(llm._batch)
        ptr = llama_cpp.llama_get_embeddings_ith(llm._ctx.ctx, len(ids) - 1)
        return np.ctypeslib.as_array(ptr, shape=(int(llm.n_embd()),)).astype(np.float32, copy=True)
    finally:
        llm.close()


@pytest.mark.slow
@pytest.mark.integration
def test_a_prompt_longer_than_a_micro_batch_keeps_the_last_tokens_state(smollm2: Path) -> None:
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts

    long_doc = " ".join([DOC] * 25)  # about 900 tokens: two micro-batches of 512
    scorer = LlamaCppVerdicts(smollm2, n_threads=1, n_ctx=2048, layers=(-1, 4), persist_states=False)
    score = scorer.score(verdict_messages(QUESTIONS[0], long_doc))
    assert score.n_tokens > 512 and score.hidden is not None
    assert np.isfinite(score.hidden).all() and (np.linalg.norm(score.hidden, axis=1) > 0).all()
