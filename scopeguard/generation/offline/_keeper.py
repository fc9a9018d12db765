"""The keeper of one document's out-of-scope candidates: each kept or dropped with its reason.

The writer hands the keeper one reply's candidates at a time (:meth:`Keeper.take`); an
enumeration among them is dropped (with the ``natural`` screen). A candidate is, in turn: dropped
once the document has ``max_oos`` kept; read once (:func:`~._screens.screen`: mended, screened, its
absent detail; then its content words, :class:`_Read`); held to the rules in their order
(:meth:`Keeper._rules`): dropped as a copy of a question written or kept (:meth:`Keeper.copy_of`),
as one kept with one count changed (with the ``natural`` screen: "... in the 1970s?" after "...
in the 1960s?"), for the first configured screen's reason (:mod:`._screens`), as off-topic when
less than ``min_overlap`` of its content words are the document's (an unstated question's details
and its subject's words aside); and then read by the filter: kept when it finds it out of scope
with P(out of scope) at least its threshold plus ``oos_margin``, or whatever it says when the
question asks a detail the document states none of (:mod:`._absent`). Those dropped only for the
margin may later fill a short document (:meth:`Keeper.fill`).

The keeper holds its own rules: the words of a question as the copy rule and the overlap rule read
them (:func:`copy_stems`, :func:`synonyms_as_one`, :func:`overlap`: "How much does it cost?" after
"What is the price?" is a copy) and an enumeration (:func:`one_count_apart`, :func:`enumerations`).
It reads its document's run through a narrow :class:`Desk` (the filter, the questions written so
far, the record of a kept question) and its settings through :class:`KeeperRules`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Literal, Protocol

from scopeguard.detection.read.text import content_stems, stem
from scopeguard.generation.checkpoint import DroppedQuestion, FilterRecord, GeneratedQuestion
from scopeguard.generation.config import GenerationConfig
from scopeguard.generation.offline._screens import Candidate, DocumentView, Screen, Screened, screen
from scopeguard.generation.offline._vocabulary import COUNT_WORDS, DETAIL_SYNONYM_WORDS, DETAIL_WORDS

__all__ = [
    "DETAIL_STEMS",
    "DETAIL_SYNONYMS",
    "Desk",
    "Keeper",
    "KeeperRules",
    "copy_stems",
    "enumerations",
    "margin_floor",
    "one_count_apart",
    "overlap",
    "synonyms_as_one",
]

# the details an unstated question asks for (DETAIL_WORDS), as stems: not held against it by the
# overlap rule (overlap's ``skip``; the keeper's)
DETAIL_STEMS = frozenset(content_stems(DETAIL_WORDS))

# each synonym of a detail (DETAIL_SYNONYM_WORDS) as a stem -> its first word's stem, read as one
# by the copy rule (:func:`synonyms_as_one`)
DETAIL_SYNONYMS = {
    stem(word): stem(canon)
    for canon, words in DETAIL_SYNONYM_WORDS.items()
    for word in words.split()
    if stem(word) != stem(canon)
}


def _one_form(stem_: str) -> str:
    # the light stemmer cuts "-es" and makes "-ies" "-y" but leaves "-e" and "-ie": "drives" -> "driv"
    # and "drive" -> "drive", "movies" -> "movy" and "movie" -> "movie" (without this, "What is the
    # price of Seagate drives?" would be kept beside "... of this drive?")
    stem_ = stem_[:-1] if stem_.endswith("e") else stem_
    return stem_[:-1] + "i" if stem_.endswith("y") else stem_


# agent nouns the stemmer reads as their verb ("publisher" as "published", which the copy rule reads as
# "released"): "What was the publisher of The Road?" and "When was The Road published?" ask two
# details (read as one word, the publisher question is dropped as a copy of the year question and
# a short book review loses an out-of-scope question)
_AGENT_NOUNS = re.compile(r"\b(publisher|founder|owner)s?\b", re.IGNORECASE)


def copy_stems(question: str) -> frozenset[str]:
    """``question``'s content words (stems) as the copy rule compares them: an agent noun
    ("publisher", "founder", "owner") is a word of its own, not its verb's stem."""
    agents = {f"{m[1].lower()}:who" for m in _AGENT_NOUNS.finditer(question)}
    return frozenset(content_stems(_AGENT_NOUNS.sub(" ", question))) | agents


