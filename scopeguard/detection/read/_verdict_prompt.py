"""The verdict prompt: its messages, and where its question starts (for a question-side adapter).

Below every engine and the :class:`~scopeguard.detection.read.reader.Reader` (which re-exports
these names), so that an engine needs nothing from the reader that builds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from scopeguard.errors import ConfigurationError
from scopeguard.llm.base import ChatMessage
from scopeguard.prompts import render

__all__ = ["TEMPLATE", "document_block", "question_cut", "split_tokens", "verdict_messages"]

#: the verdict prompt: "Does the document contain the answer to this question?"
TEMPLATE = "answerability_verdict"

_DOCUMENT_SLOT = "SCOPEGUARD-DOCUMENT-SLOT"  # where the documents go, to find the instruction before them
_QUESTION_SLOT = "SCOPEGUARD-QUESTION-SLOT"  # where the question goes, to find instruction + document


def verdict_messages(question: str, document_text: str, *, template: str = TEMPLATE) -> list[ChatMessage]:
    """The chat messages of one verdict prompt (one user turn)."""
    return [ChatMessage(role="user", content=render(template, document=document_text, question=question))]


@lru_cache(maxsize=16)
def _question_marker(template: str) -> str:
    """The text of ``template`` between the end of the documents and the question."""
    text = render(template, document=_DOCUMENT_SLOT, question=_QUESTION_SLOT)
    start, end = text.find(_DOCUMENT_SLOT), text.find(_QUESTION_SLOT)
    if start < 0 or end < start:
        raise ConfigurationError(f"the prompt {template!r} does not put its question after its documents")
    marker = text[start + len(_DOCUMENT_SLOT) : end]
    if '"""' not in marker:  # only a fenced delimiter cannot occur in a document or a question
        raise ConfigurationError(f"the prompt {template!r} does not close its documents with a fence")
    return marker


def question_cut(prompt: str, template: str = TEMPLATE) -> int | None:
    """Where the question starts in a rendered verdict prompt (a character offset: instruction and
    documents before it, the question and what follows from it), or ``None`` when ``prompt`` is not
    one of ``template``'s. A question-side adapter (``adapt="question"``, see
    :mod:`scopeguard.detection.tune`) reads the text before the cut with the bare base model and
    the rest with the adapter, in every engine alike."""
    marker = _question_marker(template)
    at = prompt.rfind(marker)  # documents and question are fenced: the last one is the question's
    return None if at < 0 else at + len(marker)


def document_block(prompt: str, template: str = TEMPLATE) -> tuple[int, int, int] | None:
    """Where the document's block lies in a rendered verdict prompt of one document: character
    offsets of the block's start (the line that opens it, e.g. ``Document:`` and its fence), its
    end (after the closing fence and the blank line), and the question's start
    (:func:`question_cut`); ``None`` when ``prompt`` is not one of ``template``'s. A set read joins
    several passages' blocks between one instruction and one question."""
    cut = question_cut(prompt, template)
    if cut is None:
        return None
    marker = _question_marker(template)
    after_fence = marker[marker.rfind('"""') + 3 :]
    end = cut - len(after_fence.lstrip())
    opened = _document_opener(template)
    start = prompt.find(opened)
    if start < 0 or start >= end:
        return None
    return start, end, cut


@lru_cache(maxsize=16)
def _document_opener(template: str) -> str:
    """The text of ``template`` from the paragraph that opens the documents up to them."""
    text = render(template, document=_DOCUMENT_SLOT, question=_QUESTION_SLOT)
    at = text.find(_DOCUMENT_SLOT)
    start = text.rfind("\n\n", 0, at)
    return text[start + 2 if start >= 0 else 0 : at]


def split_tokens(prefix: Sequence[int], ids: Sequence[int]) -> int:
    """How many of ``ids`` the bare base reads: the tokens they share with ``prefix`` (the prompt's
    text before :func:`question_cut`, tokenised alone), at least the last token left to the rest."""
    n = 0
    for a, b in zip(prefix, ids, strict=False):
        if a != b:
            break
        n += 1
    return min(n, len(ids) - 1)
