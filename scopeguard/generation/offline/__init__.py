"""The offline wing: questions the small packaged models can write, kept by a detector.

Algorithm 1 (:mod:`scopeguard.generation.paper`) asks a model to invent facts and write questions
about them; models of 0.1-1.5B parameters copy the document instead. The offline modes ask them for
what they can do (:func:`generate_offline`, in ``_writer``: a document's steps in order, and which
rounds of prompts it gets), every reply held to a JSON schema and asked through one function
(``_replies``). The rooms, in the order a document's data flows through them:

* ``_reading``: the document read once (:class:`DocumentView`): whether the offline modes can use
  it (empty, one sentence, not English: refused before any call), its content words and the
  sentences they ask about (:func:`informative_sentences`);
* ``_in_scope``: the in-scope candidates, one per informative sentence, and their keeper;
* ``_subjects``: the document's subject, named by the model and mended, for the unstated questions;
* ``_out_of_scope``: each mode's prompts for out-of-scope candidates (unstated questions,
  follow-ups, perturbations), a round of them asked at a time, each reply's candidates handed to
  the keeper;
* ``_keeper``: each out-of-scope candidate kept or dropped with its reason: read once by the one
  pass both keepers make (``_screens``' :func:`~._screens.screen`: mended by ``_natural``, the
  screens registered by name, :func:`register_screen`, the details a document states none of,
  ``_absent``), then its own copy, enumeration and overlap rules and the filter;
* ``_vocabulary``: every word list the rules read, with what each is for.

A new screen is one function and one registration::

    from scopeguard.generation.offline import OUT_OF_SCOPE, register_screen

    @register_screen("no_prices", kinds=OUT_OF_SCOPE)
    def no_prices(candidate, view):
        return "asks a price" if "price" in candidate.question.lower() else None

    GenerationConfig(screens=(*DEFAULT_SCREENS, "no_prices"))

The question parsing of the offline replies is public for other writers of one-line questions
(the calibration's rephrasing): :func:`questions_schema`, :func:`parse_questions` and
:data:`MAX_TOKENS_PER_QUESTION`.
"""

from scopeguard.generation.offline._keeper import margin_floor, overlap
from scopeguard.generation.offline._natural import copied_phrase
from scopeguard.generation.offline._reading import DocumentView, informative_sentences
from scopeguard.generation.offline._replies import MAX_TOKENS_PER_QUESTION, parse_questions, questions_schema
from scopeguard.generation.offline._screens import (
    IN_SCOPE,
    OUT_OF_SCOPE,
    Candidate,
    Screen,
    ScreenCheck,
    available_screens,
    get_screens,
    register_screen,
)
from scopeguard.generation.offline._writer import generate_offline

__all__ = [
    "IN_SCOPE",
    "MAX_TOKENS_PER_QUESTION",
    "OUT_OF_SCOPE",
    "Candidate",
    "DocumentView",
    "Screen",
    "ScreenCheck",
    "available_screens",
    "copied_phrase",
    "generate_offline",
    "get_screens",
    "informative_sentences",
    "margin_floor",
    "overlap",
    "parse_questions",
    "questions_schema",
    "register_screen",
]
