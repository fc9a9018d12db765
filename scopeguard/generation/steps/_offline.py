"""The offline modes for one document: questions small local models can write, kept by a detector.

Algorithm 1 asks a model to invent facts and write questions about them; models of 0.1-1.5B
parameters copy the document instead (issue #28). The offline modes ask them for what they can do,
every reply held to a JSON schema (:mod:`._offline_replies`):

1. in-scope candidates: one question for each of the ``n_in_scope + 2`` sentences of the document
   with the most names and numbers, then up to ``more_in_scope`` more while fewer than
   ``n_in_scope`` are kept (the sentence alone is shown: shown the whole document, a small model
   asks the same generic question again and again; a stop glued to the next sentence, "it.For",
   ends one), kept when they are about that
   sentence (not about "the sentence" itself, and sharing a content word with it; with
   ``writer_screen`` not asking "the name of the person", a review's unnamed writer) and the filter
   finds them answerable (``edit_kind="direct"``, the sentence as ``true_claim``);
2. ``unstated`` (and ``offline``): for each of the first ``n_in_scope + 2`` sentences,
   ``unstated_per_sentence`` questions about what it leaves unsaid (a price, a date, a reason), the
   sentence shown; with ``unstated_subject``, the model first names what the document is about
   (one call) and the questions are about that (asked about whatever a sentence names, it asked the
   price of a square or of a cookie's vanilla flavour), sharing a word with the sentence or, with
   ``subject_moored``, the subject (with ``kind_words_count`` also what its kind is called: "the
   film" of a film review); with ``unstated_hints`` it also names the subject's kind, and
   the details the prompt hints at fit it (a product: its price, its maker);
3. ``followup`` (and ``offline``): follow-up questions a reader would ask next, written from the
   in-scope questions alone (about the same people and events, often on what the document leaves out);
   in ``offline`` mode, with ``followups_to_top_up``, only for a document the unstated questions
   leave short of ``min_oos`` (written without the document, they misread it more often), and with
   ``followups_after_top_ups`` only once its sampled unstated rounds and the margin's candidates
   (``fill_from_margin``) have left it short;
4. ``perturb`` (alone): each of the first ``perturb_sources`` kept questions rewritten once per
   edit kind, SQuAD 2.0's kinds (Rajpurkar et al., 2018): the rewrite keeps the question's words
   and asks for something else, the document not shown. Read by hand, the packaged 1.5B's rewrites
   were rarely a question a person would send, so ``offline`` leaves them out (issue #39);
5. every out-of-scope candidate is kept only when it is a usable question (not degenerate, and,
   with ``natural_screen``, nothing :func:`~._natural.unnatural` finds: a prompt example's phrase,
   a question to the document's writer, two questions in one, one of a reply's enumeration: "the
   person's second / third / fourth thought"; with ``writer_screen``, nothing about the writer named
   as "the person" or "the speaker"; with ``one_thing_screen``, no unstated question about two
   things joined by "and"; with ``other_thing_screen``, no unstated question about another thing
   the document names than its subject; with ``odd_details_screen``, none asking when it "is
   available" or "opens"; with ``about_subject_screen``, none sharing no word with the subject
   nor calling it "it"), at least ``min_overlap`` of its
   content words occur in the document (it is confusing, not off-topic; with
   ``overlap_skips_details`` an unstated question's details, a price or an address, do not count)
   and the filter finds it out
   of scope with P(out of scope) at least its threshold plus ``oos_margin``; the rest are recorded
   as dropped, with the reason.

A document short of ``min_oos`` kept questions gets up to ``extra_rounds`` sampled rounds (at
``extra_temperature``) of its mode's source of candidates (``unstated`` for ``offline``, each round
on the next sentences not asked yet with ``top_up_new_sentences``). A candidate with the content
words of one kept is a copy, and with ``copies_by_detail`` so is one asking the same detail of the
same thing ("What is the price of Roku?" after "... of the Roku 3?"). With ``fill_from_margin``, a
document still short of ``min_oos`` then keeps the out-of-scope candidates dropped only for the
margin, most confident first (none a copy of one kept), and one short of ``n_in_scope`` in-scope
questions keeps the in-scope candidates the filter doubted within the margin, least doubted first;
each is marked ``filled``. A document keeps at most ``max_oos`` out-of-scope questions, the first
kept: later candidates are dropped with the reason, and no more sentences are asked about.
"""

