"""The offline modes for one document: questions small local models can write, kept by a detector.

Algorithm 1 asks a model to invent facts and write questions about them; models of 0.1-1.5B
parameters copy the document instead (docs/research/generation-log.md, "Faithful vs efficient
mode"). The offline modes ask them for what they can do, every reply held to a JSON schema
(:mod:`._replies`):

1. in-scope candidates (:mod:`._in_scope`): one question for each of the ``n_in_scope +
   2`` sentences of the document with the most names and numbers, then more while fewer than
   ``n_in_scope`` are kept, each kept when the screens pass it and the filter finds it answerable
   (``edit_kind="direct"``, the sentence as ``true_claim``);
2. ``unstated`` (and ``offline``): the model first names what the document is about and what kind
   of thing that is (:func:`_subject`, mended by :mod:`._subjects`), then writes, for each of the
   first ``n_in_scope + 2`` sentences, ``unstated_per_sentence`` questions about that subject the
   sentence leaves unanswered, hinted at details that fit its kind (a product: its price, its maker);
3. ``followup`` (and ``offline``): follow-up questions a reader would ask next, written from the
   in-scope questions alone; in ``offline`` mode only for a document the unstated questions, their
   sampled rounds and the margin's candidates leave short of ``min_oos`` (written without the
   document, they misread it more often);
4. ``perturb`` (alone): each of the first ``perturb_sources`` kept questions rewritten once per
   edit kind, SQuAD 2.0's kinds (Rajpurkar et al., 2018), the document not shown. The packaged
   1.5B's rewrites are rarely a question a person would send (read by hand in
   docs/research/generation-log.md, "Natural out-of-scope questions"), so ``offline`` leaves them out;
5. each mode's source of out-of-scope candidates is a list of prompts (:class:`_Ask`, by mode in
   :data:`_SOURCES`), asked in one loop (:func:`_ask_and_keep`) that hands each reply's candidates
   to the :class:`~._keeper.Keeper`, which keeps each or drops it with the reason.

The document is read once (:func:`~._reading.read_document`) and its run is recorded once, when it
ends (:class:`_Outcome`).

``in_scope`` stops after step 1: the kept in-scope questions alone (a calibration's threshold reads
only those, and they cost a fraction of a document's time).

A document short of ``min_oos`` kept questions gets up to ``extra_rounds`` sampled rounds (at
``extra_temperature``) of its mode's source of candidates (``unstated`` for ``offline``: each round
on the next sentences not asked yet, shown the questions asked already). A document still short
then keeps the out-of-scope candidates dropped only for the filter's margin, most confident first,
and one short of ``n_in_scope`` in-scope questions the in-scope candidates the filter doubted
within the margin, least doubted first; each is marked ``filled``. A document keeps at most
``max_oos`` out-of-scope questions, the first kept: no more sentences are asked about.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from scopeguard.errors import DocumentTooLongError
from scopeguard.generation._context import DocumentContext, Sampling
from scopeguard.generation.checkpoint import DocumentRecord, DroppedQuestion, GeneratedQuestion
from scopeguard.generation.config import GenerationConfig
from scopeguard.generation.offline._in_scope import SPARE_IN_SCOPE, in_scope_candidates
from scopeguard.generation.offline._keeper import Keeper, KeeperRules
from scopeguard.generation.offline._reading import DocumentView, read_document
from scopeguard.generation.offline._replies import (
    ReplyShape,
    ask_reply,
    edits_reply,
    questions_reply,
    subject_reply,
)
from scopeguard.generation.offline._screens import Candidate, Screen
from scopeguard.generation.offline._subjects import (
    named_late,
    stand_in,
    subject_as_written,
    subject_in_document,
    with_article,
)
from scopeguard.generation.offline._vocabulary import KIND_WORDS, SUBJECT_KINDS

__all__ = ["example_index", "generate_offline"]

_SUBJECT_CHARS = 1500  # of the document shown to name its subject (it is named early)
_ASKED_SHOWN = 8  # the questions already asked that a sampled top-up round is shown


def example_index(source: str) -> int:
    """Which worked example the perturbation prompt shows for ``source`` (varied, reproducible)."""
    return int(hashlib.sha256(source.encode("utf-8")).hexdigest()[:8], 16)


async def _subject(ctx: DocumentContext) -> tuple[str, str, bool]:
    """What the document is about, in a few words, what kind of thing it is
    (:data:`SUBJECT_KINDS`), and whether that is a stand-in for the model's name;
    ``("", "", False)`` when the model names nothing usable. A description the model capitalised is
    named as the document writes it (:func:`~._subjects.subject_as_written`); a subject with a word
    the document never writes is the model's guess, and one the document first names late is a
    passing mention: what the document calls it ("the case") is asked about instead, or what each
    sentence names (:func:`~._subjects.stand_in`); one named in lower case gets "the"
    (:func:`~._subjects.with_article`)."""
    got = await ask_reply(
        ctx,
        "subject",
        "gen_document_subject",
        subject_reply(),
        text=ctx.doc.text[:_SUBJECT_CHARS],
        subject_kinds=SUBJECT_KINDS,
    )
    if got is None:
        return ("", "", False)
    (subject, kind), reply = got
    subject = subject_as_written(subject, ctx.doc.text)
    named = subject_in_document(subject, kind, ctx.doc.text)
    if named != subject:
        step, reason = "subject_in_document", "subject_not_in_document"
        why = "has a word the document never writes"
    # a subject of a kind a review is of (KIND_WORDS: a product, a place, a book, a film) that the
    # document first names late is a passing mention ("I bought a Belkin at Costco" in a router's review)
    elif subject and kind in KIND_WORDS and named_late(subject, kind, ctx.doc.text):
        named = stand_in(subject, kind, ctx.doc.text)
        step = reason = "subject_named_late"
        why = "is first named late in the document (a passing mention)"
    else:
        return with_article(subject), kind, False
    instead = repr(named) if named else "what each sentence names"
    detail = f"{subject!r} {why}: asked about {instead}"
    ctx.note(step, reason, reply_id=reply.id, accepted=True, detail=detail)
    return named, kind, True


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


async def _ask_and_keep(
    ctx: DocumentContext, keeper: Keeper, asks: Iterable[_Ask], sampling: Sampling | None
) -> None:
    """Ask each of ``asks`` in turn (at ``sampling``) and hand its reply's candidates to the keeper."""
    for ask in asks:
        got = await ask_reply(ctx, ask.step, ask.template, ask.shape, sampling, **ask.variables)
        if got is not None:
            value, reply = got
            await keeper.take(ask.step, ask.candidates(value), reply.id, series=ask.series)


