"""The offline modes' out-of-scope candidates: each mode's prompts, asked a round at a time and kept.

Each mode's source of candidates is a list of prompts (:class:`_Ask`; by mode in :data:`_SOURCES`):
``unstated`` (and ``offline``) asks, for each informative sentence, questions about the document's
subject that the sentence leaves unanswered; ``followup`` asks for questions a reader would ask
next, written from the in-scope questions alone; ``perturb`` rewrites each of the first kept
questions once per edit kind. :func:`ask_round` asks one round of a mode's prompts (round 0: the
first, at the configured sampling; then the sampled top-up rounds), each reply held to its JSON
schema and read by its parser (:func:`~._replies.ask_reply`), and hands each reply's candidates to
the :class:`~._keeper.Keeper`, which keeps each or drops it with the reason, before the next prompt
is made. Which rounds a document gets is the writer's (:mod:`._writer`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from scopeguard.generation._context import DocumentContext, Sampling
from scopeguard.generation.config import GenerationConfig
from scopeguard.generation.offline._in_scope import SPARE_IN_SCOPE
from scopeguard.generation.offline._keeper import Keeper
from scopeguard.generation.offline._reading import DocumentView
from scopeguard.generation.offline._replies import ReplyShape, ask_reply, edits_reply, questions_reply
from scopeguard.generation.offline._screens import Candidate
from scopeguard.generation.offline._vocabulary import KIND_WORDS

__all__ = ["ask_round", "example_index"]

_ASKED_SHOWN = 8  # the questions already asked that a sampled top-up round is shown


def example_index(source: str) -> int:
    """Which worked example the perturbation prompt shows for ``source`` (varied, reproducible)."""
    return int(hashlib.sha256(source.encode("utf-8")).hexdigest()[:8], 16)


@dataclass(frozen=True)
class _Ask:
    """One prompt of a source of out-of-scope candidates (:data:`_SOURCES`): its ``step``, its
    ``template`` and the ``variables`` it is rendered with, the reply's :class:`~._replies.ReplyShape`,
    and how the reply's value becomes candidates; ``series``: the reply is one list of questions
    (an enumeration among them is dropped, :meth:`~._keeper.Keeper.take`)."""

    step: str
    template: str
    shape: ReplyShape[Any]
    variables: Mapping[str, object]
    candidates: Callable[[Any], list[Candidate]]
    series: bool = True


def _edited(edits: dict[str, str], source: str) -> list[Candidate]:
    return [Candidate(question, kind, source) for kind, question in edits.items()]


def _perturb(cfg: GenerationConfig, keeper: Keeper, sources: list[str], round_: int) -> Iterator[_Ask]:
    """Each of the first ``perturb_sources`` kept questions rewritten once per edit kind."""
    kinds = list(cfg.perturb_kinds)
    for source in sources[: cfg.perturb_sources]:
        yield _Ask(
            "perturb",
            "gen_perturb_question",
            edits_reply(kinds),
            {"question": source, "kinds": kinds, "example": example_index(source)},
            partial(_edited, source=source),
            series=False,
        )


def _unstated_sentences(cfg: GenerationConfig, view: DocumentView, round_: int) -> list[str]:
    """The sentences round ``round_`` (0: the first) of unstated questions asks about: the
    ``n_in_scope + 2`` most informative, and each sampled top-up round the next as many not asked
    yet, while any are left (the same sentences again gave the same questions: copies)."""
    k = max(cfg.n_in_scope, 1) + SPARE_IN_SCOPE
    return view.informative(k, skip=k * round_) or view.informative(k)


def _unstated_candidates(questions: list[str], moor: str) -> list[Candidate]:
    return [Candidate(question, "unstated", sentence=moor) for question in questions]


def _unstated(cfg: GenerationConfig, keeper: Keeper, sources: list[str], round_: int) -> Iterator[_Ask]:
    """``unstated_per_sentence`` questions per informative sentence about what it leaves unsaid:
    about the document's subject if one was named (else about what the sentence names), the details
    hinted at fitting its kind where the template has hints for it. A question about the subject
    (or what its kind is called: "the film") is about its sentence even when it shares no word with
    it; a sampled top-up round (``round_`` > 0) is shown the last questions written and asked for
    other details. Each sentence is asked once the last one's candidates were kept or dropped."""
    n = cfg.unstated_per_sentence
    subject, kind = keeper.view.subject, keeper.view.kind
    called = f"{subject}\n{KIND_WORDS.get(kind, '')}"
    for sentence in _unstated_sentences(cfg, keeper.view, round_):
        if keeper.full:  # max_oos: no more are kept, so none are asked for
            break
        # a sampled top-up round is shown what was asked already (the same few questions came back)
        asked = keeper.asked[-_ASKED_SHOWN:] if round_ > 0 else []
        moor = f"{sentence}\n{called}" if subject else sentence
        yield _Ask(
            "unstated",
            "gen_unstated_question",
            questions_reply(n),
            {"sentence": sentence, "n": n, "subject": subject, "kind": kind, "asked": asked},
            partial(_unstated_candidates, moor=moor),
        )


def _followup(cfg: GenerationConfig, keeper: Keeper, sources: list[str], round_: int) -> Iterator[_Ask]:
    """``followups`` questions a reader would ask next, written from the in-scope questions alone."""
    n = cfg.followups
    yield _Ask(
        "followup",
        "gen_followup_questions",
        questions_reply(n),
        {"questions": sources, "n": n},
        lambda questions: [Candidate(q, "followup") for q in questions],
    )


# each mode's own source of out-of-scope candidates, by mode: the prompts of one round of it
# (``round_`` 0: the first; then the sampled top-up rounds, :func:`ask_round`)
_Source = Callable[[GenerationConfig, Keeper, list[str], int], Iterator[_Ask]]
_SOURCES: dict[str, _Source] = {
    "perturb": _perturb,
    "unstated": _unstated,
    "offline": _unstated,
    "followup": _followup,
}


async def ask_round(
    ctx: DocumentContext, keeper: Keeper, mode: str, sources: list[str], round_: int = 0
) -> None:
    """Ask round ``round_`` of ``mode``'s prompts (:data:`_SOURCES`; ``sources``: the in-scope
    questions they may be written from) in turn, each reply held to its shape
    (:func:`~._replies.ask_reply`), and hand each reply's candidates to the keeper before the next
    prompt is made. Round 0 is asked at the configured sampling; a top-up round ``round_`` > 0 at
    ``extra_temperature``, seeded ``seed + round_``."""
    cfg = ctx.cfg
    sampling: Sampling | None = None
    if round_ > 0:
        sampling = (cfg.extra_temperature, None if cfg.seed is None else cfg.seed + round_)
    for ask in _SOURCES[mode](cfg, keeper, sources, round_):
        got = await ask_reply(ctx, ask.step, ask.template, ask.shape, sampling, **ask.variables)
        if got is not None:
            value, reply = got
            await keeper.take(ask.step, ask.candidates(value), reply.id, series=ask.series)
