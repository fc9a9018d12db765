"""A bad ``Document`` is an :class:`InputError` with a clear message, never a pydantic traceback."""

from __future__ import annotations

from typing import Any

import pytest

from scopeguard import Document, InputError
from scopeguard.types import as_documents


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"text": None}, "text must be a string, got NoneType"),
        ({"text": 42}, "text must be a string, got int"),
        ({"text": b"bytes"}, "text must be a string, got bytes"),
        ({}, "needs text="),
        ({"text": "a", "id": 7}, "id must be a string, got int"),
        ({"text": "a", "metadata": ["x"]}, "metadata must be a dict, got list"),
        ({"text": "a", "txt": "b"}, "unknown field(s) txt"),
    ],
)
def test_bad_document_is_an_input_error(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError) as exc:
        Document(**kwargs)
    assert message in str(exc.value)
    assert isinstance(exc.value, ValueError)


def test_good_documents_and_stored_records_still_validate() -> None:
    doc = Document(text="The ferry sails at noon.", id="ferry", metadata={"topic": "transport"})
    assert doc == Document.model_validate(doc.model_dump())
    assert doc.model_copy(update={"id": "f2"}).id == "f2"


def test_as_documents_reports_non_string_items() -> None:
    with pytest.raises(InputError, match="got NoneType"):
        as_documents(["fine", None])  # type: ignore[list-item]
