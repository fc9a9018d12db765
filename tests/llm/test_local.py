"""The embedded llama.cpp backend against a real (tiny) GGUF model."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("llama_cpp", reason="needs scopeguard[local]")

from scopeguard.errors import DocumentTooLongError, ModelError
from scopeguard.llm import from_spec
from scopeguard.llm.local import LlamaCppChatModel
from scopeguard.models import local_gguf


@pytest.fixture(scope="module")
def smollm2() -> Path:
    try:
        return local_gguf("smollm2")
    except ModelError as exc:
        pytest.skip(str(exc))


def test_missing_model_file_is_a_model_error() -> None:
    with pytest.raises(ModelError, match="not found"):
        LlamaCppChatModel("/nonexistent/model.gguf")


def test_thread_count_defaults_and_env_override(smollm2: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from scopeguard.errors import ConfigurationError

    monkeypatch.delenv("SCOPEGUARD_N_THREADS", raising=False)
    assert LlamaCppChatModel(smollm2).n_threads == os.cpu_count()
    monkeypatch.setenv("SCOPEGUARD_N_THREADS", "1")
    assert LlamaCppChatModel(smollm2).n_threads == 1
    assert LlamaCppChatModel(smollm2, n_threads=3).n_threads == 3
    monkeypatch.setenv("SCOPEGUARD_N_THREADS", "many")
    with pytest.raises(ConfigurationError, match="SCOPEGUARD_N_THREADS"):
        LlamaCppChatModel(smollm2)


@pytest.mark.slow
@pytest.mark.integration
def test_samples_seeds_and_the_instance_cache(smollm2: Path) -> None:
    llm = LlamaCppChatModel(smollm2, n_ctx=512, n_threads=1)
    prompt = "Name a colour."
    # llama.cpp keeps the last prompt's state: a first call reads the whole prompt, later ones only
    # its last token, and on CPU the two paths can differ in the last bits (enough to change a
    # sample). One call first, so the two compared below start from the same kept state.
    llm.complete(prompt, max_tokens=6)
    c = llm.complete(prompt, n=2, temperature=0.9, max_tokens=6, seed=11)
    assert len(c.texts) == 2 and c.requests == 2
    assert c.completion_tokens > 0 and c.prompt_tokens > 0
    # same seeds -> same samples; greedy is deterministic
    again = llm.complete(prompt, n=2, temperature=0.9, max_tokens=6, seed=11)
    assert again.texts == c.texts
    g1 = llm.complete(prompt, max_tokens=6)
    g2 = LlamaCppChatModel(smollm2, n_ctx=512, n_threads=1).complete(prompt, max_tokens=6)
    assert g1.texts == g2.texts
    # one Llama instance per (path, n_ctx, threads): a second model object reuses it
    assert llm._loaded() is LlamaCppChatModel(smollm2, n_ctx=512, n_threads=1)._loaded()


@pytest.mark.slow
@pytest.mark.integration
def test_prompt_longer_than_the_window_is_document_too_long(smollm2: Path) -> None:
    llm = from_spec(f"local:{smollm2}", n_ctx=128, n_threads=1)
    assert isinstance(llm, LlamaCppChatModel)
    with pytest.raises(DocumentTooLongError) as info:
        llm.complete("word " * 400, max_tokens=4)
    assert info.value.limit == 128 and info.value.n_tokens > 128
    assert isinstance(llm, LlamaCppChatModel) and llm.count_tokens("word " * 400) == info.value.n_tokens
