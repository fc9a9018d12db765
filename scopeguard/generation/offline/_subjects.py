"""What a document is about, as its unstated questions ask it: the subject the model names, mended.

The model names a document's subject (``gen_document_subject``) and its kind, asked once
(:func:`about_subject`); the rules here make that name one a reader would use
(:func:`subject_as_written`, :func:`with_article`), replace one the document does not bear out
(:func:`subject_in_document`, :func:`named_late`) by what the document itself calls it, if
anything (:func:`stand_in`: "the case"), and tell a question about another thing than the subject
(:func:`other_thing`, :func:`not_about`). Why each is there, and what it caught in hand-labelled
questions: ``docs/research/generation-history.md``.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache

from scopeguard._sentences import split_sentences
from scopeguard.detection.read.text import content_stems
from scopeguard.generation._context import DocumentContext
from scopeguard.generation.cache import CachedReply
from scopeguard.generation.offline._reading import DocumentView
from scopeguard.generation.offline._replies import ask_reply, subject_reply
from scopeguard.generation.offline._vocabulary import KIND_WORDS, SUBJECT_GLUE, SUBJECT_KINDS

__all__ = [
    "QUESTION_NAME",
    "about_subject",
    "named_late",
    "not_about",
    "other_thing",
    "stand_in",
    "subject_as_written",
    "subject_in_document",
    "with_article",
]

_LEADING_THE = re.compile(r"^the\s+", re.IGNORECASE)


def subject_as_written(subject: str, document: str) -> str:
    """``subject`` (the model's name for what ``document`` is about) as the document writes it,
    where the model capitalised a description: "Tasty Little Snack Bar" of a review of "this tasty
    little snack bar" is "the tasty little snack bar", "The Cold War psychological drama" of "the
    best Cold War psychological drama" is "the Cold War psychological drama" (questions asked
    about them read as names no one uses). A subject the document writes as it is, one it writes
    capitalised ("PURE bar"), in one word ("avitae") or with digits ("hbs-730"), and one it never
    writes ("Buffy the Vampire Slayer") stay as they are."""
    if subject in document:
        return subject
    core = _LEADING_THE.sub("", subject)
    found = re.search(rf"(?<![\w-]){re.escape(core)}(?![\w-])", document, re.IGNORECASE)
    if found is None:
        return subject
    written = found.group(0)
    words = written.split()
    # a description: every word in lower case, more than one (a one-word name in lower case,
    # "avitae", "ipad", or a title, "quiet", is the writer's slip, not a description)
    described = len(words) > 1 and all(w[:1].islower() for w in words) and not re.search(r"\d", written)
    return f"the {written}" if core != subject or described else subject


def _singular(word: str) -> str:
    """``word`` without a plural ending: "ferries" "ferry", "boxes" "box", "newtons" "newton"."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _plain_words(text: str) -> set[str]:
    """The words of ``text`` in lower case and singular, a possessive "'s" dropped ("Newton's",
    "Newtons": "newton"; "ferries": "ferry")."""
    return {_singular(w) for w in re.findall(r"[a-z0-9]+", text.lower().replace("'s", ""))}


def subject_in_document(subject: str, kind: str, document: str) -> str:
    """``subject`` if ``document`` writes each of its words (in any case, in any order), else what
    the document calls it or what its kind is called (:func:`stand_in`), ``""`` if neither. A word
    the document never writes is the model's guess, and questions about a guessed subject are about
    something else: "Coffee" of a drink enhancer's review, "Canon EOS 6D Mark II" of a compact
    camera's, "Lundberg Wild Blend" of a soup's."""
    if not subject:
        return subject
    written = _plain_words(document)
    if all(w in written or w in SUBJECT_GLUE for w in _plain_words(subject)):
        return subject
    return stand_in(subject, kind, document, guessed=True)


# a determiner a subject may begin with ("the soda", "this coffee", "my tablet")
_DETERMINER = re.compile(r"^(?:the|a|an|this|these|that|those|my|our|his|her|their|its)\b", re.IGNORECASE)


def with_article(subject: str) -> str:
    """``subject`` with "the" before it where the model named it in lower case without one:
    "soda", "ginger tea" of reviews of one soda, one tea, whose questions then asked about it in
    general ("What is the price of soda?", "Where can ginger tea be bought?"). A name ("Essentia",
    "Hotel Nikko") or a subject with its article stays as it is."""
    if not subject[:1].islower() or _DETERMINER.match(subject):
        return subject
    return f"the {subject}"


