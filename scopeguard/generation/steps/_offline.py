"""The offline modes for one document: questions small local models can write, kept by a detector.

Algorithm 1 asks a model to invent facts and write questions about them; models of 0.1-1.5B
parameters copy the document instead (issue #28). The offline modes ask them for what they can do,
every reply held to a JSON schema (:mod:`._offline_replies`):

1. in-scope candidates: one question for each of the ``n_in_scope + 2`` sentences of the document
   with the most names and numbers (the sentence alone is shown: shown the whole document, a
   small model asks the same generic question again and again), kept when they are about that
   sentence (not about "the sentence" itself, and sharing a content word with it) and the filter
   finds them answerable (``edit_kind="direct"``, the sentence as ``true_claim``);
2. ``perturb`` (and ``offline``): each of the first ``perturb_sources`` kept questions rewritten
   once per edit kind, SQuAD 2.0's kinds (Rajpurkar et al., 2018): the rewrite keeps the
   question's words and asks for something else. The document is not shown, so the model cannot
   copy it;
3. ``followup`` (and ``offline``): follow-up questions a reader would ask next, written from the
   in-scope questions alone (about the same people and events, often on what the document leaves out);
4. every out-of-scope candidate is kept only when at least ``min_overlap`` of its content words
   occur in the document (it is confusing, not off-topic) and the filter finds it out of scope with
   P(out of scope) at least its threshold plus ``oos_margin``; the rest are recorded as dropped,
   with the reason.

A document short of ``min_oos`` kept questions gets up to ``extra_rounds`` sampled rounds (at
``extra_temperature``) of the cheapest source of candidates for its mode.
"""

from __future__ import annotations

import itertools
import re
from typing import Literal

from scopeguard._sentences import split_sentences
from scopeguard.detection.read.text import content_stem_set, content_stems
from scopeguard.errors import DocumentTooLongError
from scopeguard.generation.checkpoint import DocumentRecord, DroppedQuestion, FilterRecord, GeneratedQuestion
from scopeguard.generation.steps._context import DocumentContext, Sampling, words
from scopeguard.generation.steps._filter import filter_question
from scopeguard.generation.steps._offline_replies import (
    MAX_TOKENS_PER_QUESTION,
    edits_schema,
    parse_edits,
    parse_questions,
    questions_schema,
)
from scopeguard.generation.steps._offline_screen import unusable_reason

__all__ = [
    "EXAMPLE_WORDS",
    "degenerate",
    "generate_offline",
    "informative_sentences",
    "overlap",
    "standalone",
    "unmoored",
]

_SPARE_IN_SCOPE = 2  # in-scope candidates asked beyond n_in_scope (the filter drops some)
_MIN_WORDS = 5
# The invented example of gen_perturb_question.j2 (its names and its topic): a rewrite that uses
# one of them when neither the document nor the source question does copied the example.
EXAMPLE_WORDS = frozenset(content_stems("Alderby Bramford harbour bridge council plan approve"))
_SENTENCE_WORDS = (8, 45)
_NAME_OR_NUMBER = re.compile(r"\b[A-Z][a-z]+|\d+")
# "... mentioned in the sentence?": shown one sentence, the model refers to it; a user never does
_SHOWN_UNIT = re.compile(
    r",?\s+(?:(?:that|which) (?:is|are) )?(?:(?:mentioned|stated|described|listed|given|named) )?"
    r"(?:in|by|from) (?:the|this) (?:sentence|text|passage|statement)\s*(?=\?$)",
    re.IGNORECASE,
)


# what standalone() leaves: "What players are mentioned in the (other) sentence?" has no sense apart
# from the prompt ("sentence" only: a user may ask about "this text" or "the passage of a bill")
_SHOWN_SENTENCE = re.compile(
    r"\b(?:in|from)\s+(?:(?:the|this|that)\s+)?(?:(?:other|previous|next|following|given|above|same)\s+)?"
    r"sentences?\b",
    re.IGNORECASE,
)
_REFERS = "refers to the sentence it was written from"


def standalone(question: str) -> str:
    """``question`` without a reference to the sentence it was written from ("What are the largest
    predatory creatures mentioned in the sentence?" -> "What are the largest predatory creatures?")."""
    cut = _SHOWN_UNIT.sub("", question).strip()
    # "Which rivers are listed in this text?" needs its verb: left as it is
    return question if cut.rstrip("?").split()[-1:] in (["is"], ["are"], ["was"], ["were"]) else cut


