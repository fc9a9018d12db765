"""The HTTP API's request and response records (pydantic; they make the OpenAPI schema at /docs)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from scopeguard.errors import ErrorKind
from scopeguard.types import Action, Document, Verdict


class DocumentIn(BaseModel):
    """A retrieved document: its text, and optionally an id and metadata."""

    model_config = ConfigDict(extra="forbid")

    text: str
    id: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)


Documents = list[str | DocumentIn]


class CheckRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(..., description="The user's question.")
    documents: Documents = Field(..., description="The retrieved documents: strings or {text, id, metadata}.")


class CheckBatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[CheckRequest]


class CheckBatchResponse(BaseModel):
    verdicts: list[Verdict]


class AnswerRequest(CheckRequest):
    generate: bool = Field(
        True,
        description="Answer in-scope questions with the server's LLM (--upstream); false, or no LLM "
        "configured: `response` is null for them and the caller answers.",
    )


class AnswerResponse(BaseModel):
    """:class:`scopeguard.GuardResult` without the documents (the caller sent them)."""

    question: str
    verdict: Verdict
    action: Action
    response: str | None = None
    failed_closed: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)


class PrereadRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    documents: Documents


class PrereadResponse(BaseModel):
    read: int = Field(..., description="Documents read now.")
    kept: int = Field(..., description="Documents this server had read already (not read again).")
    passages: int = Field(..., description="Passages the reading model read now (0: no reading stage).")


class DetectorsResponse(BaseModel):
    detectors: list[str]
    active: str
    policy: str


class ErrorDetail(BaseModel):
    message: str
    type: str
    #: the failure in scopeguard's one error vocabulary (:data:`scopeguard.errors.ErrorKind`)
    kind: ErrorKind | None = None
    limit: str | None = None
    request_id: str | None = None


class ErrorResponse(BaseModel):
    """Every error: ``error`` says what happened; a fail-closed 504 also carries the verdict or result."""

    error: ErrorDetail
    verdict: Verdict | None = None
    result: AnswerResponse | None = None


def to_documents(items: Documents) -> list[Document]:
    return [
        Document(text=d, id=f"doc{i}") if isinstance(d, str) else Document(**d.model_dump())
        for i, d in enumerate(items)
    ]
