"""One configuration for every voting LLM judge: :class:`JudgeConfig`.

The out-of-scope judge (:class:`~scopeguard.detection.detectors.judge.JudgeDetector`, ELOQ Algorithm 2
step 2), the defusion judge (:class:`~scopeguard.evaluation.DefusionJudge`, step 5) and the
false-refusal judge (:class:`~scopeguard.evaluation.RefusalJudge`) all sample ``votes`` replies
with :func:`scopeguard.voting.vote` and take the majority; they share these knobs, validated
once here. Defaults (``JudgeConfig()``):

=================  =======  ==========================================================
field              default  meaning
=================  =======  ==========================================================
``votes``          3        samples ``m`` per judgement (ELOQ Table 7: m=3 and m=9 tie)
``temperature``    0.7      sampling temperature of the votes (0.0 with ``votes=1``: greedy)
``adaptive``       True     stop sampling once the majority cannot change (scopeguard's)
``followup``       False    one greedy turn asking a verdict-less sample for its verdict
``max_tokens``     256      cap on each reply; ``None``: no cap
``retry_truncated`` True    a reply cut by the cap without a verdict is drawn again uncapped
``seed``           None     base seed of the samples where the backend honours seeds
=================  =======  ==========================================================

The evaluation judges default to :data:`EVALUATION_DEFAULTS` (follow-up on, seed 0: a re-run
draws the same votes). :meth:`JudgeConfig.paper` is ELOQ as published: m=9 votes, no adaptive
stopping, no follow-up turn, no reply cap (section 4.4, Algorithm 2).

Truncation: a reply that ends because it hit ``max_tokens`` (``finish_reason == "length"``) is
counted as truncated in every result (``VoteResult.truncated``, ``Judgement.truncated``,
``Vote.truncated``). With ``retry_truncated`` such a reply that carries no verdict is sampled again
without the cap, so a cap never silently turns a judgement into ``unknown``.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, Final, TypedDict

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from scopeguard.errors import ConfigurationError

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["EVALUATION_DEFAULTS", "UNSET", "ConfiguredJudge", "JudgeConfig", "JudgeSettings", "Unset"]


class Unset(enum.Enum):
    """The type of :data:`UNSET`: a judge keyword the caller did not give."""

    UNSET = "unset"


UNSET: Final = Unset.UNSET
"""Default of the judges' individual keywords: "take it from the configuration"."""


class JudgeSettings(TypedDict, total=False):
    """The knobs a judge's constructor takes one by one instead of a whole ``config=`` (each
    :data:`UNSET` when left out: the configuration's value), as :class:`JudgeConfig` names them."""

    votes: int | Unset
    temperature: float | Unset
    adaptive: bool | Unset
    max_tokens: int | Unset | None
    followup: bool | Unset
    seed: int | Unset | None


class JudgeConfig(BaseModel):
    """The knobs of a voting LLM judge (see the module docs for the defaults).

    Invalid values raise :class:`~scopeguard.errors.ConfigurationError` naming the field.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    votes: int = 3
    temperature: float = 0.7
    adaptive: bool = True
    followup: bool = False
    max_tokens: int | None = 256
    retry_truncated: bool = True
    seed: int | None = None

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "value"
            msg = str(err["msg"]).removeprefix("Value error, ")
            raise ConfigurationError(f"invalid judge setting {field}: {msg}") from None

    @field_validator("votes", mode="before")
    @classmethod
    def _positive_votes(cls, v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"the number of votes m must be a positive integer, got {v!r}")
        return v

    @field_validator("temperature")
    @classmethod
    def _non_negative_temperature(cls, v: float) -> float:
        if v < 0:
            raise ValueError(f"temperature must be >= 0, got {v}")
        return v

    @field_validator("max_tokens")
    @classmethod
    def _positive_cap(cls, v: int | None) -> int | None:
        if v is not None and v < 1:
            raise ValueError(f"max_tokens must be positive or None (no cap), got {v}")
        return v

    @classmethod
    def paper(cls, **overrides: Any) -> JudgeConfig:
        """ELOQ's judge as published: m=9 votes, all drawn, no follow-up turn, no reply cap.

        Section 4.4 adopts m=9; Algorithm 2 steps 2-3 and 5-6 draw ``m`` samples and take the
        majority; the prompt asks for reasoning first, so no cap cuts it. The paper gives no
        sampling temperature; 0.7 (the usual self-consistency value) is kept.
        """
        settings: dict[str, Any] = {
            "votes": 9,
            "temperature": 0.7,
            "adaptive": False,
            "followup": False,
            "max_tokens": None,
        }
        return cls(**{**settings, **overrides})

    def replace(self, **changes: Any) -> JudgeConfig:
        """A copy with ``changes`` applied and validated (:data:`UNSET` values are ignored)."""
        given = {k: v for k, v in changes.items() if v is not UNSET}
        return JudgeConfig(**{**self.model_dump(), **given})

    def vote_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :func:`scopeguard.voting.vote` these settings stand for
        (``followup`` is a prompt builder there: the judge supplies it when ``followup`` is on)."""
        return {
            "m": self.votes,
            "temperature": self.temperature,
            "adaptive": self.adaptive,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "retry_truncated": self.retry_truncated,
        }

    @classmethod
    def build(
        cls, config: JudgeConfig | None, base: JudgeConfig, **settings: Unpack[JudgeSettings]
    ) -> JudgeConfig:
        """``config`` if given (then ``settings`` must be unset), else ``base`` with ``settings``.

        The judges' constructors take either a whole ``config`` or the individual keywords
        (:class:`JudgeSettings`; another keyword is a TypeError, as for any call); keywords left
        :data:`UNSET` keep ``base``'s value.
        """
        for key in settings:
            if key not in JudgeSettings.__optional_keys__:
                raise TypeError(f"got an unexpected keyword argument {key!r}")
        given = {k: v for k, v in settings.items() if v is not UNSET}
        if config is not None:
            if given:
                raise ConfigurationError(
                    f"pass either config= or the judge settings ({', '.join(sorted(given))}), not both"
                )
            return config
        return base.replace(**given)


EVALUATION_DEFAULTS = JudgeConfig(followup=True, seed=0)
"""The defusion and refusal judges' defaults: a follow-up turn for verdict-less samples and
seeded sampling (``JudgeConfig.paper()`` turns both off)."""


class ConfiguredJudge:
    """Base of the voting judges: their knobs live in ``config``; the attributes read it.

    ``max_tokens`` may be assigned (a copy of a judge without its cap: ``judge.max_tokens = None``);
    the assignment replaces ``config`` with a validated copy.
    """

    config: JudgeConfig

    @property
    def votes(self) -> int:
        return self.config.votes

    @property
    def temperature(self) -> float:
        return self.config.temperature

    @property
    def adaptive(self) -> bool:
        return self.config.adaptive

    @property
    def followup(self) -> bool:
        return self.config.followup

    @property
    def seed(self) -> int | None:
        return self.config.seed

    @property
    def max_tokens(self) -> int | None:
        return self.config.max_tokens

    @max_tokens.setter
    def max_tokens(self, value: int | None) -> None:
        self.config = self.config.replace(max_tokens=value)