def degenerate(question: str) -> str | None:
    """Why ``question`` is not a usable question (it refers to the sentence shown to its writer, is too
    short, or says a run of words twice), or ``None``.

    Small models' edits sometimes repeat the subject ("Why was Ann Lee not Ann Lee?"): such a
    question is unanswerable but useless as a test.
    """
    if _SHOWN_SENTENCE.search(question):
        return _REFERS
    tokens = question.lower().rstrip("?").split()
    if len(tokens) < _MIN_WORDS:
        return f"too short ({len(tokens)} words)"
    stems = content_stems(question)
    pairs = list(itertools.pairwise(stems))
    if len(set(pairs)) < len(pairs) or any(a == b for a, b in pairs):
        return "repeats its own words"
    return None


def unmoored(question: str, sentence: str) -> str | None:
    """Why an in-scope candidate is no question about ``sentence``, the one its writer was shown, or
    ``None``: it refers to "the sentence" ("What players are mentioned in the sentence?"), or shares
    no content word with it ("What are the people, places, and things?": the prompt's words)."""
    if _SHOWN_SENTENCE.search(question):
        return _REFERS
    if not set(content_stems(question)) & set(content_stems(sentence)):
        return "shares no word with its sentence"
    return None


def overlap(question: str, document_stems: set[str]) -> float:
    """The share of ``question``'s content words (stems) that occur in the document."""
    stems = content_stems(question)
    return sum(s in document_stems for s in stems) / len(stems) if stems else 0.0


class _Keeper:
    """Judges out-of-scope candidates and collects the kept and the dropped ones."""

    def __init__(self, ctx: DocumentContext) -> None:
        self.ctx = ctx
        self.stems = content_stem_set(ctx.doc.text)
        self.kept: list[GeneratedQuestion] = []
        self.dropped: list[DroppedQuestion] = []
        threshold = getattr(ctx.judge, "threshold", 0.5)
        self.min_score = min(float(threshold) + ctx.cfg.oos_margin, 0.999)

    def _drop(
        self, question: str, reason: str, kind: str, source: str | None, filt: FilterRecord | None
    ) -> None:
        self.dropped.append(
            DroppedQuestion(
                question=question,
                claim_index=None,
                reason=reason,
                filter=filt,
                edit_kind=kind,
                source_question=source,
            )
        )

    async def consider(
        self,
        step: str,
        question: str,
        kind: str,
        source: str | None,
        reply_id: str,
        prompt_words: frozenset[str] = frozenset(),
    ) -> None:
        """Keep or drop one candidate; ``prompt_words``: stems of the prompt's invented example (a
        candidate that uses one the document and its source lack copied the example)."""
        ctx = self.ctx
        question = standalone(question)
        if not ctx.unique(step, [question], reply_id):
            self._drop(question, "a copy of a question already written", kind, source, None)
            return
        copied = sorted(
            set(content_stems(question)) & prompt_words - self.stems - set(content_stems(source or ""))
        )
        bad = f"copies the prompt's example ({', '.join(copied)})" if copied else degenerate(question)
        if bad is not None:
            self._drop(question, f"not a usable question: {bad}", kind, source, None)
            return
        share = overlap(question, self.stems)
        if share < ctx.cfg.min_overlap:
            self._drop(
                question,
                f"off-topic: {share:.0%} of its content words are in the document "
                f"(< {ctx.cfg.min_overlap:.0%})",
                kind,
                source,
                None,
            )
            return
        filt = await filter_question(ctx, question)
        if filt is not None and filt.label != "out_of_scope":
            reason = "filter: answerable from the document" if filt.label == "in_scope" else "filter: unknown"
            self._drop(question, reason, kind, source, filt)
            return
        if filt is not None and filt.score is not None and filt.score < self.min_score:
            self._drop(
                question,
                f"filter: out of scope within the margin (P={filt.score:.2f} < {self.min_score:.2f})",
                kind,
                source,
                filt,
            )
            return
        self.kept.append(
            _generated(
                ctx,
                question,
                "out_of_scope",
                len(self.kept),
                reply_id,
                filt,
                edit_kind=kind,
                source_question=source,
                overlap=round(share, 4),
            )
        )


def _generated(
    ctx: DocumentContext,
    question: str,
    label: Literal["in_scope", "out_of_scope"],
    index: int,
    reply_id: str,
    filt: FilterRecord | None,
    **provenance: object,
) -> GeneratedQuestion:
    ids: dict[str, tuple[str, ...]] = {"question": (reply_id,)}
    if filt is not None:
        ids["filter"] = filt.reply_ids
    return GeneratedQuestion(
        id=f"{ctx.doc.id}_{'oos' if label == 'out_of_scope' else 'ins'}_{index}",
        doc_id=ctx.doc.id,
        question=question,
        label=label,
        words=words(question),
        reply_ids=ids,
        filter=filt,
        **provenance,  # type: ignore[arg-type]
    )


