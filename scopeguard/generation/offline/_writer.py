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
5. every out-of-scope candidate goes to the :class:`~._keeper.Keeper`, which keeps it or drops it
   with the reason.

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

from scopeguard.errors import DocumentTooLongError
from scopeguard.generation._context import DocumentContext, Sampling
from scopeguard.generation.cache import CachedReply
from scopeguard.generation.checkpoint import DocumentRecord
from scopeguard.generation.offline._in_scope import SPARE_IN_SCOPE, in_scope_candidates
from scopeguard.generation.offline._keeper import Keeper, KeeperRules
from scopeguard.generation.offline._reading import informative_sentences, unusable_reason
from scopeguard.generation.offline._replies import (
    MAX_TOKENS_PER_QUESTION,
    SUBJECT_KIND_TOKENS,
    SUBJECT_TOKENS,
    edits_schema,
    parse_edits,
    parse_questions,
    parse_subject,
    questions_schema,
    subject_schema,
)
from scopeguard.generation.offline._screens import Candidate, DocumentView, Screen
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


async def ask_questions(
    ctx: DocumentContext, step: str, template: str, count: int, sampling: Sampling | None, **variables: object
) -> tuple[list[str], CachedReply] | None:
    """``count`` questions from ``template`` (a JSON reply held to the questions schema), or ``None``."""
    return await ctx.ask(
        step,
        template,
        lambda r, lenient: parse_questions(r.text, count, truncated=r.truncated, lenient=lenient),
        max_tokens=MAX_TOKENS_PER_QUESTION * count + 40,
        sampling=sampling,
        schema=questions_schema(count),
        **variables,
    )


async def _perturb(
    ctx: DocumentContext, keeper: Keeper, sources: list[str], sampling: Sampling | None
) -> None:
    kinds = list(ctx.cfg.perturb_kinds)
    for source in sources[: ctx.cfg.perturb_sources]:
        got = await ctx.ask(
            "perturb",
            "gen_perturb_question",
            lambda r, lenient: parse_edits(r.text, kinds, truncated=r.truncated, lenient=lenient),
            max_tokens=MAX_TOKENS_PER_QUESTION * len(kinds) + 40,
            sampling=sampling,
            schema=edits_schema(kinds),
            question=source,
            kinds=kinds,
            example=example_index(source),
        )
        if got is None:
            continue
        edits, reply = got
        for kind, question in edits.items():
            await keeper.consider("perturb", Candidate(question, kind, source), reply.id)


