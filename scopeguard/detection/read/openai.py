"""Log-prob verdicts from an OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp server).

One chat completion per prompt with ``max_tokens=1``, ``temperature=0``, ``logprobs=true`` and
``top_logprobs`` (default 20): the verdict words' log-probs are read from the first generated
token's top list (both the chat shape ``logprobs.content[0].top_logprobs`` and the legacy
``logprobs.top_logprobs[0]`` map are understood). A reply without log-probs means the endpoint
does not support them: :class:`~scopeguard.errors.ConfigurationError` names the alternative.
When neither Yes nor No is among the top tokens, :class:`~scopeguard.errors.LLMResponseError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scopeguard._progress import progress_bar
from scopeguard.detection.read.base import VerdictScore, score_from_top_logprobs
from scopeguard.errors import ConfigurationError, LLMResponseError
from scopeguard.llm.base import ChatMessage

__all__ = ["OpenAIVerdicts", "top_logprobs_of"]


def _as_dict(obj: Any) -> Any:
    dump = getattr(obj, "model_dump", None)
    return dump() if callable(dump) else obj


def top_logprobs_of(response: Any) -> dict[str, float] | None:
    """token -> log-prob of the first generated token, from a chat completion (``None``: absent)."""
    raw = _as_dict(response)
    try:
        logprobs = raw["choices"][0].get("logprobs")
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
    if not isinstance(logprobs, dict):
        return None
    content = logprobs.get("content")
    if isinstance(content, list) and content:
        first = content[0] or {}
        top = first.get("top_logprobs") or []
        out = {str(t["token"]): float(t["logprob"]) for t in top if isinstance(t, dict) and "token" in t}
        if "token" in first and "logprob" in first:
            out.setdefault(str(first["token"]), float(first["logprob"]))
        return out or None
    legacy = logprobs.get("top_logprobs")
    if isinstance(legacy, list) and legacy and isinstance(legacy[0], dict):
        return {str(k): float(v) for k, v in legacy[0].items()}
    return None


class OpenAIVerdicts:
    """Verdict log-probs through an :class:`~scopeguard.llm.openai_compat.OpenAIChatModel`."""

    def __init__(self, chat_model: Any, *, top_logprobs: int = 20) -> None:
        if not 1 <= top_logprobs <= 20:
            raise ConfigurationError(f"top_logprobs must be in 1..20, got {top_logprobs}")
        if not hasattr(chat_model, "chat_completion"):
            raise ConfigurationError(
                f"{type(chat_model).__name__} cannot return log-probs; use an OpenAIChatModel"
            )
        self.chat_model = chat_model
        self.top_logprobs = top_logprobs

    @property
    def name(self) -> str:
        return str(self.chat_model.model)

    def count_tokens(self, text: str) -> int:
        return len(text) // 4 + 1  # no tokenizer at hand: a conservative estimate for chunking

    def _params(self, messages: Sequence[ChatMessage]) -> dict[str, Any]:
        return {
            "model": self.chat_model.model,
            "messages": [m.model_dump() for m in messages],
            "temperature": 0.0,
            "max_tokens": 1,
            "logprobs": True,
            "top_logprobs": self.top_logprobs,
        }

    def _read(self, response: Any) -> VerdictScore:
        top = top_logprobs_of(response)
        where = getattr(self.chat_model, "base_url", "the endpoint")
        if top is None:
            raise ConfigurationError(
                f"{where} returned no log-probs for model {self.name!r}: this endpoint does not support "
                "logprobs/top_logprobs. Use the free-text self-consistency detector instead "
                "(detector='judge'), or a server that returns log-probs (OpenAI, vLLM, llama.cpp server)."
            )
        score = score_from_top_logprobs(top)
        if score is None:
            raise LLMResponseError(
                f"neither Yes nor No is among the top {len(top)} next tokens of {self.name!r} at {where}",
                reply=", ".join(sorted(top)[:10]),
            )
        return score

    def score(self, messages: Sequence[ChatMessage]) -> VerdictScore:
        return self._read(self.chat_model.chat_completion(self._params(messages)))

    async def ascore(self, messages: Sequence[ChatMessage]) -> VerdictScore:
        return self._read(await self.chat_model.achat_completion(self._params(messages)))

    def score_many(
        self, prompts: Sequence[Sequence[ChatMessage]], *, progress: bool | None = None
    ) -> list[VerdictScore]:
        return [self.score(p) for p in progress_bar(prompts, desc="verdicts", enabled=progress)]