def informative_sentences(text: str, k: int) -> list[str]:
    """The ``k`` sentences of ``text`` with the most names and numbers (8 to 45 words), in order."""
    sentences = [
        s for s in split_sentences(text) if _SENTENCE_WORDS[0] <= len(s.split()) <= _SENTENCE_WORDS[1]
    ]
    ranked = sorted(range(len(sentences)), key=lambda i: -len(_NAME_OR_NUMBER.findall(sentences[i][1:])))
    return [sentences[i] for i in sorted(ranked[:k])]


async def _in_scope(ctx: DocumentContext) -> tuple[list[GeneratedQuestion], list[str], list[DroppedQuestion]]:
    """The kept in-scope questions, every usable candidate (sources if none is kept), and the dropped.

    One call per informative sentence (``n_in_scope + 2`` of them): the question it answers.
    """
    kept: list[GeneratedQuestion] = []
    dropped: list[DroppedQuestion] = []
    candidates: list[str] = []
    for sentence in informative_sentences(ctx.doc.text, max(ctx.cfg.n_in_scope, 1) + _SPARE_IN_SCOPE):
        got = await ctx.ask(
            "offline_in_scope",
            "gen_offline_in_scope",
            lambda r, lenient: parse_questions(r.text, 1, truncated=r.truncated, lenient=lenient),
            max_tokens=MAX_TOKENS_PER_QUESTION + 40,
            schema=questions_schema(1),
            sentence=sentence,
        )
        if got is None:
            continue
        (question,), reply = got
        question = standalone(question)
        if not ctx.unique("offline_in_scope", [question], reply.id):
            continue
        unusable = unmoored(question, sentence)
        reason: str | None = None
        filt = None
        if unusable is not None:  # never filtered, never a source to rewrite
            reason = f"not a usable question: {unusable}"
        else:
            candidates.append(question)
            filt = await filter_question(ctx, question)
            if filt is not None and filt.label != "in_scope":
                reason = f"filter: not answerable from the document ({filt.label})"
        if reason is not None:
            dropped.append(
                DroppedQuestion(
                    question=question,
                    claim_index=None,
                    reason=reason,
                    filter=filt,
                    label="in_scope",
                    edit_kind="direct",
                )
            )
            continue
        kept.append(
            _generated(
                ctx, question, "in_scope", len(kept), reply.id, filt, edit_kind="direct", true_claim=sentence
            )
        )
    return kept, candidates, dropped


async def _perturb(
    ctx: DocumentContext, keeper: _Keeper, sources: list[str], sampling: Sampling | None
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
        )
        if got is None:
            continue
        edits, reply = got
        for kind, question in edits.items():
            await keeper.consider("perturb", question, kind, source, reply.id, EXAMPLE_WORDS)


async def _followup(
    ctx: DocumentContext, keeper: _Keeper, sources: list[str], sampling: Sampling | None
) -> None:
    n = ctx.cfg.followups
    got = await ctx.ask(
        "followup",
        "gen_followup_questions",
        lambda r, lenient: parse_questions(r.text, n, truncated=r.truncated, lenient=lenient),
        max_tokens=MAX_TOKENS_PER_QUESTION * n + 40,
        sampling=sampling,
        schema=questions_schema(n),
        questions=sources,
        n=n,
    )
    if got is None:
        return
    questions, reply = got
    for question in questions:
        await keeper.consider("followup", question, "followup", None, reply.id)


async def _run(ctx: DocumentContext) -> DocumentRecord:
    cfg = ctx.cfg
    in_scope, candidates, dropped_in_scope = await _in_scope(ctx)
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
    sources = [q.question for q in in_scope] or candidates
    keeper = _Keeper(ctx)
    if cfg.mode in ("perturb", "offline"):
        await _perturb(ctx, keeper, sources, None)
    if cfg.mode in ("followup", "offline"):
        await _followup(ctx, keeper, sources, None)
    extra = 0
    while len(keeper.kept) < cfg.min_oos and extra < cfg.extra_rounds:
        extra += 1
        sampling = (cfg.extra_temperature, None if cfg.seed is None else cfg.seed + extra)
        if cfg.mode == "perturb":
            await _perturb(ctx, keeper, sources, sampling)
        else:
            await _followup(ctx, keeper, sources, sampling)
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


async def generate_offline(ctx: DocumentContext) -> DocumentRecord:
    """One document in an offline mode; an unusable document is ``skipped`` with the reason."""
    reason = unusable_reason(ctx.doc.text)
    if reason is not None:
        return ctx.record("skipped", error=reason)
    try:
        # a filter that reads the document in passages (logprob) refuses one longer than its limit
        passages = getattr(ctx.judge, "passages", None)
        if callable(passages):
            passages([ctx.doc])
        return await _run(ctx)
    except DocumentTooLongError as exc:
        return ctx.record("skipped", error=f"longer than the model's context: {exc}")
