"""Call and token accounting, per document and per run, with a cost estimate for priced models.

The price table is an ESTIMATE: OpenAI list prices in US dollars per 1M tokens (input, output), as
published on 2025-06-01 for standard (non-batch, uncached) requests. Prices change; check the provider's
page before budgeting. Models not in the table (local models included) get no cost estimate.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

__all__ = ["PRICES_DATE", "PRICES_PER_1M", "Usage", "estimate_cost"]

PRICES_DATE = "2025-06-01"
PRICES_PER_1M: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-3.5-turbo": (0.50, 1.50),
}


class Usage(BaseModel):
    """LLM requests and tokens. ``cached`` requests were served from the reply cache (no cost).

    ``truncated`` counts the replies (samples) that stopped at the token cap (finish reason
    ``length``), whatever happened to them afterwards.
    """

    model_config = ConfigDict(frozen=True)

    calls: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    billed_prompt_tokens: int = 0
    billed_completion_tokens: int = 0
    truncated: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{k: getattr(self, k) + getattr(other, k) for k in type(self).model_fields})

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @classmethod
    def total(cls, items: Iterable[Usage]) -> Usage:
        out = cls()
        for u in items:
            out = out + u
        return out


def _price(model: str) -> tuple[float, float] | None:
    name = model.split(":", 1)[-1].strip().lower()
    if name in PRICES_PER_1M:
        return PRICES_PER_1M[name]
    # dated snapshots such as gpt-4o-mini-2024-07-18: the longest matching prefix
    matches = [k for k in PRICES_PER_1M if name.startswith(k + "-")]
    return PRICES_PER_1M[max(matches, key=len)] if matches else None


def estimate_cost(model: str, usage: Usage) -> float | None:
    """Estimated US dollars for the tokens actually sent (cache hits are free); None if unpriced."""
    price = _price(model)
    if price is None:
        return None
    return (usage.billed_prompt_tokens * price[0] + usage.billed_completion_tokens * price[1]) / 1e6
