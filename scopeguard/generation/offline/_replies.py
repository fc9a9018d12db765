"""JSON replies of the offline modes: the schemas the model is held to, and their strict parsers.

With llama.cpp the schema becomes a grammar, so the reply always is JSON of the asked shape (a
question is a string that starts with a capital and ends with "?"). Other backends get the same
prompt without the constraint; their replies are parsed the same way. A reply that is not JSON of
the asked shape raises :class:`~scopeguard.generation.parsers.ReplyParseError`; ``lenient`` (only
after the firmer retry) takes the JSON object out of surrounding text and keeps the usable items.

Each kind of reply is a :class:`ReplyShape` (its schema, its parser, its token cap:
:func:`questions_reply`, :func:`answered_reply`, :func:`subject_reply`, :func:`edits_reply`), and
every offline prompt is asked through :func:`ask_reply`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from scopeguard.generation._context import DocumentContext, Sampling
from scopeguard.generation.cache import CachedReply
from scopeguard.generation.offline._vocabulary import SUBJECT_KINDS
from scopeguard.generation.parsers import ReplyParseError

__all__ = [
    "MAX_ANSWER_CHARS",
    "SUBJECT_KIND_TOKENS",
    "ReplyShape",
    "answered_reply",
    "answered_schema",
    "ask_reply",
    "edits_reply",
    "edits_schema",
    "parse_answered",
    "parse_edits",
    "parse_questions",
    "parse_subject",
    "questions_reply",
    "questions_schema",
    "subject_reply",
    "subject_schema",
]

T = TypeVar("T")

# A question: one line that starts with a capital letter and ends with its only "?" (no quote,
# backslash, bracket or brace: no escapes for the grammar to get wrong, no JSON debris, no second
# question run on), 10 to 150 characters: at most about 40 tokens, so
# a reply of n questions always fits MAX_TOKENS_PER_QUESTION * n + 40 tokens.
MAX_QUESTION_CHARS = 150
QUESTION_PATTERN = '^[A-Z][^"?{}\\[\\]\\\\\\n]{8,' + str(MAX_QUESTION_CHARS - 2) + "}[?]$"
MAX_TOKENS_PER_QUESTION = 64
_QUESTION: dict[str, Any] = {"type": "string", "pattern": QUESTION_PATTERN}
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def questions_schema(n: int, key: str = "questions") -> dict[str, Any]:
    """``{"questions": [n questions]}``."""
    return {
        "type": "object",
        "properties": {key: {"type": "array", "items": _QUESTION, "minItems": n, "maxItems": n}},
        "required": [key],
        "additionalProperties": False,
    }


# An in-scope candidate's answer, copied from its sentence: one line of at most 80 characters, no
# quote or brace (nothing for the grammar to escape); asked before its question, so the model
# chooses what the sentence answers first (gen_offline_in_scope).
MAX_ANSWER_CHARS = 80
_ANSWER: dict[str, Any] = {
    "type": "string",
    "pattern": '^[^ "{}\\[\\]\\\\\\n][^"{}\\[\\]\\\\\\n]{0,' + str(MAX_ANSWER_CHARS - 1) + "}$",
}


def answered_schema() -> dict[str, Any]:
    """``{"answer": words of the sentence, "question": a question}``, the answer first."""
    return {
        "type": "object",
        "properties": {"answer": _ANSWER, "question": _QUESTION},
        "required": ["answer", "question"],
        "additionalProperties": False,
    }


# A document's subject: a few words on one line (a name, "this granola"), no quote or brace.
MAX_SUBJECT_CHARS = 80
SUBJECT_TOKENS = 32
SUBJECT_KIND_TOKENS = 16  # more, for the kind asked with it
_SUBJECT_PATTERN = '^[A-Za-z0-9][^"{}\\[\\]\\\\\\n]{0,' + str(MAX_SUBJECT_CHARS - 1) + "}$"
_SUBJECT: dict[str, Any] = {"type": "string", "pattern": _SUBJECT_PATTERN}


def subject_schema() -> dict[str, Any]:
    """``{"subject": "a few words", "kind": one of SUBJECT_KINDS}``."""
    properties: dict[str, Any] = {
        "subject": _SUBJECT,
        "kind": {"type": "string", "enum": list(SUBJECT_KINDS)},
    }
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def parse_subject(text: str, *, truncated: bool = False, lenient: bool = False) -> tuple[str, str]:
    """The subject a reply names (one line of 1 to 8 words) and its kind: one of
    :data:`SUBJECT_KINDS`, ``"other"`` for a missing or unknown one (the kind only picks hints: a
    usable subject is not thrown away for it)."""
    if truncated and not lenient:
        raise ReplyParseError("truncated", "the reply was cut at the token cap", reply=text)
    reply = _object(text, lenient)
    value = reply.get("subject")
    subject = " ".join(value.split()).strip(" .") if isinstance(value, str) else ""
    if not subject or len(subject) > MAX_SUBJECT_CHARS or len(subject.split()) > 8 or '"' in subject:
        raise ReplyParseError("no_subject", "the reply names no subject of a few words", reply=text)
    kind = reply.get("kind")
    kind = kind.strip().lower() if isinstance(kind, str) else ""
    return subject, kind if kind in SUBJECT_KINDS else "other"


def edits_schema(kinds: Sequence[str]) -> dict[str, Any]:
    """``{kind: question}`` for each edit kind, in order."""
    return {
        "type": "object",
        "properties": {k: _QUESTION for k in kinds},
        "required": list(kinds),
        "additionalProperties": False,
    }


def _object(text: str, lenient: bool) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        found = _OBJECT.search(text) if lenient else None
        if found is None:
            raise ReplyParseError("not_json", "the reply is not a JSON object", reply=text) from None
        try:
            value = json.loads(found.group())
        except json.JSONDecodeError:
            raise ReplyParseError("not_json", "the reply holds no valid JSON object", reply=text) from None
    if not isinstance(value, dict):
        raise ReplyParseError(
            "not_json", f"the reply is JSON {type(value).__name__}, not an object", reply=text
        )
    return value


def _question(value: Any) -> str | None:
    """``value`` as a clean one-line question, or ``None`` when it is not one."""
    if not isinstance(value, str):
        return None
    q = " ".join(value.split())
    return q if len(q) >= 10 and q.endswith("?") and "?" not in q[:-1] and q[0].isalnum() else None


def parse_questions(
    text: str, n: int, *, key: str = "questions", truncated: bool = False, lenient: bool = False
) -> list[str]:
    """Exactly ``n`` questions under ``key`` (strict); ``lenient`` keeps the usable ones (at least one)."""
    if truncated and not lenient:
        raise ReplyParseError("truncated", "the reply was cut at the token cap", reply=text)
    items = _object(text, lenient).get(key)
    if not isinstance(items, list):
        raise ReplyParseError("no_list", f"the reply has no list under {key!r}", reply=text)
    questions = [_question(v) for v in items]
    usable = [q for q in questions if q is not None]
    if lenient and usable:
        return usable[:n]
    if len(questions) != n:
        raise ReplyParseError("wrong_count", f"expected {n} questions, got {len(questions)}", reply=text)
    if len(usable) != n:
        raise ReplyParseError("not_a_question", "an item is not a one-line question", reply=text)
    return usable


def parse_answered(text: str, *, truncated: bool = False, lenient: bool = False) -> tuple[str, str]:
    """The answer (one line, stripped) and the question of a reply to ``answered_schema``; ``lenient``
    (after the firmer retry) takes the JSON object out of surrounding text."""
    if truncated and not lenient:
        raise ReplyParseError("truncated", "the reply was cut at the token cap", reply=text)
    obj = _object(text, lenient)
    question = _question(obj.get("question"))
    if question is None:
        raise ReplyParseError("not_a_question", "the reply has no one-line question", reply=text)
    value = obj.get("answer")
    answer = " ".join(value.split()).strip(" .") if isinstance(value, str) else ""
    if not answer or len(answer) > MAX_ANSWER_CHARS:
        raise ReplyParseError("no_answer", "the reply gives no answer of one short line", reply=text)
    return answer, question


def parse_edits(
    text: str, kinds: Sequence[str], *, truncated: bool = False, lenient: bool = False
) -> dict[str, str]:
    """One question per edit kind (strict); ``lenient`` keeps the kinds with a usable question."""
    if truncated and not lenient:
        raise ReplyParseError("truncated", "the reply was cut at the token cap", reply=text)
    obj = _object(text, lenient)
    edits = {k: q for k in kinds if (q := _question(obj.get(k))) is not None}
    if edits and (lenient or len(edits) == len(kinds)):
        return edits
    missing = [k for k in kinds if k not in edits]
    raise ReplyParseError("missing_edit", f"no usable question for {missing}", reply=text)


@dataclass(frozen=True)
class ReplyShape(Generic[T]):
    """A JSON reply the offline modes ask for: the ``schema`` it is held to, its ``parse``
    (``(text, truncated, lenient)`` -> the value) and its token cap."""

    schema: dict[str, Any]
    parse: Callable[[str, bool, bool], T]
    max_tokens: int


def questions_reply(n: int) -> ReplyShape[list[str]]:
    """``n`` questions (:func:`questions_schema`, :func:`parse_questions`)."""
    return ReplyShape(
        questions_schema(n),
        lambda text, truncated, lenient: parse_questions(text, n, truncated=truncated, lenient=lenient),
        MAX_TOKENS_PER_QUESTION * n + 40,
    )


def answered_reply() -> ReplyShape[tuple[str, str]]:
    """An answer copied from a sentence and its question (:func:`answered_schema`)."""
    return ReplyShape(
        answered_schema(),
        lambda text, truncated, lenient: parse_answered(text, truncated=truncated, lenient=lenient),
        MAX_TOKENS_PER_QUESTION + MAX_ANSWER_CHARS // 2 + 40,
    )


def subject_reply() -> ReplyShape[tuple[str, str]]:
    """A document's subject and its kind (:func:`subject_schema`)."""
    return ReplyShape(
        subject_schema(),
        lambda text, truncated, lenient: parse_subject(text, truncated=truncated, lenient=lenient),
        SUBJECT_TOKENS + SUBJECT_KIND_TOKENS,
    )


def edits_reply(kinds: Sequence[str]) -> ReplyShape[dict[str, str]]:
    """One rewritten question per edit kind (:func:`edits_schema`)."""
    return ReplyShape(
        edits_schema(kinds),
        lambda text, truncated, lenient: parse_edits(text, kinds, truncated=truncated, lenient=lenient),
        MAX_TOKENS_PER_QUESTION * len(kinds) + 40,
    )


async def ask_reply(
    ctx: DocumentContext,
    step: str,
    template: str,
    shape: ReplyShape[T],
    sampling: Sampling | None = None,
    **variables: object,
) -> tuple[T, CachedReply] | None:
    """``template`` rendered with ``variables``, asked of ``ctx``'s model held to ``shape``'s schema
    and read by its parser (:meth:`~scopeguard.generation._context.DocumentContext.ask`: retried
    firmly, the last retry read leniently); ``None`` when no reply was usable."""
    return await ctx.ask(
        step,
        template,
        lambda r, lenient: shape.parse(r.text, r.truncated, lenient),
        max_tokens=shape.max_tokens,
        sampling=sampling,
        schema=shape.schema,
        **variables,
    )
