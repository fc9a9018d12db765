"""Token streaming against the real things: a llama.cpp server and the in-process llama.cpp model."""

from __future__ import annotations

import pytest

from scopeguard.llm.openai_compat import OpenAIChatModel

PROMPT = "Name three colours of the rainbow."


@pytest.mark.slow
@pytest.mark.integration
def test_real_backends_stream_token_by_token(llama_server: str) -> None:
    from scopeguard.llm.local import LlamaCppChatModel
    from scopeguard.models import local_gguf

    server = OpenAIChatModel("local", base_url=llama_server, timeout=300)
    in_process = LlamaCppChatModel(local_gguf("smollm2"), n_ctx=512, n_threads=1)
    for llm in (server, in_process):
        # llama.cpp keeps the last prompt's state: a first request reads the whole prompt, a repeat
        # only its last token, and on CPU the two paths can differ in the last bits (on an AMD EPYC
        # with repacked weights a greedy 'colours' became 'colors'). One request first, so the
        # stream and the reply compared below both start from the kept state.
        llm.complete(PROMPT, max_tokens=16)
        pieces = list(llm.stream(PROMPT, max_tokens=16))
        assert len(pieces) > 1, llm
        # greedy decoding: the streamed pieces add up to the non-streamed reply
        assert "".join(pieces) == llm.complete(PROMPT, max_tokens=16).text, llm


@pytest.mark.integration
@pytest.mark.parametrize("max_tokens", [4, 64])  # cut by the limit ("length"), and ended by the model
def test_a_local_stream_ends_with_the_usage_complete_reports(smollm2: object, max_tokens: int) -> None:
    from scopeguard.llm.base import StreamUsage
    from scopeguard.llm.local import LlamaCppChatModel

    llm = LlamaCppChatModel(str(smollm2), n_ctx=512, n_threads=1)
    *text, usage = list(llm.stream(PROMPT, max_tokens=max_tokens, seed=3))
    whole = llm.complete(PROMPT, max_tokens=max_tokens, seed=3)
    assert isinstance(usage, StreamUsage) and usage == ""  # no text: "".join() is unchanged
    assert not any(isinstance(piece, StreamUsage) for piece in text)
    assert "".join(text) == whole.text
    assert (usage.prompt_tokens, usage.completion_tokens) == (whole.prompt_tokens, whole.completion_tokens)
    assert usage.finish_reason == whole.finish_reasons[0]
