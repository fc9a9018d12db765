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
   of thing that is (:func:`~._subjects.about_subject`, mended there), then writes, for each of the
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
5. each mode's source of out-of-scope candidates is a list of prompts (:mod:`._out_of_scope`),
   asked a round at a time (:func:`~._out_of_scope.ask_round`), each reply's candidates handed to
   the :class:`~._keeper.Keeper`, which keeps each or drops it with the reason. The writer decides
   which rounds a document gets (below).

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

from dataclasses import dataclass
from typing import Literal

from scopeguard.errors import DocumentTooLongError
from scopeguard.generation._context import DocumentContext
from scopeguard.generation.checkpoint import DocumentRecord, DroppedQuestion, GeneratedQuestion
from scopeguard.generation.offline._in_scope import in_scope_candidates
from scopeguard.generation.offline._keeper import Keeper, KeeperRules
from scopeguard.generation.offline._out_of_scope import ask_round
from scopeguard.generation.offline._reading import read_document
from scopeguard.generation.offline._screens import Screen
from scopeguard.generation.offline._subjects import about_subject

__all__ = ["generate_offline"]


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
    if cfg.mode in ("unstated", "offline"):  # the unstated questions ask about the subject
        view = await about_subject(ctx, view)
    keeper = Keeper(ctx, rules, view, screens)
    await ask_round(ctx, keeper, cfg.mode, sources)
    # offline: a short document's follow-ups come last, after its sampled rounds and the margin's
    # candidates; min_oos 0 sets no target to top up to, and they are asked at once
    last = cfg.mode == "offline" and cfg.min_oos > 0
    if cfg.mode == "offline" and not last:
        await ask_round(ctx, keeper, "followup", sources)
    extra = 0
    while len(keeper.kept) < cfg.min_oos and extra < cfg.extra_rounds:
        extra += 1
        await ask_round(ctx, keeper, cfg.mode, sources, extra)
    # a document still short keeps the margin's candidates; then, offline, follow-ups are asked and
    # the margin read again
    filled = 0
    for resort in (None, "followup") if last else (None,):
        if len(keeper.kept) >= cfg.min_oos:
            break
        if resort is not None:
            await ask_round(ctx, keeper, resort, sources)
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
