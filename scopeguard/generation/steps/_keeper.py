"""The keeper of one document's out-of-scope candidates: each kept or dropped with its reason.

A candidate is, in turn: dropped once the document has ``max_oos`` kept; mended
(:func:`~._natural.standalone`, :func:`~._natural.centre_as_written`); dropped as a copy of a
question written or kept (:meth:`Keeper.copy_of`), or as one kept with one count changed (with the
``natural`` screen: "... in the 1970s?" after "... in the 1960s?"); dropped by the first configured
screen that finds it no usable question (:mod:`._screens`); dropped as off-topic when less than
``min_overlap`` of its content words are the document's (an unstated question's details and its
subject's words aside); and then read by the filter: kept when it finds it out of scope with P(out
of scope) at least its threshold plus ``oos_margin``, or whatever it says when the question asks a
detail the document states none of (:mod:`._absent`). Those dropped only for the margin may later
fill a short document (:meth:`Keeper.fill`).
"""

from __future__ import annotations

from dataclasses import replace

from scopeguard.generation.checkpoint import DroppedQuestion, FilterRecord, GeneratedQuestion
from scopeguard.generation.steps._absent import absent_detail
from scopeguard.generation.steps._context import DocumentContext
from scopeguard.generation.steps._copies import DETAIL_STEMS, copy_stems, overlap, synonyms_as_one
from scopeguard.generation.steps._filter import filter_question
from scopeguard.generation.steps._natural import centre_as_written, enumerations, one_count_apart, standalone
from scopeguard.generation.steps._screens import Candidate, DocumentView, Screen, first_reason

__all__ = ["Keeper", "margin_floor"]


def margin_floor(ctx: DocumentContext) -> float:
    """The P(out of scope) a kept out-of-scope question needs: the judge's threshold plus
    ``oos_margin`` (at most 0.999). An in-scope candidate found out of scope below it is doubted only
    within the margin."""
    return min(float(getattr(ctx.judge, "threshold", 0.5)) + ctx.cfg.oos_margin, 0.999)


