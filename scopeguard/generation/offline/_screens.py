"""The offline modes' screens: each a rule that drops a candidate no person would send, by name.

A :class:`Screen` has a ``name`` (what ``GenerationConfig.screens`` lists), the candidate
``kinds`` it applies to (``"direct"``: an in-scope candidate; ``"unstated"``, ``"followup"`` and the
edit kinds: out-of-scope ones) and ``check(candidate, view)``: why the :class:`Candidate` is no
usable question, or ``None``. The :class:`DocumentView` is what the screens read of the document,
computed once for it (its subject added once the model names it). :func:`screen` applies the
configured screens in their order, in the one pass both keepers make over a candidate (mended, and
read for a detail its document states none of, :mod:`._absent`); a keeper (:mod:`._keeper`,
:mod:`._in_scope`) drops a candidate with the first reason found, as ``"not a usable question:
<reason>"``.

Screens are looked up by name in one registry, as detectors are: a screen is a function registered
with :func:`register_screen` (``@register_screen("no_prices", kinds=OUT_OF_SCOPE)``), and
:func:`get_screens` looks the configured names up once, when a
:class:`~scopeguard.generation.Generator` is built; an unknown name raises
:class:`~scopeguard.errors.ConfigurationError` listing the valid ones. The built-in screens, in the
order of ``GenerationConfig``'s default:

==============  ==========  ==================================================================
screen          kinds       drops
==============  ==========  ==================================================================
degenerate      out         a reply that refers to its sentence, is too short or says words twice
moored          every       one sharing no word with the sentence it was written from (or the
                            subject: "What is the hotel's address?"), or referring to it
natural         out         one copying a prompt example, put to the writer ("you"), asking two
                            questions at once or the name of something named (:func:`unnatural`)
unwritten_name  unstated,   one naming something neither its document nor its subject writes
                followup    ("... in the United States?" of a passage on economics)
no_name         unstated,   one asking for a name ("What is the name of the law?"): named elsewhere
                followup    in its document, or nothing of the kind is (:func:`~._natural.asks_name`)
writer          every       one about the document's writer as "the person"; in scope, one asking
                            "the name of the person" (a review never names its writer)
one_thing       unstated    one asking about two things joined by "and" (not a name's "and")
other_thing     unstated    one about another thing the document names than its subject
odd_details     unstated    one asking when something "is available" or a place "opens"
about_subject   unstated    one sharing no word with the subject nor calling anything "it"
answered        in scope    one whose answer (copied from its sentence by the writer) has a word
                            the sentence lacks, or none the question lacks (:func:`unanswered`)
==============  ==========  ==================================================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Protocol

from scopeguard.detection.read.text import content_stem_set, content_stems
from scopeguard.errors import ConfigurationError
from scopeguard.generation._edit_kinds import EDIT_KINDS
from scopeguard.generation.offline._absent import absent_detail
from scopeguard.generation.offline._natural import (
    about_writer,
    asks_name,
    asks_writer_name,
    centre_as_written,
    degenerate,
    odd_detail,
    standalone,
    two_things,
    unmoored,
    unnatural,
    unwritten_name,
)
from scopeguard.generation.offline._reading import DocumentView
from scopeguard.generation.offline._subjects import not_about, other_thing

__all__ = [
    "IN_SCOPE",
    "OUT_OF_SCOPE",
    "Candidate",
    "DocumentView",
    "Screen",
    "ScreenCheck",
    "Screened",
    "available_screens",
    "get_screens",
    "register_screen",
    "screen",
    "unanswered",
]

#: the kind of an in-scope candidate (its provenance's ``edit_kind``)
IN_SCOPE = "direct"
#: the kinds of an out-of-scope candidate: an unstated question, a follow-up, an edit kind
OUT_OF_SCOPE = frozenset({"unstated", "followup", *EDIT_KINDS})
_EVERY = OUT_OF_SCOPE | {IN_SCOPE}
_UNSTATED = frozenset({"unstated"})
_WRITTEN_FROM_THE_DOCUMENT = frozenset({"unstated", "followup"})  # not an edit: entity_swap swaps names


@dataclass(frozen=True)
class Candidate:
    """A question a screen reads: its ``kind`` (``"direct"``, ``"unstated"``, ``"followup"`` or an
    edit kind), the question it was rewritten from (``source``) and the text it must share a content
    word with (``sentence``: the sentence it was written from, with the subject's words for an
    unstated one) and, for an in-scope one, the ``answer`` the writer copied from that sentence,
    where it has them."""

    question: str
    kind: str
    source: str | None = None
    sentence: str | None = None
    answer: str | None = None


class Screen(Protocol):
    """A rule that drops a candidate: ``check`` says why, or ``None``."""

    @property
    def name(self) -> str: ...

    @property
    def kinds(self) -> frozenset[str]: ...

    def check(self, candidate: Candidate, view: DocumentView) -> str | None: ...


#: what a screen's ``check`` is: why a candidate is no usable question, or ``None``
ScreenCheck = Callable[[Candidate, DocumentView], str | None]


@dataclass(frozen=True)
class _Rule:
    """A :class:`Screen` made of a function."""

    name: str
    kinds: frozenset[str]
    rule: ScreenCheck

    def check(self, candidate: Candidate, view: DocumentView) -> str | None:
        return self.rule(candidate, view)


# every screen by name, in the order registered (the built-in ones in DEFAULT_SCREENS' order)
_SCREENS: dict[str, Screen] = {}


def register_screen(name: str, *, kinds: Iterable[str]) -> Callable[[ScreenCheck], ScreenCheck]:
    """Register the decorated function as the screen ``name``, for candidates of ``kinds``
    (:data:`IN_SCOPE`, :data:`OUT_OF_SCOPE` or any of their kinds); the function is returned as
    it is. Name it in ``GenerationConfig(screens=...)`` to apply it; a name registered again is
    replaced. An empty name or no kind raises :class:`~scopeguard.errors.ConfigurationError`."""
    wanted = frozenset(kinds)
    if not name:
        raise ConfigurationError("screen name must not be empty")
    if not wanted:
        raise ConfigurationError(f"screen {name!r} applies to no kind of candidate")

    def register(check: ScreenCheck) -> ScreenCheck:
        _SCREENS[name] = _Rule(name, wanted, check)
        return check

    return register


def available_screens() -> list[str]:
    """The names of the registered screens, the built-in ones in the order of
    ``GenerationConfig``'s default."""
    return list(_SCREENS)