async def _subject(ctx: DocumentContext) -> tuple[str, str, bool]:
    """What the document is about, in a few words, what kind of thing it is
    (:data:`SUBJECT_KINDS`), and whether that is a stand-in for the model's name;
    ``("", "", False)`` when the model names nothing usable. A description the model capitalised is
    named as the document writes it (:func:`~._subjects.subject_as_written`); a subject with a word
    the document never writes is the model's guess, and one the document first names late is a
    passing mention: what the document calls it ("the case") is asked about instead, or what each
    sentence names (:func:`~._subjects.stand_in`); one named in lower case gets "the"
    (:func:`~._subjects.with_article`)."""
    got = await ctx.ask(
        "subject",
        "gen_document_subject",
        lambda r, lenient: parse_subject(r.text, truncated=r.truncated, lenient=lenient),
        max_tokens=SUBJECT_TOKENS + SUBJECT_KIND_TOKENS,
        schema=subject_schema(),
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


def _unstated_sentences(ctx: DocumentContext, round_: int) -> list[str]:
    """The sentences round ``round_`` (0: the first) of unstated questions asks about: the
    ``n_in_scope + 2`` most informative, and each sampled top-up round the next as many not asked
    yet, while any are left (the same sentences again gave the same questions: copies)."""
    k = max(ctx.cfg.n_in_scope, 1) + SPARE_IN_SCOPE
    fresh = informative_sentences(ctx.doc.text, k, skip=k * round_, split_long=True)
    return fresh or informative_sentences(ctx.doc.text, k, split_long=True)


async def _unstated(ctx: DocumentContext, keeper: Keeper, sampling: Sampling | None, round_: int = 0) -> None:
    """``unstated_per_sentence`` questions per informative sentence about what it leaves unsaid:
    about the document's subject if one was named (else about what the sentence names), the details
    hinted at fitting its kind where the template has hints for it. A question about the subject
    (or what its kind is called: "the film") is about its sentence even when it shares no word with
    it; a sampled top-up round (``round_`` > 0) is shown the last questions written and asked for
    other details."""
    n = ctx.cfg.unstated_per_sentence
    subject, kind = keeper.view.subject, keeper.view.kind
    called = f"{subject}\n{KIND_WORDS.get(kind, '')}"
    for sentence in _unstated_sentences(ctx, round_):
        if keeper.full:  # max_oos: no more are kept, so none are asked for
            break
        # a sampled top-up round is shown what was asked already (the same few questions came back)
        asked = keeper.asked[-_ASKED_SHOWN:] if round_ > 0 else []
        got = await ask_questions(
            ctx,
            "unstated",
            "gen_unstated_question",
            n,
            sampling,
            sentence=sentence,
            n=n,
            subject=subject,
            kind=kind,
            asked=asked,
        )
        if got is not None:
            questions, reply = got
            moor = f"{sentence}\n{called}" if subject else sentence
            for question in keeper.series(questions, "unstated"):
                await keeper.consider("unstated", Candidate(question, "unstated", sentence=moor), reply.id)


async def _followup(
    ctx: DocumentContext, keeper: Keeper, sources: list[str], sampling: Sampling | None
) -> None:
    n = ctx.cfg.followups
    got = await ask_questions(ctx, "followup", "gen_followup_questions", n, sampling, questions=sources, n=n)
    if got is None:
        return
    questions, reply = got
    for question in keeper.series(questions, "followup"):
        await keeper.consider("followup", Candidate(question, "followup"), reply.id)


async def _round(
    ctx: DocumentContext, keeper: Keeper, sources: list[str], sampling: Sampling | None, round_: int
) -> None:
    """One round of the mode's own source of out-of-scope candidates (``round_`` 0: the first,
    unsampled; then the sampled top-up rounds): perturbations, unstated questions (``unstated`` and
    ``offline``) or follow-ups."""
    if ctx.cfg.mode == "perturb":
        await _perturb(ctx, keeper, sources, sampling)
    elif ctx.cfg.mode in ("unstated", "offline"):
        await _unstated(ctx, keeper, sampling, round_)
    else:
        await _followup(ctx, keeper, sources, sampling)


async def _run(ctx: DocumentContext, screens: tuple[Screen, ...]) -> DocumentRecord:
    cfg = ctx.cfg
    view = DocumentView.of(ctx.doc.text)
    rules = KeeperRules.of(cfg, ctx.judge)
    in_scope, candidates, dropped_in_scope = await in_scope_candidates(ctx, view, screens, rules.min_score)
    if not candidates:
        if not dropped_in_scope:
            return ctx.record("failed", error="in-scope questions: no usable reply")
        # every reply was a question, none about its sentence: nothing worth rewriting
        return ctx.record(
            "failed",
            error=f"in-scope questions: none usable ({len(dropped_in_scope)} written, each dropped "
            "with its reason)",
            dropped=tuple(dropped_in_scope),
        )
    if cfg.mode == "in_scope":
        return ctx.record("done", questions=tuple(in_scope), dropped=tuple(dropped_in_scope))
    sources = [q.question for q in in_scope] or candidates
    unstated = cfg.mode in ("unstated", "offline")
    if unstated:
        subject, kind, stood_in = await _subject(ctx)
        view = view.about(subject, kind, stand_in=stood_in)
    keeper = Keeper(ctx, rules, view, screens)
    await _round(ctx, keeper, sources, None, 0)
    # offline: a short document's follow-ups come last, after its sampled rounds and the margin's
    # candidates; min_oos 0 sets no target to top up to, and they are asked at once
    last = cfg.mode == "offline" and cfg.min_oos > 0
    if cfg.mode == "offline" and not last:
        await _followup(ctx, keeper, sources, None)
    extra = 0
    while len(keeper.kept) < cfg.min_oos and extra < cfg.extra_rounds:
        extra += 1
        sampling = (cfg.extra_temperature, None if cfg.seed is None else cfg.seed + extra)
        await _round(ctx, keeper, sources, sampling, extra)
    filled = keeper.fill(cfg.min_oos)
    if last and len(keeper.kept) < cfg.min_oos:
        await _followup(ctx, keeper, sources, None)
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
    return ctx.record(
        "done",
        questions=tuple(keeper.kept + in_scope),
        dropped=tuple(dropped_in_scope + keeper.dropped),
    )


async def generate_offline(ctx: DocumentContext, screens: tuple[Screen, ...]) -> DocumentRecord:
    """One document in an offline mode, its candidates screened by ``screens`` (:func:`~._screens.get_screens`
    of the configured names); an unusable document is ``skipped`` with the reason."""
    reason = unusable_reason(ctx.doc.text, split_long=True)
    if reason is not None:
        return ctx.record("skipped", error=reason)
    try:
        # a filter that reads the document in passages (logprob) refuses one longer than its limit
        passages = getattr(ctx.judge, "passages", None)
        if callable(passages):
            passages([ctx.doc])
        return await _run(ctx, screens)
    except DocumentTooLongError as exc:
        return ctx.record("skipped", error=f"longer than the model's context: {exc}")
