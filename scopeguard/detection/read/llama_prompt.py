"""What a GGUF model's own metadata says about reading a verdict prompt with llama.cpp.

Its chat template (the prompt is rendered with it, the generation prompt appended), whether it
wants a BOS token before every prompt, and the single-token spellings of Yes and No whose
log-probabilities make the verdict. Used by :class:`~scopeguard.detection.read.llamacpp.LlamaCppVerdicts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scopeguard.detection.read.base import variant_strings
from scopeguard.llm.base import ChatMessage

__all__ = ["chat_formatter", "render_prompt", "single_token_ids", "wanted_bos"]


def chat_formatter(llm: Any) -> Any | None:
    """The model's chat template as a llama-cpp-python formatter, or ``None`` (a base model)."""
    template = dict(llm.metadata or {}).get("tokenizer.chat_template")
    if not template:
        return None
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    def piece(token_id: int) -> str:
        if token_id < 0:
            return ""
        return str(llm.detokenize([token_id], special=True).decode("utf-8", errors="replace"))

    return Jinja2ChatFormatter(
        template=template,
        eos_token=piece(int(llm.token_eos())),
        bos_token=piece(int(llm.token_bos())),
        add_generation_prompt=True,
    )


def render_prompt(formatter: Any | None, messages: Sequence[ChatMessage]) -> str:
    """``messages`` as the text the model reads: through its chat template, else plain text."""
    if formatter is None:
        return "\n\n".join(m.content for m in messages) + "\n"
    return str(formatter(messages=[m.model_dump() for m in messages]).prompt)


def wanted_bos(llm: Any) -> int | None:
    """The BOS token id the model wants before every prompt, or ``None``."""
    bos = int(llm.token_bos())
    adds = str(dict(llm.metadata or {}).get("tokenizer.ggml.add_bos_token", "false")).lower() == "true"
    return bos if adds and bos >= 0 else None


def single_token_ids(llm: Any, words: Sequence[str]) -> list[int]:
    """The ids of the spellings of ``words`` (case and leading-space variants) that are one token."""
    ids: list[int] = []
    for text in variant_strings(words):
        toks = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        if len(toks) == 1 and int(toks[0]) not in ids:
            ids.append(int(toks[0]))
    return ids