class Keeper:
    """Judges one document's out-of-scope candidates and collects the kept and the dropped ones."""

    def __init__(self, ctx: DocumentContext, view: DocumentView, screens: tuple[Screen, ...]) -> None:
        self.ctx, self.view, self.screens = ctx, view, screens
        self.kept: list[GeneratedQuestion] = []
        self.dropped: list[DroppedQuestion] = []
        self.kept_stems: set[frozenset[str]] = set()
        # each kept question's words as copy_of compares them: (the detail asked, the thing asked of)
        self._kept_parts: list[tuple[frozenset[str], frozenset[str]]] = []
        # dropped only for the margin: (P(out of scope), the record, its reply, its overlap, its
        # content words)
        self.within: list[tuple[float, DroppedQuestion, str, float, frozenset[str]]] = []
        self.min_score = margin_floor(ctx)
        # the natural screen also drops enumerations: in one reply (series) and across replies
        self._natural_screen = "natural" in ctx.cfg.screens
        # the unstated questions written so far, each once, in order (shown to sampled top-up rounds)
        self.asked: list[str] = []

    def _drop(self, candidate: Candidate, reason: str, filt: FilterRecord | None = None) -> None:
        self.dropped.append(
            DroppedQuestion(
                question=candidate.question,
                claim_index=None,
                reason=reason,
                filter=filt,
                edit_kind=candidate.kind,
                source_question=candidate.source,
            )
        )

    def series(self, questions: list[str], kind: str) -> list[str]:
        """``questions`` (one reply's) without an enumeration among them, which is dropped (with the
        ``natural`` screen)."""
        listed = enumerations(questions) if self._natural_screen else set()
        for i in sorted(listed):
            reason = "not a usable question: an enumeration (a question of its reply with one count changed)"
            self._drop(Candidate(questions[i], kind), reason)
        return [q for i, q in enumerate(questions) if i not in listed]

    async def consider(self, step: str, candidate: Candidate, reply_id: str) -> None:
        """Keep or drop one candidate of ``step`` (see the module docstring)."""
        cfg = self.ctx.cfg
        if self.full:
            self._drop(candidate, f"the document has its {cfg.max_oos} out-of-scope questions (max_oos)")
            return
        candidate = replace(
            candidate, question=centre_as_written(standalone(candidate.question), self.view.text)
        )
        question, unstated = candidate.question, candidate.kind == "unstated"
        if unstated and question not in self.asked:
            self.asked.append(question)
        if not self.ctx.unique(step, [question], reply_id):
            self._drop(candidate, "a copy of a question already written")
            return
        stems = copy_stems(question)
        copy = self.copy_of(stems)
        if copy is not None:
            self._drop(candidate, f"a copy of a question already kept ({copy})")
            return
        if self._natural_screen and any(one_count_apart(q.question, question) for q in self.kept):
            # a series asked over several replies ("... occupation in the 1960s?", "... in the 1970s?")
            reason = "not a usable question: an enumeration (a question kept with one count changed)"
            self._drop(candidate, reason)
            return
        bad = first_reason(self.screens, candidate, self.view)
        if bad is not None:
            self._drop(candidate, f"not a usable question: {bad}")
            return
        # an unstated question's details ("the place", "the film": the subject's) are not held against it
        details = (DETAIL_STEMS if unstated else frozenset()) - self.view.kind_stems
        known = self.view.stems | self.view.subject_stems if unstated else self.view.stems
        share = overlap(question, known, details)
        if share < cfg.min_overlap:
            self._drop(
                candidate,
                f"off-topic: {share:.0%} of its content words are in the document (< {cfg.min_overlap:.0%})",
            )
            return
        filt = await filter_question(self.ctx, question)
        absent = absent_detail(question, self.view.text)
        doubted = filt is not None and filt.score is not None and filt.score < self.min_score
        if absent is not None and filt is not None and (filt.label != "out_of_scope" or doubted):
            # the filter found it answerable (or doubted it): the document states no such detail
            self._keep(candidate, reply_id, filt, share, stems, absent=absent)
        elif filt is not None and filt.label != "out_of_scope":
            reason = "filter: answerable from the document" if filt.label == "in_scope" else "filter: unknown"
            self._drop(candidate, reason, filt)
        elif filt is not None and filt.score is not None and filt.score < self.min_score:
            reason = f"filter: out of scope within the margin (P={filt.score:.2f} < {self.min_score:.2f})"
            self._drop(candidate, reason, filt)
            self.within.append((filt.score, self.dropped[-1], reply_id, share, stems))
        else:
            self._keep(candidate, reply_id, filt, share, stems)

    @property
    def full(self) -> bool:
        """Whether the document has its ``max_oos`` out-of-scope questions: no more are kept."""
        cap = self.ctx.cfg.max_oos
        return cap is not None and len(self.kept) >= cap

    def _keep(
        self,
        candidate: Candidate,
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
            self.ctx.question(
                candidate.question,
                "out_of_scope",
                len(self.kept),
                reply_id,
                filt,
                edit_kind=candidate.kind,
                source_question=candidate.source,
                overlap=round(share, 4),
                filled=filled,
                absent_detail=absent,
            )
        )

    def copy_of(self, stems: frozenset[str]) -> str | None:
        """How a question with content words ``stems`` (:func:`~._copies.copy_stems`) copies one
        kept, or ``None``: the same content words, or the same detail of the same thing. The words
        of one not in the document (the detail asked for) are among the other's, and so are its
        words in the document (the thing asked about), a detail's synonyms read as one word: "What
        is the price of Roku?" after "What is the price of the Roku 3?"; not "Where can I buy the
        Roku 3?" (another detail) or "What is the price of the palm support?" after "... of this
        keyboard?" (another thing).
        """
        if stems in self.kept_stems:
            return "the same content words"
        asked, about = self._parts(stems)
        for o_asked, o_about in self._kept_parts:
            if bool(asked) != bool(o_asked):
                continue
            if (asked <= o_asked or o_asked <= asked) and (about <= o_about or o_about <= about):
                return "the same detail of the same thing"
        return None

    def _parts(self, stems: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
        """A question's content words ``stems`` not in the document (the detail it asks for) and in
        it (the thing it asks about), as :meth:`copy_of` compares them."""
        words = synonyms_as_one(stems)
        return words - self.view.copy_words, words & self.view.copy_words

    def fill(self, minimum: int) -> int:
        """Keep candidates dropped only for the margin, most confident first, until ``minimum`` are
        kept, passing over a copy of one kept (:meth:`copy_of`). Returns how many were kept so."""
        added = 0
        for _, dropped, reply_id, share, stems in sorted(self.within, key=lambda w: -w[0]):
            if len(self.kept) >= minimum:
                break
            if self.copy_of(stems) is not None:
                continue
            self.dropped = [d for d in self.dropped if d is not dropped]
            candidate = Candidate(dropped.question, dropped.edit_kind or "", dropped.source_question)
            self._keep(candidate, reply_id, dropped.filter, share, stems, filled=True)
            added += 1
        return added
