"""The settings of a calibration: :class:`CalibrationConfig`, the one source of every default
(``scopeguard calibrate`` reads its option defaults from its fields), and the record a calibration
folder keeps of them (``DIR/calibration.json``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from scopeguard.errors import ConfigurationError
from scopeguard.generation.corpus import LengthRule
from scopeguard.retrieval.registry import DEFAULT_RETRIEVER
from scopeguard.runs import RunFolder

__all__ = [
    "CONFIG_FILE",
    "MAX_BUDGET",
    "REPORT_BUDGETS",
    "CalibrationConfig",
    "CalibrationRunConfig",
    "calibration_folder",
    "make_config",
]

CONFIG_FILE = "calibration.json"
#: a budget above this refuses more answerable questions than it answers: no operating point
MAX_BUDGET = 0.5
#: the budgets the report card's table compares
REPORT_BUDGETS = (0.05, 0.10, 0.15, 0.20)
# the generator's own length rule (ELOQ's 150/300 words): the one source of both limits
_RULE = LengthRule()


class CalibrationConfig(BaseModel):
    """What a calibration reads and the operating point it chooses.

    ``budget``: the share of answerable questions the guard may refuse (the threshold is chosen so
    that at most this share of answerable questions is refused); ``hedge_budget``: the share that
    may be refused or answered with a caveat (default ``min(2 * budget, 0.5)``; the band between the
    two thresholds is hedged); ``hedge=False``: no hedge band. ``sample`` documents are drawn (seeded
    by ``seed``) from the corpus to generate questions on, the first ``oos_sample`` of them both
    kinds, the others in-scope questions alone (the threshold reads in-scope questions; out-of-scope
    ones measure what it catches, and cost most of a document's generation time); passages under
    ``min_words`` words are joined with their neighbours of the same source first. ``labelled``:
    dataset folders of questions labelled by people, read instead of generated questions (as well, with
    ``also_generate``); ``generation``: a finished ``scopeguard generate`` folder read instead of
    generating. ``generated_shift``: logits added to generated in-scope questions' scores before
    the threshold is chosen, because they are easier than people's (``docs/research/calibration.md``;
    ``None``: the shift learned for the detector's read mode, :func:`learned_shift`; 0: none);
    labelled questions are read as they are. ``rephrase``: the writer first puts each generated
    in-scope question in a reader's own words (:mod:`scopeguard.calibration._rephrase`),
    as people ask.

    ``questions``: a query log (:mod:`scopeguard.querylog`), each question read against the chunks
    it was given, or the top ``k`` the ``retriever`` finds in the corpus; ``select``: how many of
    them to choose for a person to label (:mod:`scopeguard.calibration._log`). A log replaces
    generated questions, as ``labelled`` does (both, with ``also_generate``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    sample: int = Field(default=30, ge=1)
    oos_sample: int = Field(default=10, ge=0)
    seed: int = 0
    budget: float = 0.10
    hedge_budget: float | None = None
    hedge: bool = True
    min_words: int | None = Field(default=_RULE.min_words, ge=1)
    labelled: tuple[Path, ...] = ()
    also_generate: bool = False
    generation: Path | None = None
    generated_shift: float | None = Field(default=None, ge=0.0, le=10.0)
    rephrase: bool = True
    questions: Path | None = None
    k: int = Field(default=3, ge=1)
    retriever: str = DEFAULT_RETRIEVER
    select: int | None = Field(default=None, ge=1)

    @field_validator("budget", "hedge_budget")
    @classmethod
    def _budget_in_range(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None and not 0.0 < value <= MAX_BUDGET:
            what = "false-refusal budget" if info.field_name == "budget" else "hedge budget"
            raise ValueError(f"the {what} must be in (0, {MAX_BUDGET:g}], got {value:g}")
        return value

    @model_validator(mode="after")
    def _hedge_above_budget(self) -> CalibrationConfig:
        if self.hedge and self.hedge_budget is not None and self.hedge_budget <= self.budget:
            raise ValueError(
                f"the hedge budget ({self.hedge_budget:g}) must exceed the false-refusal budget "
                f"({self.budget:g}): it counts the answerable questions refused or hedged"
            )
        return self

    @property
    def max_words(self) -> int | None:
        """Documents are cut after this many words for generation (the generator's rule)."""
        return _RULE.max_words

    def hedge_level(self) -> float | None:
        """The hedge budget in force: ``None`` without hedging, or when ``min(2 * budget, 0.5)``
        leaves no room above the budget."""
        if not self.hedge:
            return None
        level = self.hedge_budget if self.hedge_budget is not None else min(2 * self.budget, MAX_BUDGET)
        return level if level > self.budget else None

    def generates(self) -> bool:
        """Whether generated questions are read (always without ``labelled`` or ``questions``)."""
        return (
            self.generation is not None
            or self.also_generate
            or (not self.labelled and self.questions is None)
        )


class CalibrationRunConfig(CalibrationConfig):
    """What ``DIR/calibration.json`` records: the settings, the corpus and the models. A rerun on
    another corpus, seed or passage rule is refused (the generated documents would not match);
    the rest may change, and the scores already read are reused where they still apply."""

    corpus: str
    corpus_sha256: str
    detector: str
    llm: str | None = None


# a rerun may change these: scores are keyed by detector, question and document, and the
# generation folder checks its own models
_FREE = frozenset(CalibrationRunConfig.model_fields) - {"corpus_sha256", "seed", "min_words"}


def calibration_folder(out: str | os.PathLike[str]) -> RunFolder[CalibrationRunConfig]:
    """The run folder ``out`` of a calibration (``calibration.json``)."""
    return RunFolder(out, CalibrationRunConfig, config_file=CONFIG_FILE, free=_FREE)


def make_config(config: CalibrationConfig | None = None, **settings: Any) -> CalibrationConfig:
    """``config`` (default: the defaults) with ``settings`` replacing fields; an invalid value is one
    :class:`ConfigurationError` line."""
    try:
        if config is None:
            return CalibrationConfig(**settings)
        return CalibrationConfig(**{**config.model_dump(), **settings})
    except ValidationError as exc:
        error = exc.errors()[0]
        message = str(error["msg"]).removeprefix("Value error, ")
        field = ".".join(str(p) for p in error["loc"])
        if field and field not in message and error["type"] != "value_error":
            message = f"{field}: {message}"
        raise ConfigurationError(f"invalid calibration setting: {message}") from None
