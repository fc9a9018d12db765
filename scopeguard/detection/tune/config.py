"""What decides a tuning run (:class:`TuneConfig`, saved as its ``config.json``) and what a finished
run reports (:class:`TuneReport`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from scopeguard.detection.read.reader import TEMPLATE
from scopeguard.detection.tune.model import ADAPT_MODES, DTYPES
from scopeguard.errors import ConfigurationError

__all__ = ["DEFAULT_TARGETS", "TuneConfig", "TuneReport"]

DEFAULT_TARGETS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")


class TuneConfig(BaseModel):
    """Everything that decides what a tuning run computes (saved as the run's ``config.json``)."""

    datasets: list[str]
    evaluate: list[str] = Field(default_factory=list)
    base: str = "qwen2.5-coder-0.5b"
    rank: int = 8
    alpha: float = 16.0
    dropout: float = 0.0
    targets: list[str] = Field(default_factory=lambda: list(DEFAULT_TARGETS))
    top_layers: int = 0  # adapt only the top N decoder blocks (0: all)
    adapt: str = "all"  # "question": the adapter reads from the question on (ADAPT_MODES)
    lr: float = 5e-5
    warmup: float = 0.06
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    epochs: int = 1
    batch: int = 8
    micro_batch: int = 0  # 0: 1 on the CPU, 8 on CUDA
    dtype: str = "auto"  # the base's weights (DTYPES): "auto" is bfloat16 on CUDA, float32 on the CPU
    max_questions: int | None = None
    max_tokens: int = 768
    val_fraction: float = 0.1
    val_questions: int = 48
    eval_every: int = 25
    same_source: dict[str, str] = Field(default_factory=dict)
    template: str = TEMPLATE
    seed: int = 0

    def check(self) -> None:
        if not self.datasets:
            raise ConfigurationError("train-reader needs at least one dataset")
        for name, value in (("rank", self.rank), ("batch", self.batch), ("epochs", self.epochs)):
            if value < 1:
                raise ConfigurationError(f"{name} must be >= 1, got {value}")
        if not 0 < self.lr < 1:
            raise ConfigurationError(f"lr must be in (0, 1), got {self.lr}")
        if not 0 <= self.warmup < 1:
            raise ConfigurationError(f"warmup is a share of the updates in [0, 1), got {self.warmup}")
        if self.max_tokens < 64:
            raise ConfigurationError(f"max_tokens must be at least 64, got {self.max_tokens}")
        if self.adapt not in ADAPT_MODES:
            raise ConfigurationError(f"adapt must be one of {', '.join(ADAPT_MODES)}, got {self.adapt!r}")
        if self.dtype not in DTYPES:
            raise ConfigurationError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if self.eval_every < 1:
            raise ConfigurationError(f"eval_every must be >= 1, got {self.eval_every}")


class TuneReport(BaseModel):
    """What a finished run wrote and how its reader did (first and last point of the curve)."""

    out: Path
    updates: int
    examples_seen: int
    seconds: float
    #: updates not applied because their loss or gradient was not finite
    skipped: int = 0
    before: dict[str, dict[str, float]]
    after: dict[str, dict[str, float]]
    curve: list[dict[str, Any]]
    counts: dict[str, dict[str, int]]
