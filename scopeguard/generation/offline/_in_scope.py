"""The offline modes' in-scope candidates: one question per informative sentence, that it answers.

The sentences of a document with the most names and numbers
(:meth:`~._reading.DocumentView.informative`; one over 45 words cut at its clause breaks) are each
shown alone to the model, which copies a detail of the sentence as the answer and writes the
question that detail answers (shown the whole document, a small model asks the same generic question
again and again; asked for a question alone, it asks for what the sentence does not name). The
:class:`InScopeKeeper` keeps a candidate when the screens for in-scope candidates pass it
(:mod:`._screens`), the document states the kind of detail it asks for (:mod:`._absent`) and the
filter finds it answerable; while fewer than ``n_in_scope`` are kept, up to ``more_in_scope`` more
sentences are asked, and a document still short keeps the candidates the filter doubted within its
margin.
"""

from __future__ import annotations

from scopeguard.generation._context import DocumentContext
from scopeguard.generation.checkpoint import DroppedQuestion, FilterRecord, GeneratedQuestion
from scopeguard.generation.offline._keeper import Desk
from scopeguard.generation.offline._reading import DocumentView
from scopeguard.generation.offline._replies import answered_reply, ask_reply
from scopeguard.generation.offline._screens import IN_SCOPE, Candidate, Screen, screen

__all__ = ["SPARE_IN_SCOPE", "InScopeKeeper", "in_scope_candidates"]

SPARE_IN_SCOPE = 2  # in-scope candidates asked beyond n_in_scope (the filter drops some)
_STEP = "offline_in_scope"


class InScopeKeeper:
    """Judges one document's in-scope candidates and collects the kept, the usable (``candidates``:
    every one the screens passed, a source to rewrite) and the dropped ones, reading the run
    through a :class:`~._keeper.Desk`. A candidate the filter finds out of scope with P(out of
    scope) under ``floor`` (the out-of-scope keeper's, :func:`~._keeper.margin_floor`) is doubted
    only within the margin, and may fill a short document (:meth:`fill`)."""

    def __init__(self, desk: Desk, view: DocumentView, screens: tuple[Screen, ...], floor: float) -> None:
        self.desk, self.view, self.screens, self.floor = desk, view, screens, floor
        self.kept: list[GeneratedQuestion] = []
        self.dropped: list[DroppedQuestion] = []
        self.candidates: list[str] = []
        # found out of scope within the margin: (P(out of scope), the record, its reply)
        self._within: list[tuple[float, DroppedQuestion, str]] = []

    async def consider(self, candidate: Candidate, reply_id: str) -> None:
        """Keep or drop one candidate (its ``sentence`` and the ``answer`` copied from it): read once
        (:func:`~._screens.screen`), passed over when the document has it already, then held to the
        screens, the details the document states and the filter."""
        read = screen(candidate, self.view, self.screens)
        question = read.candidate.question
        if not self.desk.unique(_STEP, [question], reply_id):
            return
        filt: FilterRecord | None = None
        if read.unusable is not None:  # never filtered, never a source to rewrite
            reason: str | None = f"not a usable question: {read.unusable}"
        else:
            self.candidates.append(question)
            filt = await self.desk.filter_question(question)
            reason = None
            if read.absent is not None:
                reason = f"not answerable from the document: it states no {read.absent}"
            elif filt is not None and filt.label != "in_scope":
                reason = f"filter: not answerable from the document ({filt.label})"
        if reason is None:
            self._keep(question, reply_id, filt, candidate.sentence)
            return
        self.dropped.append(
            DroppedQuestion(
                question=question,
                claim_index=None,
                reason=reason,
                filter=filt,
                label="in_scope",
                edit_kind=IN_SCOPE,
                true_claim=candidate.sentence,
            )
        )
        score = filt.score if filt is not None and filt.label == "out_of_scope" else None
        if score is not None and score < self.floor and read.absent is None:
            self._within.append((score, self.dropped[-1], reply_id))

    def _keep(
        self,
        question: str,
        reply_id: str,
        filt: FilterRecord | None,
        sentence: str | None,
        filled: bool | None = None,
    ) -> None:
        self.kept.append(
            self.desk.question(
                question,
                "in_scope",
                len(self.kept),
                reply_id,
                filt,
                edit_kind=IN_SCOPE,
                true_claim=sentence,
                filled=filled,
            )
        )

    def fill(self, minimum: int) -> None:
        """Keep the candidates doubted within the margin, least doubted first, until ``minimum``
        are kept."""
        short = max(minimum - len(self.kept), 0)
        for _, record, reply_id in sorted(self._within, key=lambda w: w[0])[:short]:
            self.dropped = [d for d in self.dropped if d is not record]
            self._keep(record.question, reply_id, record.filter, record.true_claim, filled=True)


async def in_scope_candidates(
    ctx: DocumentContext, view: DocumentView, screens: tuple[Screen, ...], floor: float
) -> InScopeKeeper:
    """The document's in-scope candidates, judged by an :class:`InScopeKeeper` (returned, with the
    kept, the usable and the dropped ones).

    One call per informative sentence (``n_in_scope + 2`` of them): a detail of it and the question
    the detail answers; while fewer than ``n_in_scope`` are kept, up to ``more_in_scope`` more
    sentences are asked.
    """
    keeper = InScopeKeeper(ctx, view, screens, floor)
    n = max(ctx.cfg.n_in_scope, 1)
    first = view.informative(n + SPARE_IN_SCOPE)
    more = view.informative(ctx.cfg.more_in_scope, skip=n + SPARE_IN_SCOPE)
    for sentence in first + more:
        if sentence in more and len(keeper.kept) >= ctx.cfg.n_in_scope:
            break
        got = await ask_reply(ctx, _STEP, "gen_offline_in_scope", answered_reply(), sentence=sentence)
        if got is not None:
            (answer, question), reply = got
            await keeper.consider(Candidate(question, IN_SCOPE, sentence=sentence, answer=answer), reply.id)
    keeper.fill(ctx.cfg.n_in_scope)
    return keeper
