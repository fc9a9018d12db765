"""The generator's settings: one :class:`GenerationConfig`, the single source of every default.

The CLI (``scopeguard generate``) reads its option defaults from these fields, and ``--paper``
is :meth:`GenerationConfig.paper`.

Modes: ``faithful`` and ``efficient`` are the paper's Algorithm 1 (guided hallucination);
``unstated``, ``followup``, ``offline`` (both; follow-ups only to top up a short document) and
``perturb`` are scopeguard's offline modes for small local models, and ``in_scope`` their in-scope
questions alone (what a calibration's threshold reads; :mod:`scopeguard.generation.offline`);
``auto`` is resolved by the :class:`~scopeguard.generation.pipeline.Generator`: ``offline`` with a
packaged GGUF model, ``faithful`` otherwise.

The offline modes' screens (rules that drop a candidate no person would send) are named in one
tuple, ``screens``; the screens are registered by name in :mod:`scopeguard.generation.offline`
(:func:`~scopeguard.generation.offline.register_screen`), and a
:class:`~scopeguard.generation.Generator` looks the names up once, when it is built. The questions
asked again when a reply is unusable are named in ``fallbacks``. Why each rule is there, with the hand
counts that led to it, is in ``docs/research/generation-history.md``.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from scopeguard.errors import ConfigurationError
from scopeguard.generation._edit_kinds import EDIT_KINDS, EditKind

__all__ = [
    "DEFAULT_SCREENS",
    "EDIT_KINDS",
    "FALLBACKS",
    "NATURAL_EDIT_KINDS",
    "OFFLINE_MODES",
    "PAPER_IN_SCOPE",
    "PAPER_VOTES",
    "RETIRED_SETTINGS",
    "EditKind",
    "Fallback",
    "GenerationConfig",
    "Mode",
    "is_packaged_local",
    "upgrade_settings",
]

# ELOQ section 4.4: "we adopted m=9 in our experiments" (Algorithm 2's self-consistency votes).
PAPER_VOTES = 9
# Appendix B.9 leaves {num_q} open; ELOQ-Silver has 8,949 in-scope questions over 1,955
# documents (Table 2), 4.6 per document, so the paper preset asks for 5.
PAPER_IN_SCOPE = 5


def is_packaged_local(llm: object) -> bool:
    """Whether ``llm`` (or the model it wraps, through ``.llm``) runs a packaged GGUF model in process."""
    from scopeguard.models import is_packaged_gguf

    for _ in range(8):  # wrappers: recording, rate-limited, JSON-constrained
        path = getattr(llm, "path", None)
        if path is not None:
            return bool(is_packaged_gguf(path))
        inner = getattr(llm, "llm", None)
        if inner is None or inner is llm:
            return False
        llm = inner
    return False


Mode = Literal["auto", "faithful", "efficient", "perturb", "followup", "unstated", "offline", "in_scope"]
OFFLINE_MODES: tuple[str, ...] = ("perturb", "followup", "unstated", "offline", "in_scope")
# The kinds `perturb` uses unless told otherwise: the packaged 1.5B's mutual-exclusion and
# impossible-condition rewrites are seldom a question a person would send ("... instead of ...?",
# "... for the second time?"; counted in docs/research/generation-history.md); both stay available.
NATURAL_EDIT_KINDS: tuple[EditKind, ...] = ("negation", "antonym", "entity_swap", "other_neutral")
#: the screens of the offline modes, in the order applied (each registered by name in offline._screens)
DEFAULT_SCREENS: tuple[str, ...] = (
    "degenerate",
    "moored",
    "natural",
    "unwritten_name",
    "no_name",
    "writer",
    "one_thing",
    "other_thing",
    "odd_details",
    "about_subject",
    "answered",
)
# The questions asked again when a reply is unusable (scopeguard's additions; none is the paper's):
# recover: a recovery reply unusable after its retry is asked for the guesses alone
# (gen_recover_guesses); question: facts whose question the batched question step lost are asked
# for one at a time; judge: a judge sample without a verdict is asked once more (scopeguard.voting).
Fallback = Literal["recover", "question", "judge"]
FALLBACKS: tuple[Fallback, ...] = get_args(Fallback)
# GenerationConfig.max_oos's default; a larger min_oos given without a cap raises the cap to it
_DEFAULT_MAX_OOS = 3


def _check_screens(names: object) -> None:
    """Raise :class:`~scopeguard.errors.ConfigurationError` for a repeated name in ``names``
    (anything but a sequence of names is pydantic's to refuse; whether each name is a registered
    screen is the :class:`~scopeguard.generation.Generator`'s to check, once, when it is built)."""
    if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
        return
    if len(set(names)) != len(names):
        raise ConfigurationError("screens must name each screen once")


class GenerationConfig(BaseModel):
    """Settings of the generator; the defaults are the paper's (6 claims, 3 subsets, 3 rounds).

    The ``judge_*`` fields configure the LLM-judge filter (Algorithm 1 step 10, Appendix B.3):
    ``judge_votes`` is the number of votes ``m``, ``judge_max_tokens`` the cap on each judge reply
    (``None``: no cap, the paper's). A judge reply cut at the cap without a verdict is drawn again
    without the cap by the judge itself and recorded (``issues``), never silently an unknown vote.

    A name repeated in ``screens`` raises :class:`~scopeguard.errors.ConfigurationError`; an unknown
    one raises it, naming the valid ones, when a :class:`~scopeguard.generation.Generator` is built.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Mode = "auto"
    n_claims: int = Field(default=6, ge=2, le=30)
    n_subsets: int = Field(default=3, ge=1)
    rounds: int = Field(default=3, ge=1, le=10)
    n_in_scope: int = Field(default=3, ge=0, le=20)
    filter: bool = True
    judge_votes: int = Field(default=3, ge=1)
    judge_temperature: float = Field(default=0.7, ge=0.0)
    judge_max_tokens: int | None = Field(default=256, ge=1)
    temperature: float = Field(default=0.0, ge=0.0)
    seed: int | None = 0
    retries: int = Field(default=1, ge=0, le=3)
    # scopeguard's addition: a document left with fewer than ``min_oos`` out-of-scope questions gets
    # up to ``extra_rounds`` more rounds sampled at ``extra_temperature`` (0 = the paper)
    min_oos: int = Field(default=2, ge=0, le=20)
    extra_rounds: int = Field(default=2, ge=0, le=10)
    extra_temperature: float = Field(default=0.7, ge=0.0)
    # the questions asked again when a reply is unusable (FALLBACKS; () = the paper)
    fallbacks: tuple[Fallback, ...] = FALLBACKS
    # perturb: the first perturb_sources kept in-scope questions, each rewritten once per edit kind
    perturb_sources: int = Field(default=3, ge=1, le=20)
    perturb_kinds: tuple[EditKind, ...] = NATURAL_EDIT_KINDS
    # followup, offline: follow-up questions asked of the in-scope ones, at once
    followups: int = Field(default=5, ge=1, le=20)
    # unstated, offline: questions per informative sentence about what it leaves unsaid
    unstated_per_sentence: int = Field(default=2, ge=1, le=5)
    # in-scope sentences asked beyond the first n_in_scope + 2 while fewer than n_in_scope are kept
    more_in_scope: int = Field(default=6, ge=0, le=20)
    # an out-of-scope candidate needs this share of its content words in the document
    min_overlap: float = Field(default=0.5, ge=0.0, le=1.0)
    # ... and P(out of scope) of at least the filter's threshold plus this margin
    oos_margin: float = Field(default=0.25, ge=0.0, lt=1.0)
    # at most this many out-of-scope questions kept of one document, the first kept (None: no cap)
    max_oos: int | None = Field(default=_DEFAULT_MAX_OOS, ge=1, le=50)
    # the offline modes' screens, in the order applied (DEFAULT_SCREENS; offline._screens by name);
    # "natural" also screens Algorithm 1's questions for a prompt example's phrases
    screens: tuple[str, ...] = DEFAULT_SCREENS

    def __init__(self, **data: Any) -> None:
        _check_screens(data.get("screens"))  # before pydantic, which would wrap the error
        super().__init__(**data)

    @field_validator("screens")
    @classmethod
    def _known_screens(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        _check_screens(names)  # a saved run read with model_validate: a ValidationError
        return names

    @field_validator("perturb_kinds")
    @classmethod
    def _distinct_kinds(cls, kinds: tuple[EditKind, ...]) -> tuple[EditKind, ...]:
        if not kinds or len(set(kinds)) != len(kinds):
            raise ValueError("perturb_kinds must name at least one edit kind, each once")
        return kinds

    @field_validator("fallbacks")
    @classmethod
    def _distinct_fallbacks(cls, names: tuple[Fallback, ...]) -> tuple[Fallback, ...]:
        if len(set(names)) != len(names):
            raise ValueError("fallbacks must name each fallback once")
        return names

    @model_validator(mode="before")
    @classmethod
    def _cap_follows_minimum(cls, data: object) -> object:
        # a minimum above the default cap, with no cap given: the cap is the minimum
        if isinstance(data, dict) and "max_oos" not in data:
            minimum = data.get("min_oos")
            if isinstance(minimum, int) and minimum > _DEFAULT_MAX_OOS:
                return {**data, "max_oos": minimum}
        return data

    @model_validator(mode="after")
    def _cap_above_minimum(self) -> GenerationConfig:
        if self.max_oos is not None and self.max_oos < self.min_oos:
            raise ValueError(
                f"max_oos ({self.max_oos}) is below min_oos ({self.min_oos}): a document could never "
                "keep its minimum of out-of-scope questions"
            )
        return self

    def resolved(self, llm: object) -> GenerationConfig:
        """This config with ``auto`` made concrete for ``llm``: ``offline`` when ``llm`` is one of
        the packaged GGUF models (asked for the facts Algorithm 1 needs, they copy the document:
        docs/research/generation-log.md, "Faithful vs efficient mode"), else ``faithful``."""
        if self.mode != "auto":
            return self
        return self.model_copy(update={"mode": "offline" if is_packaged_local(llm) else "faithful"})

    @classmethod
    def paper(cls, **settings: object) -> GenerationConfig:
        """The paper's Algorithm 1 with every scopeguard addition off (``settings`` override).

        The mode is ``faithful`` unless ``settings`` names another.

        The judge filter votes ``m=9`` times (section 4.4) with no follow-up turn and no reply cap;
        :data:`PAPER_IN_SCOPE` in-scope questions per document; no fallback and no ``natural``
        screen. Pair it with ``Generator(judge="judge")`` for the paper's LLM-judge filter. What
        still differs from the paper is listed in docs/guides/train-on-your-corpus.md.
        """
        additions: dict[str, object] = {
            "mode": "faithful",
            "n_in_scope": PAPER_IN_SCOPE,
            "judge_votes": PAPER_VOTES,
            "judge_max_tokens": None,
            "fallbacks": (),
            "min_oos": 0,
            "screens": tuple(s for s in DEFAULT_SCREENS if s != "natural"),
            "max_oos": None,
        }
        return cls(**{**additions, **settings})  # type: ignore[arg-type]


# Run folders saved by earlier versions, before the screens tuple, recorded a boolean per rule. Each
# screen's and fallback's: (the field, how a run saved before the field existed ran).
_OLD_SWITCHES: dict[str, tuple[str, bool]] = {
    "natural": ("natural_screen", True),
    "writer": ("writer_screen", False),
    "one_thing": ("one_thing_screen", False),
    "other_thing": ("other_thing_screen", False),
    "odd_details": ("odd_details_screen", False),
    "about_subject": ("about_subject_screen", False),
    "recover": ("recover_fallback", True),
    "question": ("question_fallback", True),
    "judge": ("judge_followup", True),
}
# screens added after the tuple: a run saved before the tuple ran without them
_AFTER_THE_TUPLE = ("answered", "unwritten_name", "no_name")
#: the boolean fields of run folders saved before the screens tuple whose "on" is now the only
#: behaviour (their "off", an earlier generator, was removed): a run saved with one off, or before it
#: existed, cannot be resumed (why each rule is there: docs/research/generation-history.md)
RETIRED_SETTINGS: tuple[str, ...] = (
    "unstated_subject",
    "unstated_hints",
    "place_year_hint",
    "followups_to_top_up",
    "subject_moored",
    "top_up_new_sentences",
    "overlap_skips_details",
    "overlap_counts_subject",
    "copies_by_detail",
    "detail_synonyms",
    "fill_from_margin",
    "absent_details",
    "absent_stores",
    "absent_authors",
    "subject_as_written",
    "agent_nouns_apart",
    "centre_as_written",
    "subject_in_document",
    "top_up_shows_asked",
    "followups_after_top_ups",
    "kind_words_count",
    "subject_named_late",
    "subject_article",
    "split_long_sentences",
)


def upgrade_settings(saved: dict[str, Any]) -> dict[str, Any]:
    """The settings a run folder saved (``run.json``) as this version reads them: one saved before
    the ``screens`` tuple has its booleans mapped to ``screens`` and ``fallbacks``; one saved with a
    retired switch off (or before it existed) raises :class:`~scopeguard.errors.ConfigurationError`:
    this version cannot run as it did."""
    if "screens" in saved:
        return saved
    off = [field for field in RETIRED_SETTINGS if saved.get(field) is not True]
    if off:
        raise ConfigurationError(
            f"saved by an earlier scopeguard with {', '.join(off)} off (or not yet there), which this "
            "version always has on: start a new --out folder"
        )
    on = {name for name, (field, before) in _OLD_SWITCHES.items() if saved.get(field, before)}
    old = {*RETIRED_SETTINGS, *(field for field, _ in _OLD_SWITCHES.values())}
    return {
        **{k: v for k, v in saved.items() if k not in old},
        "screens": [
            s for s in DEFAULT_SCREENS if (s in on or s not in _OLD_SWITCHES) and s not in _AFTER_THE_TUPLE
        ],
        "fallbacks": [f for f in FALLBACKS if f in on],
    }