def synonyms_as_one(stems: frozenset[str]) -> frozenset[str]:
    """``stems`` with each synonym of a detail (:data:`DETAIL_SYNONYMS`) read as its first word, and
    a word's forms the stemmer leaves apart ("drive", "drives") as one."""
    return frozenset(_one_form(DETAIL_SYNONYMS.get(s, s)) for s in stems)


def overlap(question: str, document_stems: AbstractSet[str], skip: AbstractSet[str] = frozenset()) -> float:
    """The share of ``question``'s content words (stems) that occur in the document, not counting
    those in ``skip`` (the details a question is meant to ask for) unless it has no other."""
    stems = content_stems(question)
    rest = [s for s in stems if s not in skip] or stems
    return sum(s in document_stems for s in rest) / len(rest) if rest else 0.0


def _count_word(word: str) -> bool:
    # a number, an ordinal ("4th") or a decade ("1960s")
    return word in COUNT_WORDS or bool(re.fullmatch(r"\d+(?:st|nd|rd|th|s)?", word))


def one_count_apart(first: str, second: str) -> bool:
    """Whether two questions are the same but for one count, ordinal or decade ("... in the
    1960s?", "... in the 1970s?")."""
    a, b = first.lower().rstrip("?").split(), second.lower().rstrip("?").split()
    if len(a) != len(b):
        return False
    differ = [(x, y) for x, y in zip(a, b, strict=True) if x != y]
    return len(differ) == 1 and _count_word(differ[0][0]) and _count_word(differ[0][1])


def enumerations(questions: list[str]) -> set[int]:
    """Which of one reply's ``questions`` are an enumeration: the same question again with one
    count or ordinal changed ("What was the person's second / third / fourth thought about the
    book?", written after a review that gives its "first thought"). All of such a series are
    listed: none of them is a question a person would send."""
    found: set[int] = set()
    for i, j in itertools.combinations(range(len(questions)), 2):
        if one_count_apart(questions[i], questions[j]):
            found |= {i, j}
    return found


def margin_floor(judge: object, oos_margin: float) -> float:
    """The P(out of scope) a kept out-of-scope question needs: the ``judge``'s threshold (0.5 for a
    judge without one) plus ``oos_margin`` (at most 0.999). An in-scope candidate found out of scope
    below it is doubted only within the margin."""
    return min(float(getattr(judge, "threshold", 0.5)) + oos_margin, 0.999)


@dataclass(frozen=True)
class KeeperRules:
    """The settings the keeper reads: the cap on kept questions, the overlap it needs, the floor
    of the filter's P(out of scope) (:func:`margin_floor`) and whether enumerations are dropped
    (the ``natural`` screen)."""

    max_oos: int | None
    min_overlap: float
    min_score: float
    enumerations: bool

    @classmethod
    def of(cls, cfg: GenerationConfig, judge: object) -> KeeperRules:
        """The rules of ``cfg`` with the filter ``judge``."""
        return cls(
            max_oos=cfg.max_oos,
            min_overlap=cfg.min_overlap,
            min_score=margin_floor(judge, cfg.oos_margin),
            enumerations="natural" in cfg.screens,
        )


