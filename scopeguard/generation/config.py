"""The generator's settings: one :class:`GenerationConfig`, the single source of every default.

The CLI (``scopeguard generate``) reads its option defaults from these fields, and ``--paper``
is :meth:`GenerationConfig.paper`.

Modes: ``faithful`` and ``efficient`` are the paper's Algorithm 1 (guided hallucination);
``unstated``, ``followup``, ``offline`` (both; follow-ups only to top up, see
``followups_to_top_up``) and ``perturb`` are scopeguard's offline modes for
small local models (:mod:`scopeguard.generation.steps`); ``auto`` is resolved by the
:class:`~scopeguard.generation.pipeline.Generator`: ``offline`` with a packaged GGUF model,
``faithful`` otherwise.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "EDIT_KINDS",
    "NATURAL_EDIT_KINDS",
    "OFFLINE_MODES",
    "PAPER_IN_SCOPE",
    "PAPER_VOTES",
    "EditKind",
    "GenerationConfig",
    "Mode",
    "is_packaged_local",
]

# ELOQ section 4.4: "we adopted m=9 in our experiments" (Algorithm 2's self-consistency votes).
PAPER_VOTES = 9
# Appendix B.9 leaves {num_q} open; ELOQ-Silver has 8,949 in-scope questions over 1,955
# documents (Table 2), 4.6 per document, so the paper preset asks for 5.
PAPER_IN_SCOPE = 5


def is_packaged_local(llm: object) -> bool:
    """Whether ``llm`` (or the model it wraps, through ``.llm``) runs a packaged GGUF model in process."""
    from scopeguard.models import is_packaged_gguf

    for _ in range(8):  # wrappers: recording, rate-limited, JSON-constrained
        path = getattr(llm, "path", None)
        if path is not None:
            return bool(is_packaged_gguf(path))
        inner = getattr(llm, "llm", None)
        if inner is None or inner is llm:
            return False
        llm = inner
    return False


Mode = Literal["auto", "faithful", "efficient", "perturb", "followup", "unstated", "offline"]
OFFLINE_MODES: tuple[str, ...] = ("perturb", "followup", "unstated", "offline")
# The kinds of edit SQuAD 2.0's crowdworkers used to make answerable questions unanswerable
# (Rajpurkar et al., 2018, "Know What You Don't Know", section 3, Table 2).
EditKind = Literal[
    "negation", "antonym", "entity_swap", "mutual_exclusion", "impossible_condition", "other_neutral"
]
EDIT_KINDS: tuple[EditKind, ...] = (
    "negation",
    "antonym",
    "entity_swap",
    "mutual_exclusion",
    "impossible_condition",
    "other_neutral",
)
# The kinds `perturb` uses unless told otherwise. Read by hand, the packaged 1.5B's
# mutual-exclusion and impossible-condition rewrites were never a question a person would send
# (0 of 6 and 0 of 7 in benchmarks/generation_natural.py's first sample; 1 of 7 and 0 of 8 in
# issue #39's: "... instead of ...", "... for the second time?"); both stay available.
NATURAL_EDIT_KINDS: tuple[EditKind, ...] = ("negation", "antonym", "entity_swap", "other_neutral")
# GenerationConfig.max_oos's default; a larger min_oos given without a cap raises the cap to it
_DEFAULT_MAX_OOS = 3

#: how a run folder saved before a field existed behaved: resuming it under that field's default
#: is refused as a change of settings (scopeguard.runs.RunFolder's ``legacy``)
LEGACY_SETTINGS: dict[str, object] = {
    "unstated_subject": False,
    "followups_to_top_up": False,
    "unstated_hints": False,
    "subject_moored": False,
    "top_up_new_sentences": False,
    "more_in_scope": 3,
    "fill_from_margin": False,
    "overlap_skips_details": False,
    "copies_by_detail": False,
    "absent_details": False,
    "split_long_sentences": False,
    "detail_synonyms": False,
    "overlap_counts_subject": False,
    "place_year_hint": False,
    "absent_stores": False,
    "writer_screen": False,
    "one_thing_screen": False,
    "subject_as_written": False,
    "agent_nouns_apart": False,
    "centre_as_written": False,
    "absent_authors": False,
    "subject_in_document": False,
    "top_up_shows_asked": False,
    "followups_after_top_ups": False,
    "other_thing_screen": False,
    "kind_words_count": False,
    "odd_details_screen": False,
    "about_subject_screen": False,
    "max_oos": None,
    "subject_named_late": False,
    "subject_article": False,
}


class GenerationConfig(BaseModel):
    """Settings of the generator; the defaults are the paper's (6 claims, 3 subsets, 3 rounds).

    The ``judge_*`` fields configure the LLM-judge filter (Algorithm 1 step 10, Appendix B.3):
    ``judge_votes`` is the number of votes ``m``, ``judge_max_tokens`` the cap on each judge reply
    (``None``: no cap, the paper's). A judge reply cut at the cap without a verdict is drawn again
    without the cap by the judge itself and recorded (``issues``), never silently an unknown vote.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Mode = "auto"
    n_claims: int = Field(default=6, ge=2, le=30)
    n_subsets: int = Field(default=3, ge=1)
    rounds: int = Field(default=3, ge=1, le=10)
    n_in_scope: int = Field(default=3, ge=0, le=20)
    filter: bool = True
    judge_votes: int = Field(default=3, ge=1)
    judge_temperature: float = Field(default=0.7, ge=0.0)
    judge_max_tokens: int | None = Field(default=256, ge=1)
    # scopeguard's addition: a judge sample without a verdict is asked once more for one
    # (see scopeguard.voting); False is the paper's judge.
    judge_followup: bool = True
    temperature: float = Field(default=0.0, ge=0.0)
    seed: int | None = 0
    retries: int = Field(default=1, ge=0, le=3)
    # scopeguard's addition, not in the paper: a document that ends with fewer than ``min_oos``
    # kept out-of-scope questions gets up to ``extra_rounds`` more recovery rounds, sampled at
    # ``extra_temperature`` (a greedy repeat would give the same replies), each followed by the
    # removal, question and filter steps for the claims that round changed. 0 = the paper.
    # (2 since issue #39: a test set needs at least two out-of-scope questions per document)
    min_oos: int = Field(default=2, ge=0, le=20)
    extra_rounds: int = Field(default=2, ge=0, le=10)
    extra_temperature: float = Field(default=0.7, ge=0.0)
    # scopeguard's addition: when the paper's recovery prompt gives no usable reply (after its
    # retry), ask once more for the guesses alone (template gen_recover_guesses). False = the paper.
    recover_fallback: bool = True
    # scopeguard's addition: hallucinated facts whose question was lost in the batched question
    # step (an unusable reply, or the same question written for several facts) are asked for one
    # at a time, with the paper's prompt and a one-fact list. Facts the model chose to omit stay
    # omitted, as the paper's prompt allows. False = the paper.
    question_fallback: bool = True
    # The offline modes (scopeguard's, not the paper's). In-scope candidates: n_in_scope + 2, kept
    # when the filter finds them answerable; `unstated_per_sentence` questions about what each of
    # the same sentences leaves unsaid (unstated, offline); `followups` follow-up questions written
    # from the in-scope questions without the document (followup, offline); perturb_sources of
    # them each rewritten once per edit kind (perturb). An out-of-scope candidate is kept when at
    # least min_overlap of its content words occur in the document (confusing, not off-topic) and
    # the filter finds it out of scope with P(out of scope) >= its threshold + oos_margin.
    perturb_sources: int = Field(default=3, ge=1, le=20)
    perturb_kinds: tuple[EditKind, ...] = NATURAL_EDIT_KINDS
    followups: int = Field(default=5, ge=1, le=20)
    unstated_per_sentence: int = Field(default=2, ge=1, le=5)
    # issue #39: the unstated questions ask about what the document is about (named by the model
    # first, gen_document_subject), not about any thing a sentence names. False = as before.
    unstated_subject: bool = True
    # issue #39: with the subject the model names what kind of thing it is (a product, a place, a
    # book, a film, ...), and the details the unstated questions are told to ask for fit it (a
    # product: its price, its maker; a film: its director, its running time), not one list for all
    # ("a price, a date, ..." made the packaged 1.5B ask a hotel's or a chocolate bar's opening
    # hours). False = the one list, as before. Used only with unstated_subject (the kind is named
    # with the subject), in the unstated and offline modes.
    unstated_hints: bool = True
    # issue #39: a place's hints also name the year it opened, a detail reviews seldom state and
    # the absent-detail rule can decide (absent_details): on halves Q and R the two documents left
    # with one out-of-scope question were hotel reviews that gave a price and where the hotel is;
    # every other question asked was answerable or a copy. False = the five hints, as before.
    place_year_hint: bool = True
    # issue #39: in ``offline`` mode the follow-ups are asked only for a document that the unstated
    # questions leave short of ``min_oos`` (hand-read on two fresh samples: unstated 21 of 27 and
    # 18 of 22 natural and unanswerable, follow-ups 0 of 5 and 3 of 11). False, or min_oos 0
    # (the paper's presets), = always both.
    followups_to_top_up: bool = True
    # issue #39: an unstated question about the document's subject ("What is the address of the
    # Marriott?") is kept when it shares a content word with the subject, not only with its
    # sentence (a question about the subject need not repeat the sentence's words: on half H, 56 of
    # the dropped were dropped so). False = with its sentence only, as before.
    subject_moored: bool = True
    # issue #39: each sampled top-up round of unstated questions asks about the next informative
    # sentences not asked yet, while any are left (asked of the same sentences again, the model
    # wrote the same questions: 129 of the dropped on half H were copies). False = the same
    # sentences every round, as before.
    top_up_new_sentences: bool = True
    # in-scope sentences asked beyond the first n_in_scope + 2 while fewer than n_in_scope are kept
    # (6 since issue #39: three of half H's 13 reviews ended short of 3; 3 before)
    more_in_scope: int = Field(default=6, ge=0, le=20)
    min_overlap: float = Field(default=0.5, ge=0.0, le=1.0)
    # issue #39: an unstated question's share of content words found in the document leaves out
    # the details the prompt hints at (steps._natural.DETAIL_WORDS: "How far is the Sheraton from
    # the city center?" asks for what the review lacks, and counted 1 of 4; on half K, two reviews
    # kept no out-of-scope question, their distance and price questions dropped as off-topic).
    # False = every content word counts, as before.
    overlap_skips_details: bool = True
    # issue #39: for an unstated question the words of the document's subject, as the model named it
    # (gen_document_subject), count as the document's: a hotel review that never says "hotel" (on
    # half P: "Was a nice, clean and quiet room. ...") dropped "What is the hotel's address?" and
    # eight more as off-topic and kept one out-of-scope question. False = as before.
    overlap_counts_subject: bool = True
    # issue #39: an out-of-scope question asking the same detail of the same thing as one kept is a
    # copy ("What is the price of Roku?" after "What is the price of the Roku 3?"; on half L, 10 of
    # 34 kept were such rewordings). False = only the same content words make a copy, as before.
    copies_by_detail: bool = True
    # issue #39: the copy rule reads a detail's synonyms as one word (cost, fee -> price; distance ->
    # far; centre -> center; buy, available -> sold; launched, published -> released): on half O,
    # 9 of 38 kept were rewordings so ("How much does it cost to stay at the Omni?" beside "What is
    # the price range of the hotel?"); replayed on the kept questions of H-O it drops 12 more, each
    # a rewording ("Where can Roku be purchased?" after "Where can I buy Roku?"), and no question
    # read as distinct. False = as before.
    detail_synonyms: bool = True
    # 0.25 since issue #39: of 13 answerable questions kept in a hand-read sample, 11 scored under
    # threshold + 0.25 (benchmarks/generation_natural.py)
    oos_margin: float = Field(default=0.25, ge=0.0, lt=1.0)
    # issue #39: a document still short of ``min_oos`` out-of-scope questions after its top-up
    # rounds keeps the candidates dropped only for ``oos_margin`` (the filter found them out of
    # scope, with less confidence), most confident first and none a copy of one kept; one short of
    # ``n_in_scope`` in-scope questions keeps the in-scope candidates the filter found out of scope
    # within the margin, least confident first. Each is marked ``filled`` in its provenance. Read
    # by hand on halves K-M: 8 of 11 filled out-of-scope questions natural and unanswerable, 1 of 3
    # filled in-scope questions answerable. False = a short document stays short, as before.
    fill_from_margin: bool = True
    # issue #39: a candidate asking for a price, an address or a year of a document that states
    # none of that kind (no amount of money, no street address, no year or month) is out of scope
    # whatever the filter says: an out-of-scope candidate the filter found answerable, or doubted,
    # is kept (provenance ``absent_detail``), an in-scope one is dropped
    # (scopeguard.generation.steps._absent). On halves H-N the packaged 1.5B filter found 59 such
    # questions answerable and doubted 26 more; all 75 kept ones were read as unanswerable.
    # False = the filter alone, as before.
    absent_details: bool = True
    # issue #39: with absent_details, a question asking where to buy something of a document that
    # names no shop, chain or website (nor that it was bought at or from a named one) is out of
    # scope whatever the filter says: on halves H-T, all 42 such questions the filter kept were read
    # as unanswerable (39 natural), and it had found 74 more answerable or doubted them ("Where can I
    # buy Pure Bar?" of a review saying only that its writer will buy more). False = price, address and year
    # only, as before.
    absent_stores: bool = True
    # issue #39: a question about the document's writer named as a third person is dropped: out of
    # scope, any naming "the person" or "the speaker" (a review's "I": "What was the person's
    # name?"; on halves H-U 4 kept, none natural); in scope, one asking "the name of the person"
    # (the writer, never named: 18 of 21 such unanswerable) (steps._natural). False = as before.
    writer_screen: bool = True
    # issue #39: an unstated question asking about two things joined by "and" ("What is the price of
    # the EOS 350D and 400D?"; not a name, "Barnes and Noble") is dropped: the template asks for one
    # thing; on halves H-U 4 were kept, none natural. False = as before.
    one_thing_screen: bool = True
    # issue #39: with unstated_subject, a subject the model capitalised from a description the
    # document writes in lower case is named as written ("Tasty Little Snack Bar" of "this tasty
    # little snack bar": "the tasty little snack bar"; "The Cold War psychological drama": "the
    # ...") (steps._natural.subject_as_written). False = the model's words, as before.
    subject_as_written: bool = True
    # issue #39: the copy rule reads "publisher", "founder" and "owner" as words of their own, not
    # as their verbs' stems: "What was the publisher of The Road?" is no copy of "When was The Road
    # published?" (on halves S-W four were dropped so; two book reviews left short)
    # (steps._natural.copy_stems). False = as before.
    agent_nouns_apart: bool = True
    # issue #39: an out-of-scope question asking how far a place is from "the centre of" a city its
    # document does not name asks "the city centre" ("... from the center of Paris?" of a San
    # Francisco hotel: on halves L-W 7 of 9 such kept questions named a city their review does not,
    # 5 of them false premises)
    # (steps._natural.centre_as_written). False = as before.
    centre_as_written: bool = True
    # issue #39: with absent_details, a question asking who wrote the book of a document naming no
    # writer (no "author", nothing written "by" someone, no name of two capitalised words beside
    # the question's title) is out of scope whatever the filter says: on halves V-X each short
    # document was a book review, one of them left so by the filter reading "Who wrote ...?" as
    # answerable from a review naming no author (steps._absent). False = as before.
    absent_authors: bool = True
    # issue #39: with unstated_subject, a subject with a word its document never writes (in any case;
    # a plural or possessive "s" aside) is the model's guess ("Coffee" of a drink enhancer's review,
    # "Canon EOS 6D Mark II" of a compact camera's: on halves V-X 4 kept questions about such
    # subjects, none natural), and the questions ask about its kind's name instead ("the product",
    # "the place", "the book", "the film"; another kind: what each sentence names)
    # (steps._natural.subject_in_document). False = the model's subject, as before.
    subject_in_document: bool = True
    # issue #39: each sampled top-up round of unstated questions is shown the questions already
    # written about the document (the last 8) and asked for other details: on half Z a film review
    # stating its director, date and writers was asked "Who directed ...?", "When was ... released?"
    # and "Where was ... filmed?" again in every round (new sentences, sampled), all copies, and
    # kept none. The first round is as before. False = top-up rounds as the first, as before.
    top_up_shows_asked: bool = True
    # issue #39: with followups_to_top_up, a short document is asked its follow-ups only after its
    # sampled unstated rounds and the candidates within the filter's margin (fill_from_margin) left
    # it short: hand-read since half O, kept follow-ups were 14 of 29 natural and unanswerable
    # (0 of 3 on Y, 0 of 4 on AA), filled candidates 24 of 34 since K, unstated ones about 80%.
    # False = the follow-ups right after the first unstated round, as before.
    followups_after_top_ups: bool = True
    # issue #39: with unstated_subject, an unstated question sharing no word with the subject that
    # names something the document names only in sentences without a word of the subject's is
    # about another thing and dropped ("the Starbucks Double Shot espresso" of a canned coffee's
    # review, "North Beach" of a hotel's: on halves Z-AB, 6 kept questions and none of those read
    # natural) (steps._natural.other_thing). Not for a kind's name ("the product"). False = as before.
    other_thing_screen: bool = True
    # issue #39: with unstated_subject and unstated_hints, what a subject's kind is called ("film",
    # "movie"; "book", "novel"; "product"; "place", "hotel") counts as the subject's words for
    # mooring an unstated question and for its overlap (where "place" and "film" are no details
    # asked for, as they are for overlap_skips_details): on half AC a film review whose subject the
    # model named "Failure To Launch" lost "Who is the director of the movie?", "Where was the movie
    # filmed?", "What is the budget of the film?" and more as sharing no word with their sentence
    # (one out-of-scope question kept), and the Marriott's review "What is the hotel's owner?",
    # "... room size?", "... year of opening?" (none kept). False = the subject's own words, as before.
    kind_words_count: bool = True
    # issue #39: an unstated question asking when something "is available" or when a place "opens"
    # (or its opening hours) is dropped: on the hand-read halves D-AD, 10 kept "when ... available"
    # questions and 5 about a hotel's or a shop's hours, none natural (a review's product is bought,
    # a hotel is open) (steps._natural.odd_detail). False = as before.
    odd_details_screen: bool = True
    # issue #39: with unstated_subject, an unstated question sharing no content word with the subject
    # as named (nor with what its kind is called: "the hotel", "the product") and calling nothing
    # "it" or "this" is about something else and dropped ("What is the price of the bass?" of a
    # review of speakers, "Where is cheddar cheese sold?" of crackers'): replayed on the kept
    # questions of halves Z-AF it drops 27, 5 of them natural and unanswerable (the hotel's "king
    # room", a tea sampler); other_thing_screen dropped 6 of them (steps._natural.not_about).
    # False = as before.
    about_subject_screen: bool = True
    # issue #39: with unstated_subject, a subject of a kind with a name ("the product", "the place",
    # "the book", "the film") that its document first names after the first 40% of its sentences
    # is a passing mention, not what it reviews (a review names that early, or never), and the
    # questions ask about the kind's name instead: "Ocean's 13" of a film review ending "I hope
    # Ocean's 13 ... will be more enjoyable", "Belkin router" of a router review saying "I bought a
    # Belkin at Costco". Replayed (subjects named again) on halves Z-AH: fires on 8 of the 11
    # subjects named wrongly (20 kept questions, none natural) and on 14 of the 104 named rightly
    # (steps._natural.named_late). False = as before.
    subject_named_late: bool = True
    # issue #39: with unstated_subject, a subject the model names in lower case without an article
    # ("soda", "ginger tea", "coffee" of reviews of one soda, one tea) is asked about as "the soda":
    # on halves AI-AL 5 kept questions asked about it in general ("What is the price of soda?"),
    # none natural (steps._natural.with_article). False = as before.
    subject_article: bool = True
    # issue #39: at most this many out-of-scope questions are kept of one document (None: no cap),
    # the first ones kept; the rest are dropped with the reason and no more are asked for. A test
    # set's questions then come from many documents, not a few: a subject the model named wrongly
    # (a tablet's case reviewed as the tablet) cost a document's every question (8 on half AF, none
    # natural). On the hand-read halves O-AF the first three kept of each document were 412 of 525
    # natural and unanswerable, all of them 444 of 584 (the fourth and later: 32 of 59).
    max_oos: int | None = Field(default=_DEFAULT_MAX_OOS, ge=1, le=50)
    # issue #39: a sentence too long to ask about (over 45 words) is cut at its clause breaks (an
    # ellipsis, a dash, a semicolon, "caffeine!).Also") and its pieces of 8-45 words are asked about
    # like sentences: on half O two reviews run together so ("options..these seemed ... money....
    # Sennheiser") had 3 usable sentences and kept 2 in-scope questions. False = as before.
    split_long_sentences: bool = True
    # scopeguard's addition: an out-of-scope question that copies a phrase or a name from a
    # prompt's worked example (and not from its document) is dropped with the phrase as the
    # reason (scopeguard.generation.steps._natural). False = the paper.
    natural_screen: bool = True

    @field_validator("perturb_kinds")
    @classmethod
    def _distinct_kinds(cls, kinds: tuple[EditKind, ...]) -> tuple[EditKind, ...]:
        if not kinds or len(set(kinds)) != len(kinds):
            raise ValueError("perturb_kinds must name at least one edit kind, each once")
        return kinds

    @model_validator(mode="before")
    @classmethod
    def _cap_follows_minimum(cls, data: object) -> object:
        # a minimum above the default cap, with no cap given: the cap is the minimum
        if isinstance(data, dict) and "max_oos" not in data:
            minimum = data.get("min_oos")
            if isinstance(minimum, int) and minimum > _DEFAULT_MAX_OOS:
                return {**data, "max_oos": minimum}
        return data

    @model_validator(mode="after")
    def _cap_above_minimum(self) -> GenerationConfig:
        if self.max_oos is not None and self.max_oos < self.min_oos:
            raise ValueError(
                f"max_oos ({self.max_oos}) is below min_oos ({self.min_oos}): a document could never "
                "keep its minimum of out-of-scope questions"
            )
        return self

    def resolved(self, llm: object) -> GenerationConfig:
        """This config with ``auto`` made concrete for ``llm``: ``offline`` when ``llm`` is one of
        the packaged GGUF models (they cannot follow Algorithm 1, issue #28), else ``faithful``."""
        if self.mode != "auto":
            return self
        return self.model_copy(update={"mode": "offline" if is_packaged_local(llm) else "faithful"})

    @classmethod
    def paper(cls, **settings: object) -> GenerationConfig:
        """The paper's Algorithm 1 with every scopeguard addition off (``settings`` override).

        The mode is ``faithful`` unless ``settings`` names another.

        The judge filter votes ``m=9`` times (section 4.4) with no follow-up turn and no reply cap;
        :data:`PAPER_IN_SCOPE` in-scope questions per document. Pair it with
        ``Generator(judge="judge")`` for the paper's LLM-judge filter. What still differs from the
        paper is listed in docs/guides/train-on-your-corpus.md.
        """
        additions: dict[str, object] = {
            "mode": "faithful",
            "n_in_scope": PAPER_IN_SCOPE,
            "judge_votes": PAPER_VOTES,
            "judge_max_tokens": None,
            "judge_followup": False,
            "min_oos": 0,
            "recover_fallback": False,
            "question_fallback": False,
            "natural_screen": False,
            "max_oos": None,
        }
        return cls(**{**additions, **settings})  # type: ignore[arg-type]
