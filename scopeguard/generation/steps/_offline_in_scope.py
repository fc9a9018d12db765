"""The offline modes' in-scope candidates: one question per informative sentence, that it answers.

The sentences of a document with the most names and numbers (:func:`informative_sentences`; one over
45 words cut at its clause breaks) are each shown alone to the model, which copies a detail of the
sentence as the answer and writes the question that detail answers (shown the whole document, a
small model asks the same generic question again and again; asked for a question alone, it asks for
what the sentence does not name). A candidate is kept when the screens for in-scope candidates pass
it (:mod:`._screens`), the document states the kind of detail it asks for (:mod:`._absent`) and the
filter finds it answerable; while fewer than ``n_in_scope`` are kept, up to ``more_in_scope`` more
sentences are asked, and a document still short keeps the candidates the filter doubted within its
margin.
"""

from __future__ import annotations

import re

from scopeguard._sentences import split_run_on, split_sentences
from scopeguard.generation.cache import CachedReply
from scopeguard.generation.checkpoint import DroppedQuestion, GeneratedQuestion
from scopeguard.generation.steps._absent import absent_detail
from scopeguard.generation.steps._context import DocumentContext, Sampling
from scopeguard.generation.steps._filter import filter_question
from scopeguard.generation.steps._keeper import margin_floor
from scopeguard.generation.steps._natural import standalone
from scopeguard.generation.steps._offline_replies import (
    MAX_ANSWER_CHARS,
    MAX_TOKENS_PER_QUESTION,
    answered_schema,
    parse_answered,
    parse_questions,
    questions_schema,
)
from scopeguard.generation.steps._offline_screen import MAX_SENTENCE_WORDS
from scopeguard.generation.steps._screens import IN_SCOPE, Candidate, DocumentView, Screen, first_reason

__all__ = ["SPARE_IN_SCOPE", "ask_questions", "in_scope_candidates", "informative_sentences"]

SPARE_IN_SCOPE = 2  # in-scope candidates asked beyond n_in_scope (the filter drops some)
_SENTENCE_WORDS = (8, MAX_SENTENCE_WORDS)
_NAME_OR_NUMBER = re.compile(r"\b[A-Z][a-z]+|\d+")


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


def _sentences(text: str, split_long: bool) -> list[str]:
    """The sentences of ``text`` of 8 to 45 words; with ``split_long``, a longer one is cut into its
    clauses (:func:`~scopeguard._sentences.split_run_on`) and those of 8 to 45 words count as
    sentences (a text whose sentences run together, as two reviews glued without breaks or one
    written without capitals, otherwise has too few sentences to ask about)."""
    out: list[str] = []
    for sentence in split_sentences(text, glued=True):
        pieces = (
            split_run_on(sentence)
            if split_long and len(sentence.split()) > MAX_SENTENCE_WORDS
            else [sentence]
        )
        out += [p for p in pieces if _SENTENCE_WORDS[0] <= len(p.split()) <= MAX_SENTENCE_WORDS]
    return out


def informative_sentences(text: str, k: int, skip: int = 0, *, split_long: bool = False) -> list[str]:
    """The ``k`` sentences of ``text`` with the most names and numbers (8 to 45 words; with
    ``split_long``, as the offline modes ask, also the pieces of a longer one, :func:`_sentences`)
    after the ``skip`` with the most, in order."""
    sentences = _sentences(text, split_long)
    ranked = sorted(range(len(sentences)), key=lambda i: -len(_NAME_OR_NUMBER.findall(sentences[i][1:])))
    return [sentences[i] for i in sorted(ranked[skip : skip + k])]


async def in_scope_candidates(
    ctx: DocumentContext, view: DocumentView, screens: tuple[Screen, ...]
) -> tuple[list[GeneratedQuestion], list[str], list[DroppedQuestion]]:
    """The kept in-scope questions, every usable candidate (sources if none is kept), and the dropped.

    One call per informative sentence (``n_in_scope + 2`` of them): a detail of it and the question
    the detail answers; while fewer than ``n_in_scope`` are kept, up to ``more_in_scope`` more
    sentences are asked.
    """
    kept: list[GeneratedQuestion] = []
    dropped: list[DroppedQuestion] = []
    candidates: list[str] = []
    n = max(ctx.cfg.n_in_scope, 1)
    ceiling = margin_floor(ctx)
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
            filt = await filter_question(ctx, question)
            absent = absent_detail(question, ctx.doc.text)
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