class Desk(Protocol):
    """What a keeper (this one and the in-scope one, :mod:`._in_scope`) asks of its document's run (a
    :class:`~scopeguard.generation._context.DocumentContext` is one)."""

    def unique(self, step: str, questions: list[str], reply_id: str) -> list[str]:
        """``questions`` without a question the document already has."""
        ...

    async def filter_question(self, question: str) -> FilterRecord | None:
        """The filter's verdict on ``question`` (``None``: the filter is off)."""
        ...

    def question(
        self,
        question: str,
        label: Literal["in_scope", "out_of_scope"],
        index: int,
        reply_id: str,
        filt: FilterRecord | None = None,
        *,
        ids: Mapping[str, tuple[str, ...]] | None = None,
        **provenance: object,
    ) -> GeneratedQuestion:
        """The record of a kept question, the ``index``-th of its label, written in reply ``reply_id``
        and read by the filter as ``filt``, with its provenance (``edit_kind``, ``overlap``, ...)."""
        ...


@dataclass(frozen=True)
class _Read:
    """A candidate as the keeper reads it, once: mended and screened (:func:`~._screens.screen`), with
    the reply it came in, its content words as the copy rule reads them (:func:`copy_stems`) and the
    share of them that are the document's (:func:`overlap`)."""

    screened: Screened
    reply_id: str
    stems: frozenset[str]
    share: float

    @property
    def candidate(self) -> Candidate:
        return self.screened.candidate


