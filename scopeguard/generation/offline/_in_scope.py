"""The offline modes' in-scope candidates: one question per informative sentence, that it answers.

The sentences of a document with the most names and numbers
(:func:`~._reading.informative_sentences`; one over 45 words cut at its clause breaks) are each
shown alone to the model, which copies a detail of the sentence as the answer and writes the
question that detail answers (shown the whole document, a small model asks the same generic question
again and again; asked for a question alone, it asks for what the sentence does not name). A
candidate is kept when the screens for in-scope candidates pass it (:mod:`._screens`), the document
states the kind of detail it asks for (:mod:`._absent`) and the filter finds it answerable; while
fewer than ``n_in_scope`` are kept, up to ``more_in_scope`` more sentences are asked, and a document
still short keeps the candidates the filter doubted within its margin.
"""

from __future__ import annotations

from scopeguard.generation._context import DocumentContext
from scopeguard.generation.checkpoint import DroppedQuestion, GeneratedQuestion
from scopeguard.generation.offline._absent import absent_detail
from scopeguard.generation.offline._natural import standalone
from scopeguard.generation.offline._reading import informative_sentences
from scopeguard.generation.offline._replies import (
    MAX_ANSWER_CHARS,
    MAX_TOKENS_PER_QUESTION,
    answered_schema,
    parse_answered,
)
from scopeguard.generation.offline._screens import IN_SCOPE, Candidate, DocumentView, Screen, first_reason

__all__ = ["SPARE_IN_SCOPE", "in_scope_candidates"]

SPARE_IN_SCOPE = 2  # in-scope candidates asked beyond n_in_scope (the filter drops some)


async def in_scope_candidates(
    ctx: DocumentContext, view: DocumentView, screens: tuple[Screen, ...], floor: float
) -> tuple[list[GeneratedQuestion], list[str], list[DroppedQuestion]]:
    """The kept in-scope questions, every usable candidate (sources if none is kept), and the dropped;
    a candidate the filter finds out of scope with P(out of scope) under ``floor`` (the keeper's,
    :func:`~._keeper.margin_floor`) is doubted only within the margin.

    One call per informative sentence (``n_in_scope + 2`` of them): a detail of it and the question
    the detail answers; while fewer than ``n_in_scope`` are kept, up to ``more_in_scope`` more
    sentences are asked.
    """
    kept: list[GeneratedQuestion] = []
    dropped: list[DroppedQuestion] = []
    candidates: list[str] = []
    n = max(ctx.cfg.n_in_scope, 1)
    ceiling = floor
    # found out of scope within the margin: (P(out of scope), the record, its reply)
    within: list[tuple[float, DroppedQuestion, str]] = []
    first = informative_sentences(ctx.doc.text, n + SPARE_IN_SCOPE, split_long=True)
    more = informative_sentences(
        ctx.doc.text, ctx.cfg.more_in_scope, skip=n + SPARE_IN_SCOPE, split_long=True
    )
    for sentence in first + more:
        if sentence in more and len(kept) >= ctx.cfg.n_in_scope:
            break
        got = await ctx.ask(
            "offline_in_scope",
            "gen_offline_in_scope",
            lambda r, lenient: parse_answered(r.text, truncated=r.truncated, lenient=lenient),
            max_tokens=MAX_TOKENS_PER_QUESTION + MAX_ANSWER_CHARS // 2 + 40,
            schema=answered_schema(),
            sentence=sentence,
        )
        if got is None:
            continue
        (answer, question), reply = got
        question = standalone(question)
        if not ctx.unique("offline_in_scope", [question], reply.id):
            continue
        candidate = Candidate(question, IN_SCOPE, sentence=sentence, answer=answer)
        unusable = first_reason(screens, candidate, view)
        reason: str | None = None
        filt = None
        absent: str | None = None
        if unusable is not None:  # never filtered, never a source to rewrite
            reason = f"not a usable question: {unusable}"
        else:
            candidates.append(question)
            absent = absent_detail(question, ctx.doc.text)
            filt = await ctx.filter_question(question)
            if absent is not None:
                reason = f"not answerable from the document: it states no {absent}"
            elif filt is not None and filt.label != "in_scope":
                reason = f"filter: not answerable from the document ({filt.label})"
        if reason is not None:
            dropped.append(
                DroppedQuestion(
                    question=question,
                    claim_index=None,
                    reason=reason,
                    filter=filt,
                    label="in_scope",
                    edit_kind=IN_SCOPE,
                    true_claim=sentence,
                )
            )
            score = filt.score if filt is not None and filt.label == "out_of_scope" else None
            if score is not None and score < ceiling and absent is None:
                within.append((score, dropped[-1], reply.id))
            continue
        kept.append(
            ctx.question(
                question, "in_scope", len(kept), reply.id, filt, edit_kind=IN_SCOPE, true_claim=sentence
            )
        )
    short = max(ctx.cfg.n_in_scope - len(kept), 0)
    for _, record, reply_id in sorted(within, key=lambda w: w[0])[:short]:
        dropped = [d for d in dropped if d is not record]
        kept.append(
            ctx.question(
                record.question,
                "in_scope",
                len(kept),
                reply_id,
                record.filter,
                edit_kind=IN_SCOPE,
                true_claim=record.true_claim,
                filled=True,
            )
        )
    return kept, candidates, dropped
