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
        pieces = list(llm.stream(PROMPT, max_tokens=16))
        assert len(pieces) > 1, llm
        # greedy decoding: the streamed pieces add up to the non-streamed reply
        assert "".join(pieces) == llm.complete(PROMPT, max_tokens=16).text, llm