class Keeper:
    """Judges one document's out-of-scope candidates and collects the kept and the dropped ones."""

    def __init__(
        self, desk: Desk, rules: KeeperRules, view: DocumentView, screens: tuple[Screen, ...]
    ) -> None:
        self.desk, self.rules, self.view, self.screens = desk, rules, view, screens
        self.kept: list[GeneratedQuestion] = []
        # the document's content words as the copy rule reads them (a detail's synonyms as one word)
        self._copy_words = synonyms_as_one(view.stems)
        self.dropped: list[DroppedQuestion] = []
        self.kept_stems: set[frozenset[str]] = set()
        # each kept question's words as copy_of compares them: (the detail asked, the thing asked of)
        self._kept_parts: list[tuple[frozenset[str], frozenset[str]]] = []
        # dropped only for the margin: (P(out of scope), the record, the candidate as read)
        self.within: list[tuple[float, DroppedQuestion, _Read]] = []
        self.min_score = rules.min_score
        # the natural screen also drops enumerations: in one reply (series) and across replies
        self._natural_screen = rules.enumerations
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

    async def take(
        self, step: str, candidates: list[Candidate], reply_id: str, *, series: bool = True
    ) -> None:
        """One reply's ``candidates`` of ``step``: with ``series`` (one reply's list of questions), an
        enumeration among them is dropped (with the ``natural`` screen); each other one is
        considered in turn (:meth:`consider`)."""
        listed = enumerations([c.question for c in candidates]) if series and self._natural_screen else set()
        for i in sorted(listed):
            reason = "not a usable question: an enumeration (a question of its reply with one count changed)"
            self._drop(candidates[i], reason)
        for candidate in (c for i, c in enumerate(candidates) if i not in listed):
            await self.consider(step, candidate, reply_id)

    async def consider(self, step: str, candidate: Candidate, reply_id: str) -> None:
        """Keep or drop one candidate of ``step`` (see the module docstring): mended, read once
        (:class:`_Read`), held to the rules in their order (:meth:`_rules`), then to the filter."""
        if self.full:
            self._drop(
                candidate, f"the document has its {self.rules.max_oos} out-of-scope questions (max_oos)"
            )
            return
        screened = screen(candidate, self.view, self.screens)
        candidate = screened.candidate
        question, unstated = candidate.question, candidate.kind == "unstated"
        if unstated and question not in self.asked:
            self.asked.append(question)
        # an unstated question's details ("the place", "the film": the subject's) are not held against it
        details = (DETAIL_STEMS if unstated else frozenset()) - self.view.kind_stems
        known = self.view.stems | self.view.subject_stems if unstated else self.view.stems
        read = _Read(screened, reply_id, copy_stems(question), overlap(question, known, details))
        for rule in self._rules():
            reason = rule(step, read)
            if reason is not None:
                self._drop(candidate, reason)
                return
        filt = await self.desk.filter_question(question)
        doubted = filt is not None and filt.score is not None and filt.score < self.min_score
        absent = screened.absent
        if absent is not None and filt is not None and (filt.label != "out_of_scope" or doubted):
            # the filter found it answerable (or doubted it): the document states no such detail
            self._keep(read, filt, absent=absent)
        elif filt is not None and filt.label != "out_of_scope":
            reason = "filter: answerable from the document" if filt.label == "in_scope" else "filter: unknown"
            self._drop(candidate, reason, filt)
        elif filt is not None and filt.score is not None and filt.score < self.min_score:
            reason = f"filter: out of scope within the margin (P={filt.score:.2f} < {self.min_score:.2f})"
            self._drop(candidate, reason, filt)
            self.within.append((filt.score, self.dropped[-1], read))
        else:
            self._keep(read, filt)

    def _rules(self) -> tuple[Callable[[str, _Read], str | None], ...]:
        """The rules a candidate is held to before the filter, in order; each says why it drops one."""
        return (self._written, self._kept_copy, self._kept_series, self._screened, self._off_topic)

    def _written(self, step: str, read: _Read) -> str | None:
        if not self.desk.unique(step, [read.candidate.question], read.reply_id):
            return "a copy of a question already written"
        return None

    def _kept_copy(self, step: str, read: _Read) -> str | None:
        copy = self.copy_of(read.stems)
        return None if copy is None else f"a copy of a question already kept ({copy})"

    def _kept_series(self, step: str, read: _Read) -> str | None:
        # a series asked over several replies ("... occupation in the 1960s?", "... in the 1970s?")
        question = read.candidate.question
        if self._natural_screen and any(one_count_apart(q.question, question) for q in self.kept):
            return "not a usable question: an enumeration (a question kept with one count changed)"
        return None

    def _screened(self, step: str, read: _Read) -> str | None:
        bad = read.screened.unusable
        return None if bad is None else f"not a usable question: {bad}"

    def _off_topic(self, step: str, read: _Read) -> str | None:
        floor = self.rules.min_overlap
        if read.share < floor:
            return f"off-topic: {read.share:.0%} of its content words are in the document (< {floor:.0%})"
        return None

    @property
    def full(self) -> bool:
        """Whether the document has its ``max_oos`` out-of-scope questions: no more are kept."""
        cap = self.rules.max_oos
        return cap is not None and len(self.kept) >= cap

    def _keep(
        self, read: _Read, filt: FilterRecord | None, filled: bool | None = None, absent: str | None = None
    ) -> None:
        candidate = read.candidate
        self.kept_stems.add(read.stems)
        self._kept_parts.append(self._parts(read.stems))
        self.kept.append(
            self.desk.question(
                candidate.question,
                "out_of_scope",
                len(self.kept),
                read.reply_id,
                filt,
                edit_kind=candidate.kind,
                source_question=candidate.source,
                overlap=round(read.share, 4),
                filled=filled,
                absent_detail=absent,
            )
        )

    def copy_of(self, stems: frozenset[str]) -> str | None:
        """How a question with content words ``stems`` (:func:`copy_stems`) copies one
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
        return words - self._copy_words, words & self._copy_words

    def fill(self, minimum: int) -> int:
        """Keep candidates dropped only for the margin, most confident first, until ``minimum`` are
        kept, passing over a copy of one kept (:meth:`copy_of`). Returns how many were kept so."""
        added = 0
        for _, dropped, read in sorted(self.within, key=lambda w: -w[0]):
            if len(self.kept) >= minimum:
                break
            if self.copy_of(read.stems) is not None:
                continue
            self.dropped = [d for d in self.dropped if d is not dropped]
            self._keep(read, dropped.filter, filled=True)
            added += 1
        return added