def get_screens(names: Iterable[str]) -> tuple[Screen, ...]:
    """The screens ``names`` (in that order); an unknown name raises
    :class:`~scopeguard.errors.ConfigurationError` listing the valid ones."""
    names = tuple(names)
    unknown = [n for n in names if n not in _SCREENS]
    if unknown:
        raise ConfigurationError(
            f"unknown screen(s) {', '.join(map(repr, unknown))}; valid names: {', '.join(_SCREENS)}"
        )
    return tuple(_SCREENS[n] for n in names)


@dataclass(frozen=True)
class Screened:
    """A candidate read once against its document (:func:`screen`): mended, the first reason a
    screen gives to drop it (``None``: none does), and the kind of detail it asks that the document
    states none of (:func:`~._absent.absent_detail`; ``None``: it asks none such, or the document
    states one)."""

    candidate: Candidate
    unusable: str | None
    absent: str | None


def screen(candidate: Candidate, view: DocumentView, screens: Iterable[Screen]) -> Screened:
    """The one pass both keepers make over a candidate, each then deciding in its own order:
    ``candidate`` mended as a person would write it (:func:`~._natural.standalone`; an out-of-scope
    one's "the centre of" a city the document does not name made "the city centre":
    :func:`~._natural.centre_as_written`), the kind of detail it asks that ``view``'s document
    states none of, and the first reason one of ``screens`` that applies to its kind gives."""
    question = standalone(candidate.question)
    if candidate.kind != IN_SCOPE:
        question = centre_as_written(question, view.text)
    mended = replace(candidate, question=question)
    absent = absent_detail(question, view.text)
    for rule in screens:
        if mended.kind in rule.kinds:
            reason = rule.check(mended, view)
            if reason is not None:
                return Screened(mended, reason, absent)
    return Screened(mended, None, absent)


# The built-in screens, registered in the order of GenerationConfig's default (config.DEFAULT_SCREENS).
register_screen("degenerate", kinds=OUT_OF_SCOPE)(lambda c, v: degenerate(c.question))
register_screen("moored", kinds=_EVERY)(lambda c, v: unmoored(c.question, c.sentence) if c.sentence else None)
register_screen("natural", kinds=OUT_OF_SCOPE)(
    lambda c, v: unnatural(c.question, f"{v.text}\n{c.source or ''}")
)
register_screen("unwritten_name", kinds=_WRITTEN_FROM_THE_DOCUMENT)(
    lambda c, v: unwritten_name(c.question, v.text, v.stems | v.subject_stems)
)
register_screen("no_name", kinds=_WRITTEN_FROM_THE_DOCUMENT)(lambda c, v: asks_name(c.question))


@register_screen("writer", kinds=_EVERY)
def _writer(c: Candidate, view: DocumentView) -> str | None:
    return asks_writer_name(c.question) if c.kind == IN_SCOPE else about_writer(c.question)


register_screen("one_thing", kinds=_UNSTATED)(lambda c, v: two_things(c.question, v.text))


@register_screen("other_thing", kinds=_UNSTATED)
def _other_thing(c: Candidate, view: DocumentView) -> str | None:
    return other_thing(c.question, view.own_subject, view.text) if view.own_subject else None


register_screen("odd_details", kinds=_UNSTATED)(lambda c, v: odd_detail(c.question))
register_screen("about_subject", kinds=_UNSTATED)(lambda c, v: not_about(c.question, v.subject, v.kind))


def unanswered(question: str, answer: str, sentence: str) -> str | None:
    """Why ``sentence`` does not answer ``question`` with ``answer``, or ``None``: the answer names
    nothing, has a content word the sentence lacks (the writer asked for what the sentence does not
    say: "What is the name of the restaurant?" of "Lovely bistro, praised by the local paper"), or has
    none the question lacks (the question gives its own answer)."""
    said = set(content_stems(answer))
    if not said:
        return "its answer names nothing"
    if not said <= content_stem_set(sentence):
        return "its answer is not in its sentence"
    if said <= content_stem_set(question):
        return "it states its own answer"
    return None


register_screen("answered", kinds={IN_SCOPE})(
    lambda c, v: unanswered(c.question, c.answer, c.sentence) if c.answer and c.sentence else None
)
