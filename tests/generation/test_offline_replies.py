"""The offline modes' JSON replies: strict and lenient parsing, and the schema reaching llama.cpp."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from scopeguard.generation import ReplyCache
from scopeguard.generation.cache import RecordingChatModel
from scopeguard.generation.offline._replies import (
    QUESTION_PATTERN,
    answered_schema,
    edits_schema,
    parse_answered,
    parse_edits,
    parse_questions,
    parse_subject,
    questions_schema,
    subject_schema,
)
from scopeguard.generation.offline._vocabulary import SUBJECT_KINDS
from scopeguard.generation.parsers import ReplyParseError
from scopeguard.llm.base import Completion, Prompt
from scopeguard.testing import ScriptedChatModel

Q1, Q2 = "When did the council approve the plan?", "Who paid for the new pier?"


def test_questions_strict_and_lenient() -> None:
    assert parse_questions(json.dumps({"questions": [Q1, Q2]}), 2) == [Q1, Q2]
    for bad, reason in (
        ("Sure, here they are", "not_json"),
        (json.dumps([Q1, Q2]), "not_json"),
        (json.dumps({"qs": [Q1]}), "no_list"),
        (json.dumps({"questions": [Q1]}), "wrong_count"),
        (json.dumps({"questions": [Q1, "The plan was approved."]}), "not_a_question"),
    ):
        with pytest.raises(ReplyParseError) as err:
            parse_questions(bad, 2)
        assert err.value.reason == reason
    # lenient (after the firm retry): the JSON object inside text, the usable items only
    wrapped = "Here:\n" + json.dumps({"questions": [Q1, "Not a question."]}) + "\nDone."
    assert parse_questions(wrapped, 2, lenient=True) == [Q1]
    with pytest.raises(ReplyParseError, match="truncated"):
        parse_questions(json.dumps({"questions": [Q1, Q2]}), 2, truncated=True)


def test_edits_strict_and_lenient() -> None:
    kinds = ["negation", "entity_swap"]
    reply = json.dumps({"negation": Q1, "entity_swap": Q2})
    assert parse_edits(reply, kinds) == {"negation": Q1, "entity_swap": Q2}
    partial = json.dumps({"negation": Q1, "entity_swap": ""})
    with pytest.raises(ReplyParseError, match="entity_swap"):
        parse_edits(partial, kinds)
    assert parse_edits(partial, kinds, lenient=True) == {"negation": Q1}


def test_subject_with_its_kind() -> None:
    named = json.dumps({"subject": " the Marlin ferry. ", "kind": "Product"})
    assert parse_subject(named) == ("the Marlin ferry", "product")
    # an unknown or missing kind does not cost a usable subject: its hints are the one list
    odd = json.dumps({"subject": "the Marlin ferry", "kind": "vehicle"})
    assert parse_subject(odd) == ("the Marlin ferry", "other")
    assert parse_subject(json.dumps({"subject": "the Marlin"})) == ("the Marlin", "other")
    with pytest.raises(ReplyParseError, match="no subject"):
        parse_subject(json.dumps({"subject": "", "kind": "film"}), lenient=True)
    kinds = subject_schema()
    assert kinds["required"] == ["subject", "kind"] and kinds["properties"]["kind"]["enum"] == list(
        SUBJECT_KINDS
    )


def test_an_answer_then_its_question() -> None:
    reply = json.dumps({"answer": " on Monday evening. ", "question": Q1})
    assert parse_answered(reply) == ("on Monday evening", Q1)
    for bad, reason in (
        (json.dumps({"answer": "Monday", "question": "The plan was approved."}), "not_a_question"),
        (json.dumps({"answer": "", "question": Q1}), "no_answer"),
        (json.dumps({"answer": "x" * 81, "question": Q1}), "no_answer"),
        (json.dumps({"questions": [Q1]}), "not_a_question"),
    ):
        with pytest.raises(ReplyParseError) as err:
            parse_answered(bad)
        assert err.value.reason == reason
    assert parse_answered("Here: " + reply, lenient=True) == ("on Monday evening", Q1)
    with pytest.raises(ReplyParseError, match="truncated"):
        parse_answered(reply, truncated=True)
    # the answer is asked first, so the writer picks what the sentence answers before the question
    schema = answered_schema()
    assert list(schema["properties"]) == schema["required"] == ["answer", "question"]
    pattern = schema["properties"]["answer"]["pattern"]
    assert re.match(pattern, "£5 a night")
    assert not re.match(pattern, " Monday") and not re.match(pattern, 'a "b"')


def test_the_schemas_describe_what_the_parsers_accept() -> None:
    assert re.match(QUESTION_PATTERN, Q1) and not re.match(QUESTION_PATTERN, 'Say "hi"?')
    assert not re.match(QUESTION_PATTERN, "Who is Ann Lee? What does she do?")
    assert not re.match(QUESTION_PATTERN, "x" * 200 + "?")
    schema = questions_schema(3)["properties"]["questions"]
    assert (schema["minItems"], schema["maxItems"]) == (3, 3)
    assert edits_schema(["antonym"])["required"] == ["antonym"]


class _GrammarModel(ScriptedChatModel):
    """A scripted backend that takes a JSON schema, as the llama.cpp one does."""

    supports_json_schema = True

    def __init__(self) -> None:
        super().__init__(lambda p: json.dumps({"questions": [Q1]}), model="grammar")
        self.schemas: list[Any] = []

    def complete(self, prompt: Prompt, *, json_schema: Any = None, **kw: Any) -> Completion:  # type: ignore[override]
        self.schemas.append(json_schema)
        return super().complete(prompt, **kw)


def test_the_schema_reaches_a_backend_that_takes_it_and_is_part_of_the_cache_key() -> None:
    backend = _GrammarModel()
    cache = ReplyCache()
    schema = questions_schema(1)
    first = RecordingChatModel(backend, cache).constrained(schema).call("Ask.")
    resumed = RecordingChatModel(backend, cache)  # a resumed run on the same cache
    again = resumed.constrained(schema).call("Ask.")
    plain = resumed.call("Ask.")
    assert backend.schemas == [
        schema,
        None,
    ]  # the constrained repeat came from the cache, the plain call did not
    assert first.text == again.text and again.cached and not plain.cached
    # a backend without schema support is called as it is (its prompt asks for JSON anyway)
    other = ScriptedChatModel([json.dumps({"questions": [Q1]})])
    assert RecordingChatModel(other, ReplyCache()).constrained(schema).call("Ask.").text.startswith("{")