from __future__ import annotations

import hashlib
import re
from typing import Literal

from scopeguard._sentences import split_run_on, split_sentences
from scopeguard.detection.read.text import content_stem_set, content_stems
from scopeguard.errors import DocumentTooLongError
from scopeguard.generation.cache import CachedReply
from scopeguard.generation.checkpoint import DocumentRecord, DroppedQuestion, FilterRecord, GeneratedQuestion
from scopeguard.generation.steps._absent import ABSENT_KINDS, absent_detail
from scopeguard.generation.steps._context import DocumentContext, Sampling, words
from scopeguard.generation.steps._filter import filter_question
from scopeguard.generation.steps._natural import (
    DETAIL_STEMS,
    KIND_SUBJECTS,
    KIND_WORDS,
    about_writer,
    asks_writer_name,
    centre_as_written,
    copy_stems,
    degenerate,
    enumerations,
    named_late,
    not_about,
    odd_detail,
    other_thing,
    overlap,
    standalone,
    subject_as_written,
    subject_in_document,
    synonyms_as_one,
    two_things,
    unmoored,
    unnatural,
    with_article,
)
from scopeguard.generation.steps._offline_replies import (
    MAX_TOKENS_PER_QUESTION,
    SUBJECT_KIND_TOKENS,
    SUBJECT_KINDS,
    SUBJECT_TOKENS,
    edits_schema,
    parse_edits,
    parse_questions,
    parse_subject,
    questions_schema,
    subject_schema,
)
from scopeguard.generation.steps._offline_screen import MAX_SENTENCE_WORDS, unusable_reason

__all__ = ["example_index", "generate_offline", "informative_sentences"]

_SPARE_IN_SCOPE = 2  # in-scope candidates asked beyond n_in_scope (the filter drops some)
_SENTENCE_WORDS = (8, MAX_SENTENCE_WORDS)
_NAME_OR_NUMBER = re.compile(r"\b[A-Z][a-z]+|\d+")
_SUBJECT_CHARS = 1500  # of the document shown to name its subject (it is named early)
_ASKED_SHOWN = 8  # the questions already asked that a sampled top-up round is shown (top_up_shows_asked)


def _margin_floor(ctx: DocumentContext) -> float:
    """The P(out of scope) a kept out-of-scope question needs: the judge's threshold plus
    ``oos_margin`` (at most 0.999). An in-scope candidate found out of scope below it is doubted only
    within the margin (``fill_from_margin``)."""
    return min(float(getattr(ctx.judge, "threshold", 0.5)) + ctx.cfg.oos_margin, 0.999)


def _absent(ctx: DocumentContext, question: str) -> str | None:
    """The kind of detail ``question`` asks for that the document states none of, with
    ``absent_details`` (where to buy it only with ``absent_stores``, who wrote it only with
    ``absent_authors``), or ``None``."""
    cfg = ctx.cfg
    if not cfg.absent_details:
        return None
    off = {"store": not cfg.absent_stores, "author": not cfg.absent_authors}
    return absent_detail(question, ctx.doc.text, tuple(k for k in ABSENT_KINDS if not off.get(k, False)))