# each mode's own source of out-of-scope candidates, by mode: the prompts of one round of it
# (``round_`` 0: the first, unsampled; then the sampled top-up rounds)
_Source = Callable[[GenerationConfig, Keeper, list[str], int], Iterator[_Ask]]
_SOURCES: dict[str, _Source] = {
    "perturb": _perturb,
    "unstated": _unstated,
    "offline": _unstated,
    "followup": _followup,
}


@dataclass(frozen=True)
class _Outcome:
    """How one document's run ended, recorded once (:meth:`DocumentContext.record`)."""

    status: Literal["done", "failed", "skipped"]
    error: str | None = None
    questions: tuple[GeneratedQuestion, ...] = ()
    dropped: tuple[DroppedQuestion, ...] = ()


async def _run(ctx: DocumentContext, screens: tuple[Screen, ...]) -> _Outcome:
    """The document read once, then its questions written and kept (see the module docstring)."""
    view = read_document(ctx.doc.text)
    if view.unusable is not None:
        return _Outcome("skipped", error=view.unusable)
    # a filter that reads the document in passages (logprob) refuses one longer than its limit
    passages = getattr(ctx.judge, "passages", None)
    if callable(passages):
        passages([ctx.doc])
    cfg = ctx.cfg
    rules = KeeperRules.of(cfg, ctx.judge)
    judged = await in_scope_candidates(ctx, view, screens, rules.min_score)
    in_scope, dropped_in_scope = judged.kept, judged.dropped
    if not judged.candidates:
        if not dropped_in_scope:
            return _Outcome("failed", error="in-scope questions: no usable reply")
        # every reply was a question, none about its sentence: nothing worth rewriting
        return _Outcome(
            "failed",
            error=f"in-scope questions: none usable ({len(dropped_in_scope)} written, each dropped "
            "with its reason)",
            dropped=tuple(dropped_in_scope),
        )
    if cfg.mode == "in_scope":
        return _Outcome("done", questions=tuple(in_scope), dropped=tuple(dropped_in_scope))
    sources = [q.question for q in in_scope] or judged.candidates
    unstated = cfg.mode in ("unstated", "offline")
    if unstated:
        subject, kind, stood_in = await _subject(ctx)
        view = view.about(subject, kind, stand_in=stood_in)
    keeper = Keeper(ctx, rules, view, screens)
    source = _SOURCES[cfg.mode]
    await _ask_and_keep(ctx, keeper, source(cfg, keeper, sources, 0), None)
    # offline: a short document's follow-ups come last, after its sampled rounds and the margin's
    # candidates; min_oos 0 sets no target to top up to, and they are asked at once
    last = cfg.mode == "offline" and cfg.min_oos > 0
    if cfg.mode == "offline" and not last:
        await _ask_and_keep(ctx, keeper, _followup(cfg, keeper, sources, 0), None)
    extra = 0
    while len(keeper.kept) < cfg.min_oos and extra < cfg.extra_rounds:
        extra += 1
        sampling = (cfg.extra_temperature, None if cfg.seed is None else cfg.seed + extra)
        await _ask_and_keep(ctx, keeper, source(cfg, keeper, sources, extra), sampling)
    # a document still short keeps the margin's candidates; then, offline, follow-ups are asked and
    # the margin read again
    filled = 0
    resorts: list[Iterable[_Ask]] = [(), _followup(cfg, keeper, sources, 0)] if last else [()]
    for asks in resorts:
        if len(keeper.kept) >= cfg.min_oos:
            break
        await _ask_and_keep(ctx, keeper, asks, None)
        filled += keeper.fill(cfg.min_oos)
    filled_in = sum(bool(q.filled) for q in in_scope)
    if filled or filled_in:
        ctx.note(
            "fill_from_margin",
            "fill",
            accepted=True,
            detail=f"kept {filled} out-of-scope and {filled_in} in-scope question(s) from within the "
            f"filter's margin for at least {cfg.min_oos} and {cfg.n_in_scope}",
        )
    if extra:
        ctx.note(
            "extra_rounds",
            "top_up",
            accepted=True,
            detail=f"{extra} sampled round(s) for at least {cfg.min_oos} out-of-scope question(s); "
            f"{len(keeper.kept)} kept",
        )
    return _Outcome(
        "done",
        questions=tuple(keeper.kept + in_scope),
        dropped=tuple(dropped_in_scope + keeper.dropped),
    )


async def generate_offline(ctx: DocumentContext, screens: tuple[Screen, ...]) -> DocumentRecord:
    """One document in an offline mode, its candidates screened by ``screens`` (:func:`~._screens.get_screens`
    of the configured names); an unusable document is ``skipped`` with the reason, and so is one
    longer than the model's context."""
    try:
        outcome = await _run(ctx, screens)
    except DocumentTooLongError as exc:
        outcome = _Outcome("skipped", error=f"longer than the model's context: {exc}")
    return ctx.record(
        outcome.status, error=outcome.error, questions=outcome.questions, dropped=outcome.dropped
    )