@lru_cache(maxsize=32)
def _sentence_words(document: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """Each sentence of ``document`` with its plain words (:func:`_plain_words`), split once per
    document: :func:`other_thing` reads them for every candidate question of it, :func:`named_late`
    once."""
    return tuple((s, frozenset(_plain_words(s))) for s in split_sentences(document, glued=True))


# a subject first named this far into its document (a share of its sentences) is a passing mention
_LATE_SHARE = 0.4


def named_late(subject: str, kind: str, document: str) -> bool:
    """Whether ``document`` first names ``subject`` (a word of it other than what its kind is
    called: "Mandarin" of "Mandarin Hotel") only after the first 40% of its sentences: a review
    names what it reviews early, or never, and what it names late is something it compares it
    with or mentions in passing ("I hope Ocean's 13 ... will be more enjoyable" closing a film
    review, "I bought a Belkin at Costco" two thirds into a router's). It catches most subjects the
    model names wrongly and a few it names rightly, whose questions then ask about what
    :func:`stand_in` gives instead (replayed in ``docs/research/generation-history.md``,
    ``subject_named_late``). A subject is named at the sentence by which each of its words is
    written: "Lyon bakery" at "the Lyon bakery", not at an earlier "bakery"."""
    words = _plain_words(subject) - SUBJECT_GLUE - set(KIND_WORDS.get(kind, "").split())
    sentences = _sentence_words(document)
    if not words or not sentences:
        return False
    firsts = [next((i for i, (_, written) in enumerate(sentences) if w in written), None) for w in words]
    if None in firsts:  # a word it never writes: left to subject_in_document
        return False
    # named once each of its words is written: "Lyon bakery" at "the Lyon bakery", not at "bakery"
    return max(i for i in firsts if i is not None) >= _LATE_SHARE * len(sentences)


# a common noun the document calls its subject by: after a determiner, with a name or two words
# between at most ("the case", "a great wireless mouse", "the Marsh Lane bakery"); "took place" is
# not "the place"
_CALLED = (
    r"\b(?i:the|this|that|these|those|a|an|our|my|your|its|their)\s+"
    r"(?:(?:[A-Z][\w'-]*\s+){{1,3}}|(?:[a-z-]+\s+){{1,2}})?(?<!took )(?<!takes )(?<!taking ){word}s?\b"
)


def _called(word: str, text: str) -> bool:
    return re.search(_CALLED.format(word=re.escape(word)), text) is not None


def stand_in(subject: str, kind: str, document: str, *, guessed: bool = False) -> str:
    """What to ask about in place of ``subject``, a name of the model's that ``document`` does not
    bear out: the subject's last word where the document calls something that in its first 40%
    ("the case" of "Nexus case", a review naming the Nexus only late), else the first of its
    kind's words (:data:`KIND_WORDS`) it calls something ("the hotel", "the product"). Else, for a
    subject the model ``guessed`` (a word the document never writes: :func:`subject_in_document`),
    what its kind is called ("the place" of a hotel review that never writes "hotel": the model
    saw one thing of that kind); for one the document names late (:func:`named_late`), a passing
    mention, ``""``: what each sentence names. The kind's name there would ask about nothing a
    reader can place ("How far is the place from the centre?" of a Wikipedia passage on the Rhine
    whose subject the model named "Ruhr Area"; docs/research/generation-log.md, "What a subject
    named in passing stands in for")."""
    sentences = _sentence_words(document)
    early = " ".join(s for s, _ in sentences[: max(1, int(_LATE_SHARE * len(sentences)))])
    last = re.findall(r"[a-z]+", subject.lower())
    if last and last[-1] not in SUBJECT_GLUE and len(last[-1]) > 2:
        head = _singular(last[-1])
        if _called(head, early):
            return f"the {head}"
    words = KIND_WORDS.get(kind, "").split()
    called = next((w for w in words if _called(w, document)), None)
    if called is not None:
        return f"the {called}"
    return f"the {words[0]}" if guessed and words else ""


#: a name in a question: a run of capitalised words, not the question's first nor a sentence's
QUESTION_NAME = re.compile(r"(?<!^)(?<![.?!] )\b[A-Z][\w'\u2019-]*(?:\s+[A-Z][\w'\u2019-]*)*")


def other_thing(question: str, subject: str, document: str) -> str | None:
    """Why ``question``, asked about ``subject``, is about another thing its document names, or
    ``None``: it shares no word with the subject and names something the document names only in
    sentences without a word of the subject's ("the Starbucks Double Shot espresso" of a review of
    a canned coffee, "the Klipsch reference series" of one of speakers, "North Beach" and
    "Fisherman's Wharf" of a hotel review whose subject the model named "San Francisco"). "The
    Logitech Z-2300" of "Speakers" is the subject's when the document writes "the Logitech Z-2300
    speakers"; a name the document does not write is left to the other rules."""
    subject_words = _plain_words(subject) - SUBJECT_GLUE
    if not subject_words or subject_words & _plain_words(question):
        return None
    sentences = _sentence_words(document)
    for match in QUESTION_NAME.finditer(question):
        name = match.group(0)
        if name == "I":
            continue
        first = re.compile(rf"(?<![\w-]){re.escape(name.split()[0])}(?![\w-])")
        naming = [words for sentence, words in sentences if first.search(sentence)]
        if naming and not any(subject_words & words for words in naming):
            return f"about another thing the document names ({name}), not its subject ({subject})"
    return None


# a question that calls its subject "it" or "this" ("Where can I buy it?") is about it
_REFERS_BACK = re.compile(r"\b(?:it|its|this|these|they|them|their)\b", re.IGNORECASE)


def not_about(question: str, subject: str, kind: str = "") -> str | None:
    """Why ``question``, asked about ``subject`` (a thing of ``kind``), is about something else, or
    ``None``: it shares no content word with the subject or with what its kind is called
    (:data:`KIND_WORDS`: "the hotel" of a place) and calls nothing "it" or "this" ("What is the
    price of the bass?" of a review of speakers, "Where is cheddar cheese sold?" of crackers',
    "What is the address of the Ferry Bldg?" of a hotel's; it drops a few natural questions too:
    ``about_subject`` in ``docs/research/generation-history.md``). An empty subject (none named)
    asks nothing of it."""
    if not subject.strip():
        return None
    about = set(content_stems(f"{subject} {KIND_WORDS.get(kind, '')}"))
    if about & set(content_stems(question)) or _REFERS_BACK.search(question):
        return None
    return f"not about the document's subject ({subject}): no word of it, nor 'it'"


_SUBJECT_CHARS = 1500  # of the document shown to name its subject (it is named early)


async def about_subject(ctx: DocumentContext, view: DocumentView) -> DocumentView:
    """``view`` with the document's subject and its words: the model names what the document is
    about, in a few words, and what kind of thing it is (:data:`SUBJECT_KINDS`;
    ``gen_document_subject``, shown the document's start), mended (:func:`_mended`); none (``""``)
    when the model names nothing usable. The subject's words and what its kind is called
    (:data:`KIND_WORDS`: "film", "movie") count as the document's for an unstated question, and
    are not details it asks for; the model's own name (not a stand-in) tells another thing from it
    (:func:`other_thing`)."""
    got = await ask_reply(
        ctx,
        "subject",
        "gen_document_subject",
        subject_reply(),
        text=ctx.doc.text[:_SUBJECT_CHARS],
        subject_kinds=SUBJECT_KINDS,
    )
    subject, kind, stood_in = _mended(ctx, *got) if got is not None else ("", "", False)
    kind_stems = frozenset(content_stems(KIND_WORDS.get(kind, ""))) if subject else frozenset()
    return replace(
        view,
        subject=subject,
        kind=kind,
        own_subject="" if stood_in else subject,
        kind_stems=kind_stems,
        subject_stems=frozenset(content_stems(subject)) | kind_stems,
    )


def _mended(ctx: DocumentContext, named: tuple[str, str], reply: CachedReply) -> tuple[str, str, bool]:
    """The subject and kind the model ``named`` in ``reply``, as the unstated questions ask about
    it, and whether that is a stand-in for the model's name (a replacement is noted on ``ctx``). A
    description the model capitalised is named as the document writes it
    (:func:`subject_as_written`); a subject with a word the document never writes is the model's
    guess, and one the document first names late is a passing mention: what the document calls it
    ("the case") is asked about instead, or what each sentence names (:func:`stand_in`); one
    named in lower case gets "the" (:func:`with_article`)."""
    subject, kind = named
    subject = subject_as_written(subject, ctx.doc.text)
    named_as = subject_in_document(subject, kind, ctx.doc.text)
    if named_as != subject:
        step, reason = "subject_in_document", "subject_not_in_document"
        why = "has a word the document never writes"
    # a subject of a kind a review is of (KIND_WORDS: a product, a place, a book, a film) that the
    # document first names late is a passing mention ("I bought a Belkin at Costco" in a router's review)
    elif subject and kind in KIND_WORDS and named_late(subject, kind, ctx.doc.text):
        named_as = stand_in(subject, kind, ctx.doc.text)
        step = reason = "subject_named_late"
        why = "is first named late in the document (a passing mention)"
    else:
        return with_article(subject), kind, False
    instead = repr(named_as) if named_as else "what each sentence names"
    detail = f"{subject!r} {why}: asked about {instead}"
    ctx.note(step, reason, reply_id=reply.id, accepted=True, detail=detail)
    return named_as, kind, True