class _Keeper:
    """Judges out-of-scope candidates and collects the kept and the dropped ones."""

    def __init__(self, ctx: DocumentContext) -> None:
        self.ctx = ctx
        self.stems = content_stem_set(ctx.doc.text)
        self.kept: list[GeneratedQuestion] = []
        self.dropped: list[DroppedQuestion] = []
        self.kept_stems: set[frozenset[str]] = set()
        # copies_by_detail: the document's content words and each kept question's, read as
        # _copy reads them (a detail's synonyms as one word with detail_synonyms), computed once
        self._one = synonyms_as_one if ctx.cfg.detail_synonyms else frozenset
        self._document = self._one(frozenset(self.stems))
        self._kept_parts: list[tuple[frozenset[str], frozenset[str]]] = []
        # dropped only for the margin: (P(out of scope), the record, its reply, its overlap, its
        # content words)
        self.within: list[tuple[float, DroppedQuestion, str, float, frozenset[str]]] = []
        self.min_score = _margin_floor(ctx)
        # the words of the document's subject as the model named it, counted as the document's by
        # the overlap rule for unstated questions (overlap_counts_subject; set once it is named)
        self.subject_stems: frozenset[str] = frozenset()
        # the unstated questions written so far, each once, in order (shown to the sampled top-up
        # rounds with top_up_shows_asked)
        self.asked: list[str] = []
        # the subject other_thing_screen tells another thing from: the model's, not a kind's name
        # ("the product", subject_in_document), which names nothing to tell it by (set once named)
        self.subject = ""
        # what the subject's kind is called ("film", "movie"), counted as the subject's words, not as
        # details asked for (kind_words_count; set once it is named)
        self.kind_stems: frozenset[str] = frozenset()
        # the subject as asked about (a kind's name too: "the product") and its kind, which an
        # unstated question must be about (about_subject_screen; set once it is named)
        self.about: tuple[str, str] = ("", "")

    def name_subject(self, subject: str, kind: str) -> None:
        """Set what the screens and the overlap rule read of the document's ``subject`` (of ``kind``),
        once it is named: each derived here, in one place."""
        cfg = self.ctx.cfg
        if subject and cfg.kind_words_count:
            self.kind_stems = frozenset(content_stems(KIND_WORDS.get(kind, "")))
        if cfg.overlap_counts_subject:
            self.subject_stems = frozenset(content_stems(subject)) | self.kind_stems
        self.subject = "" if subject in KIND_SUBJECTS.values() else subject
        self.about = (subject, kind)

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

    def series(self, questions: list[str], kind: str) -> list[str]:
        """``questions`` (one reply's) without an enumeration among them, which is dropped (with
        ``natural_screen``)."""
        listed = enumerations(questions) if self.ctx.cfg.natural_screen else set()
        for i in sorted(listed):
            self._drop(
                questions[i],
                "not a usable question: an enumeration (a question of its reply with one count changed)",
                kind,
                None,
                None,
            )
        return [q for i, q in enumerate(questions) if i not in listed]

    async def consider(
        self,
        step: str,
        question: str,
        kind: str,
        source: str | None,
        reply_id: str,
        sentence: str | None = None,
    ) -> None:
        """Keep or drop one candidate (``source``: the question it was rewritten from; ``sentence``:
        the text it must share a content word with: the sentence it was written from, and with
        ``subject_moored`` the document's subject)."""
        ctx = self.ctx
        if self.full:
            self._drop(
                question,
                f"the document has its {ctx.cfg.max_oos} out-of-scope questions (max_oos)",
                kind,
                source,
                None,
            )
            return
        question = standalone(question)
        if ctx.cfg.centre_as_written:
            question = centre_as_written(question, ctx.doc.text)
        if kind == "unstated" and question not in self.asked:
            self.asked.append(question)
        if not ctx.unique(step, [question], reply_id):
            self._drop(question, "a copy of a question already written", kind, source, None)
            return
        stems = copy_stems(question) if ctx.cfg.agent_nouns_apart else frozenset(content_stems(question))
        copy = self._copy(stems)
        if copy is not None:
            self._drop(question, f"a copy of a question already kept ({copy})", kind, source, None)
            return
        bad = degenerate(question) or (unmoored(question, sentence) if sentence else None)
        if bad is None and ctx.cfg.natural_screen:
            bad = unnatural(question, f"{ctx.doc.text}\n{source or ''}")
        if bad is None and ctx.cfg.writer_screen:
            bad = about_writer(question)
        if bad is None and kind == "unstated" and ctx.cfg.one_thing_screen:
            bad = two_things(question, ctx.doc.text)
        if bad is None and kind == "unstated" and ctx.cfg.other_thing_screen and self.subject:
            bad = other_thing(question, self.subject, ctx.doc.text)
        if bad is None and kind == "unstated" and ctx.cfg.odd_details_screen:
            bad = odd_detail(question)
        if bad is None and kind == "unstated" and ctx.cfg.about_subject_screen:
            bad = not_about(question, *self.about)
        if bad is not None:
            self._drop(question, f"not a usable question: {bad}", kind, source, None)
            return
        details = DETAIL_STEMS if kind == "unstated" and ctx.cfg.overlap_skips_details else frozenset()
        details -= self.kind_stems  # "the place", "the film": the subject, not a detail asked for
        known = self.stems | self.subject_stems if kind == "unstated" else self.stems
        share = overlap(question, known, details)
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
        absent = _absent(ctx, question)
        if (
            absent is not None
            and filt is not None
            and (filt.label != "out_of_scope" or (filt.score is not None and filt.score < self.min_score))
        ):
            # the filter found it answerable (or doubted it): the document states no such detail
            self._keep(question, kind, source, reply_id, filt, share, stems, absent=absent)
            return
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
            self.within.append((filt.score, self.dropped[-1], reply_id, share, stems))
            return
        self._keep(question, kind, source, reply_id, filt, share, stems)

    @property
    def full(self) -> bool:
        """Whether the document has its ``max_oos`` out-of-scope questions: no more are kept."""
        cap = self.ctx.cfg.max_oos
        return cap is not None and len(self.kept) >= cap

    def _keep(
        self,
        question: str,
        kind: str,
        source: str | None,
        reply_id: str,
        filt: FilterRecord | None,
        share: float,
        stems: frozenset[str],
        filled: bool | None = None,
        absent: str | None = None,
    ) -> None:
        self.kept_stems.add(stems)
        self._kept_parts.append(self._parts(stems))
        self.kept.append(
            _generated(
                self.ctx,
                question,
                "out_of_scope",
                len(self.kept),
                reply_id,
                filt,
                edit_kind=kind,
                source_question=source,
                overlap=round(share, 4),
                filled=filled,
                absent_detail=absent,
            )
        )

    def _copy(self, stems: frozenset[str]) -> str | None:
        """How a question with content words ``stems`` copies one kept, or ``None``.

        The same content words ("What is the price of Roku 3?" after "... of the Roku 3?"); with
        ``copies_by_detail``, also the same detail of the same thing: the words of one not in the
        document (the detail asked for) are among the other's, and so are its words in the
        document (the thing asked about): "What is the price of Roku?" after "What is the price of
        the Roku 3?", "Who is the director of the movie?" after "What is the name of the director of
        the movie?"; not "Where can I buy the Roku 3?" (another detail) or "What is the price of the
        palm support?" after "... of this keyboard?" (another thing). With ``detail_synonyms`` a
        detail's synonyms are one word ("cost" and "price", "centre" and "center":
        :func:`~scopeguard.generation.steps._natural.synonyms_as_one`).
        """
        if stems in self.kept_stems:
            return "the same content words"
        if not self.ctx.cfg.copies_by_detail:
            return None
        asked, about = self._parts(stems)
        for o_asked, o_about in self._kept_parts:
            if bool(asked) != bool(o_asked):
                continue
            if (asked <= o_asked or o_asked <= asked) and (about <= o_about or o_about <= about):
                return "the same detail of the same thing"
        return None

    def _parts(self, stems: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
        """A question's content words ``stems`` not in the document (the detail it asks for) and in
        it (the thing it asks about), as :meth:`_copy` compares them."""
        words = self._one(stems)
        return words - self._document, words & self._document

    def fill(self, minimum: int) -> int:
        """Keep candidates dropped only for the margin, most confident first, until ``minimum`` are
        kept, passing over a copy of one kept (:meth:`_copy`). Returns how many were kept so."""
        added = 0
        for _, dropped, reply_id, share, stems in sorted(self.within, key=lambda w: -w[0]):
            if len(self.kept) >= minimum:
                break
            if self._copy(stems) is not None:
                continue
            self.dropped = [d for d in self.dropped if d is not dropped]
            self._keep(
                dropped.question,
                dropped.edit_kind or "",
                dropped.source_question,
                reply_id,
                dropped.filter,
                share,
                stems,
                filled=True,
            )
            added += 1
        return added


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


async def _ask_questions(
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


def example_index(source: str) -> int:
    """Which worked example the perturbation prompt shows for ``source`` (varied, reproducible)."""
    return int(hashlib.sha256(source.encode("utf-8")).hexdigest()[:8], 16)


def _sentences(text: str, split_long: bool) -> list[str]:
    """The sentences of ``text`` of 8 to 45 words; with ``split_long``, a longer one is cut into its
    clauses (:func:`~scopeguard._sentences.split_run_on`) and those of 8 to 45 words count as
    sentences (issue #39: on half O, two reviews run together so had 3 usable sentences and kept 2
    in-scope questions; on half P one written without capitals had one)."""
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
    ``split_long`` also the pieces of a longer one, :func:`_sentences`) after the ``skip`` with the
    most, in order."""
    sentences = _sentences(text, split_long)
    ranked = sorted(range(len(sentences)), key=lambda i: -len(_NAME_OR_NUMBER.findall(sentences[i][1:])))
    return [sentences[i] for i in sorted(ranked[skip : skip + k])]


async def _in_scope(ctx: DocumentContext) -> tuple[list[GeneratedQuestion], list[str], list[DroppedQuestion]]:
    """The kept in-scope questions, every usable candidate (sources if none is kept), and the dropped.

    One call per informative sentence (``n_in_scope + 2`` of them): the question it answers; while
    fewer than ``n_in_scope`` are kept, up to ``more_in_scope`` more sentences are asked.
    """
    kept: list[GeneratedQuestion] = []
    dropped: list[DroppedQuestion] = []
    candidates: list[str] = []
    n = max(ctx.cfg.n_in_scope, 1)
    ceiling = _margin_floor(ctx)
    # found out of scope within the margin: (P(out of scope), the record, its reply)
    within: list[tuple[float, DroppedQuestion, str]] = []
    split_long = ctx.cfg.split_long_sentences
    first = informative_sentences(ctx.doc.text, n + _SPARE_IN_SCOPE, split_long=split_long)
    more = informative_sentences(
        ctx.doc.text, ctx.cfg.more_in_scope, skip=n + _SPARE_IN_SCOPE, split_long=split_long
    )
    for sentence in first + more:
        if sentence in more and len(kept) >= ctx.cfg.n_in_scope:
            break
        got = await _ask_questions(
            ctx, "offline_in_scope", "gen_offline_in_scope", 1, None, sentence=sentence
        )
        if got is None:
            continue
        (question,), reply = got
        question = standalone(question)
        if not ctx.unique("offline_in_scope", [question], reply.id):
            continue
        unusable = unmoored(question, sentence) or (
            asks_writer_name(question) if ctx.cfg.writer_screen else None
        )
        reason: str | None = None
        filt = None
        absent: str | None = None
        if unusable is not None:  # never filtered, never a source to rewrite
            reason = f"not a usable question: {unusable}"
        else:
            candidates.append(question)
            filt = await filter_question(ctx, question)
            absent = _absent(ctx, question)
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
                    edit_kind="direct",
                    true_claim=sentence,
                )
            )
            score = filt.score if filt is not None and filt.label == "out_of_scope" else None
            if score is not None and score < ceiling and absent is None:
                within.append((score, dropped[-1], reply.id))
            continue
        kept.append(
            _generated(
                ctx, question, "in_scope", len(kept), reply.id, filt, edit_kind="direct", true_claim=sentence
            )
        )
    short = max(ctx.cfg.n_in_scope - len(kept), 0) if ctx.cfg.fill_from_margin else 0
    for _, record, reply_id in sorted(within, key=lambda w: w[0])[:short]:
        dropped = [d for d in dropped if d is not record]
        kept.append(
            _generated(
                ctx,
                record.question,
                "in_scope",
                len(kept),
                reply_id,
                record.filter,
                edit_kind="direct",
                true_claim=record.true_claim,
                filled=True,
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
            example=example_index(source),
        )
        if got is None:
            continue
        edits, reply = got
        for kind, question in edits.items():
            await keeper.consider("perturb", question, kind, source, reply.id)


async def _subject(ctx: DocumentContext) -> tuple[str, str]:
    """What the document is about, in a few words, and (with ``unstated_hints``) what kind of thing
    it is (:data:`SUBJECT_KINDS`); ``("", "")`` when the model names nothing usable. With
    ``subject_as_written``, a description the model capitalised is named as the document writes it
    (:func:`~._natural.subject_as_written`); with ``subject_in_document``, a subject with a word the
    document never writes is the model's guess, and its kind's name ("the product") is asked about
    instead (:func:`~._natural.subject_in_document`); with ``subject_named_late``, so is one the
    document first names late, in passing (:func:`~._natural.named_late`); with ``subject_article``,
    one named in lower case gets "the" (:func:`~._natural.with_article`)."""
    with_kind = ctx.cfg.unstated_hints
    got = await ctx.ask(
        "subject",
        "gen_document_subject",
        lambda r, lenient: parse_subject(r.text, truncated=r.truncated, lenient=lenient, with_kind=with_kind),
        max_tokens=SUBJECT_TOKENS + (SUBJECT_KIND_TOKENS if with_kind else 0),
        schema=subject_schema(with_kind),
        text=ctx.doc.text[:_SUBJECT_CHARS],
        with_kind=with_kind,
        subject_kinds=SUBJECT_KINDS,
    )
    if got is None:
        return ("", "")
    subject, kind = got[0]
    if ctx.cfg.subject_as_written:
        subject = subject_as_written(subject, ctx.doc.text)
    if ctx.cfg.subject_in_document:
        named = subject_in_document(subject, kind, ctx.doc.text)
        if named != subject:
            instead = repr(named) if named else "what each sentence names"
            ctx.note(
                "subject_in_document",
                "subject_not_in_document",
                reply_id=got[1].id,
                accepted=True,
                detail=f"{subject!r} has a word the document never writes: asked about {instead}",
            )
            subject = named
    kind_name = KIND_SUBJECTS.get(kind, "")  # "the product": what a late-named subject becomes
    models = subject not in ("", kind_name)  # the model's own name, not already the kind's
    if ctx.cfg.subject_named_late and kind_name and models and named_late(subject, kind, ctx.doc.text):
        ctx.note(
            "subject_named_late",
            "subject_named_late",
            reply_id=got[1].id,
            accepted=True,
            detail=f"{subject!r} is first named late in the document (a passing mention): asked "
            f"about {kind_name!r}",
        )
        subject = kind_name
    if ctx.cfg.subject_article:
        subject = with_article(subject)
    return subject, kind


def _unstated_sentences(ctx: DocumentContext, round_: int) -> list[str]:
    """The sentences round ``round_`` (0: the first) of unstated questions asks about: the
    ``n_in_scope + 2`` most informative; with ``top_up_new_sentences``, each sampled top-up round
    the next as many not asked yet, while any are left (the same sentences again gave the same
    questions: copies)."""
    k = max(ctx.cfg.n_in_scope, 1) + _SPARE_IN_SCOPE
    split_long = ctx.cfg.split_long_sentences
    fresh = (
        informative_sentences(ctx.doc.text, k, skip=k * round_, split_long=split_long)
        if ctx.cfg.top_up_new_sentences
        else []
    )
    return fresh or informative_sentences(ctx.doc.text, k, split_long=split_long)


async def _unstated(
    ctx: DocumentContext, keeper: _Keeper, sampling: Sampling | None, subject: str, kind: str, round_: int = 0
) -> None:
    """``unstated_per_sentence`` questions per informative sentence about what it leaves unsaid:
    about ``subject`` (what the document is about) if given, else about what the sentence names;
    the details hinted at fit ``kind`` where the template has hints for it. With ``subject_moored``
    a question about the subject is about its sentence even when it shares no word with it; with
    ``top_up_shows_asked``, a sampled top-up round (``round_`` > 0) is shown the last questions
    written and asked for other details."""
    n = ctx.cfg.unstated_per_sentence
    shown = round_ > 0 and ctx.cfg.top_up_shows_asked
    # kind_words_count: "the film" is the subject of a film review ("Who directed the film?")
    called = f"{subject}\n{KIND_WORDS.get(kind, '')}" if ctx.cfg.kind_words_count else subject
    for sentence in _unstated_sentences(ctx, round_):
        if keeper.full:  # max_oos: no more are kept, so none are asked for
            break
        # a sampled top-up round is shown what was asked already (the same few questions came back)
        asked = keeper.asked[-_ASKED_SHOWN:] if shown else []
        moor = f"{sentence}\n{called}" if subject and ctx.cfg.subject_moored else sentence
        got = await _ask_questions(
            ctx,
            "unstated",
            "gen_unstated_question",
            n,
            sampling,
            sentence=sentence,
            n=n,
            subject=subject,
            kind=kind,
            year_hint=ctx.cfg.place_year_hint,
            asked=asked,
        )
        if got is not None:
            questions, reply = got
            for question in keeper.series(questions, "unstated"):
                await keeper.consider("unstated", question, "unstated", None, reply.id, sentence=moor)


async def _followup(
    ctx: DocumentContext, keeper: _Keeper, sources: list[str], sampling: Sampling | None
) -> None:
    n = ctx.cfg.followups
    got = await _ask_questions(ctx, "followup", "gen_followup_questions", n, sampling, questions=sources, n=n)
    if got is None:
        return
    questions, reply = got
    for question in keeper.series(questions, "followup"):
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
    if cfg.mode == "perturb":
        await _perturb(ctx, keeper, sources, None)
    subject = kind = ""
    if cfg.mode in ("unstated", "offline"):
        subject, kind = await _subject(ctx) if cfg.unstated_subject else ("", "")
        keeper.name_subject(subject, kind)
        await _unstated(ctx, keeper, None, subject, kind)
    # min_oos 0 sets no target to top up to: both kinds, as before followups_to_top_up
    top_up_only = cfg.followups_to_top_up and cfg.min_oos > 0
    # followups_after_top_ups: a short document's follow-ups come last, after its sampled rounds and fill
    last = cfg.mode == "offline" and top_up_only and cfg.followups_after_top_ups
    if cfg.mode == "followup" or (
        cfg.mode == "offline" and not last and (not top_up_only or len(keeper.kept) < cfg.min_oos)
    ):
        await _followup(ctx, keeper, sources, None)
    extra = 0
    while len(keeper.kept) < cfg.min_oos and extra < cfg.extra_rounds:
        extra += 1
        sampling = (cfg.extra_temperature, None if cfg.seed is None else cfg.seed + extra)
        if cfg.mode == "perturb":
            await _perturb(ctx, keeper, sources, sampling)
        elif cfg.mode in ("unstated", "offline"):
            await _unstated(ctx, keeper, sampling, subject, kind, extra)
        else:
            await _followup(ctx, keeper, sources, sampling)
    filled = keeper.fill(cfg.min_oos) if cfg.fill_from_margin else 0
    if last and len(keeper.kept) < cfg.min_oos:
        await _followup(ctx, keeper, sources, None)
        filled += keeper.fill(cfg.min_oos) if cfg.fill_from_margin else 0
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


async def generate_offline(ctx: DocumentContext) -> DocumentRecord:
    """One document in an offline mode; an unusable document is ``skipped`` with the reason."""
    reason = unusable_reason(ctx.doc.text, split_long=ctx.cfg.split_long_sentences)
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
