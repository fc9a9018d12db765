"""Clients of ``scopeguard serve``: a remote guard with the :class:`~scopeguard.Guard` interface.

>>> from scopeguard.client import GuardClient
>>> guard = GuardClient("http://127.0.0.1:8000", api_key=None)
>>> guard.check("Who won?", ["...retrieved text..."]).label
>>> guard.answer("Who won?", ["..."]).response

:class:`GuardClient` has ``check``/``acheck``/``answer``/``aanswer``/``decide``/``hedging`` and
``preread``/``preread_in_background`` (``POST /v1/preread``) as a :class:`~scopeguard.Guard` does
(and ``detector.name``, ``policy``, ``hedge``, ``on_error``, ``concurrency``), so code written for
one takes the other: the LangChain and LlamaIndex integrations accept either.
:class:`AsyncGuardClient` is the same with ``async`` ``check``/``answer``.

Failures follow ``on_error`` as the guard's do: a server that cannot be reached, is busy (429),
answers 5xx or runs out of its deadline gives an ``unknown`` verdict with ``error`` (``check``)
or a refusal with ``failed_closed=True`` (``answer``); ``"raise"`` raises
:class:`~scopeguard.errors.LLMConnectionError` instead. A request the server rejects (422) raises
:class:`~scopeguard.errors.InputError`, a wrong API key (401)
:class:`~scopeguard.errors.ConfigurationError`. ``answer(..., responder=fn)`` lets the server
decide and ``fn(question, documents)`` answer in-scope questions locally; with
``speculative=True`` (the client's, or ``answer``'s) ``fn`` starts beside the server's check and its
answer is held until the verdict: used when the server leaves the answer to the caller, dropped
otherwise (a refusal, a failed request), as :class:`~scopeguard.Guard` does
(``result.metadata["speculation"]``).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from scopeguard._optional import require
from scopeguard._prereading import PrereadJob, preread_documents
from scopeguard._speculation import (
    AsyncHeldAnswer,
    Held,
    HeldAnswer,
    asettled,
    astart_answer,
    settled,
    start_answer,
)
from scopeguard.errors import ConfigurationError, InputError, LLMConnectionError, ScopeGuardError, error_kind
from scopeguard.guard import Guard, OnError, _check_on_error
from scopeguard.policies import HedgePolicy, Policy, RefusePolicy, Responder, get_policy, with_caveat
from scopeguard.types import Action, Document, GuardResult, Verdict, as_documents, validate_question

if TYPE_CHECKING:
    from scopeguard.llm.base import ChatModel

__all__ = ["AsyncGuardClient", "GuardClient", "RemoteDetector"]

Docs = str | Document | Iterable[str | Document]
H = TypeVar("H", bound=Held)


@dataclass(frozen=True)
class RemoteDetector:
    """The server's detector, as far as a client knows it: its name."""

    name: str


class _Protocol:
    """Requests and replies shared by the sync and async clients (no I/O here but the client).

    Args:
        base_url: the server, e.g. ``http://127.0.0.1:8000``.
        api_key: sent as ``Authorization: Bearer``.
        timeout: seconds for one HTTP request (the server's deadline bounds the work).
        on_error: what a failed request leads to (see the module docstring).
        concurrency: the bound integrations use for per-document checks.
        transport: an ``httpx`` transport (tests).
        speculative: start ``answer``'s ``responder`` beside the server's check (see the module
            docstring); ``answer(..., speculative=)`` overrides it.
    """

    _HTTPX_CLIENT = "Client"

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        on_error: OnError = "fail_closed",
        concurrency: int = 4,
        transport: Any = None,
        speculative: bool = False,
    ) -> None:
        _check_on_error(on_error)
        self.httpx = require("httpx", extra="serve", feature="scopeguard.client")
        self.base_url = base_url.rstrip("/")
        self.on_error: OnError = on_error
        self.concurrency = concurrency
        self.speculative = speculative
        self.llm = None  # the server's LLM answers (``answer``); none on this side
        self.answer_template = "rag_basic"
        self._api_key, self._timeout = api_key, timeout
        self._options: dict[str, Any] = {
            "base_url": self.base_url,
            "timeout": timeout,
            "headers": {"Authorization": f"Bearer {api_key}"} if api_key else {},
        }
        self._client: Any = getattr(self.httpx, self._HTTPX_CLIENT)(**self._options, transport=transport)
        self._info: dict[str, Any] | None = None

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}({self.base_url!r})"

    @staticmethod
    def _body(question: str, documents: Docs) -> dict[str, Any]:
        docs = as_documents(documents)
        return {
            "question": validate_question(question),
            "documents": [d.model_dump(mode="json") for d in docs],
        }

    def _failure(self, what: str) -> LLMConnectionError:
        return LLMConnectionError(f"the guard server {self.base_url} {what}", endpoint=self.base_url)

    def _reply(self, response: Any) -> dict[str, Any]:
        """The JSON of a reply the caller can use: 200, or a 504 carrying the fail-closed record."""
        status = response.status_code
        try:
            body = response.json()
        except ValueError:
            raise self._failure(f"sent a reply that is not JSON (HTTP {status})") from None
        if status in (200, 504) and isinstance(body, dict):
            return body
        message = (body.get("error") or {}).get("message", "") if isinstance(body, dict) else ""
        if status == 401:
            raise ConfigurationError(f"the guard server {self.base_url} refused the API key: {message}")
        if status in (413, 422):
            raise InputError(f"the guard server rejected the request: {message}")
        raise self._failure(f"answered HTTP {status}: {message}")

    def _verdict(self, body: dict[str, Any]) -> Verdict:
        return Verdict.model_validate(body.get("verdict", body))

    def _result(self, body: dict[str, Any], question: str, documents: Docs) -> GuardResult:
        data = body.get("result", body)
        return GuardResult.model_validate({**data, "documents": as_documents(documents)})

    def _failed_check(self, exc: ScopeGuardError) -> Verdict:
        if self.on_error == "raise" or not isinstance(exc, LLMConnectionError):
            raise exc
        return Verdict(
            label="unknown", detector=self.detector.name, error=str(exc), error_kind=error_kind(exc)
        )

    def _answer_request(
        self,
        start: Callable[[ChatModel | None, str, str, Sequence[Document], Responder | None], H],
        question: str,
        documents: Docs,
        responder: Responder | None,
        speculative: bool | None,
    ) -> tuple[dict[str, Any], H | None]:
        """The ``POST /v1/answer`` body (the server writes the answer unless ``responder`` does)
        and, when speculating, ``responder``'s answer started beside the server's check by
        ``start`` (:func:`start_answer` on a thread, :func:`astart_answer` as a task)."""
        body = {**self._body(question, documents), "generate": responder is None}
        if responder is None or not (self.speculative if speculative is None else speculative):
            return body, None
        return body, start(None, "", body["question"], as_documents(documents), responder)

    def _failed_answer(self, exc: ScopeGuardError, question: str, documents: Docs) -> GuardResult:
        verdict = self._failed_check(exc)
        refusal = RefusePolicy().apply(_context(question, documents, verdict))
        return GuardResult(
            question=question,
            verdict=verdict,
            action=refusal.action,
            response=refusal.response,
            documents=as_documents(documents),
            failed_closed=True,
            metadata={"error": str(exc), "error_stage": "remote"},
        )

    def decide(self, verdict: Verdict) -> tuple[bool, bool]:
        """``(out_of_scope, failed_closed)`` under this client's ``on_error``, as
        :meth:`scopeguard.Guard.decide`."""
        return Guard.decide(cast(Any, self), verdict)

    @property
    def detector(self) -> RemoteDetector:
        return RemoteDetector(str((self._info or {}).get("active", "remote")))

    @property
    def policy(self) -> Policy:
        """The server's policy, built here (``refuse``/``clarify``/``flag`` need no LLM)."""
        return get_policy(str(self._describe().get("policy", "refuse")))

    @property
    def hedge(self) -> Policy:
        """The policy for in-scope verdicts in the server's hedge band when the caller answers (the
        integrations): :class:`~scopeguard.policies.HedgePolicy`, the answer and the caveat line."""
        return HedgePolicy()

    def hedging(self, verdict: Verdict) -> Policy | None:
        """The policy that answers ``verdict`` with a caveat (:attr:`hedge` for an in-scope verdict
        in the hedge band, else ``None``), as :meth:`scopeguard.Guard.hedging`."""
        return Guard.hedging(cast(Any, self), verdict)

    def _describe(self) -> dict[str, Any]:
        raise NotImplementedError


def _context(question: str, documents: Docs, verdict: Verdict) -> Any:
    from scopeguard.policies import PolicyContext

    return PolicyContext(question, as_documents(documents), verdict)


def _caller_answers(result: GuardResult) -> bool:
    """The server decided to answer but left the answer to the caller (``generate: false``)."""
    return result.response is None and result.action in (Action.ANSWERED, Action.HEDGED, Action.FLAGGED)


def _callers_answer(result: GuardResult, text: str) -> GuardResult:
    """``result`` with the caller's answer (a hedged one followed by the caveat line)."""
    return result.model_copy(
        update={"response": with_caveat(text) if result.action is Action.HEDGED else text}
    )


class GuardClient(_Protocol):
    """A remote guard over HTTP with the sync and async methods of :class:`~scopeguard.Guard`
    (arguments: see the module's ``_Protocol``: ``base_url``, ``api_key``, ``timeout``,
    ``on_error``, ``concurrency``, ``transport``)."""

    _async_clients: weakref.WeakKeyDictionary[Any, AsyncGuardClient] | None = None

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._reply(self._client.post(path, json=body))
        except self.httpx.HTTPError as exc:
            raise self._failure(f"could not be reached: {type(exc).__name__}: {exc}") from None

    def _describe(self) -> dict[str, Any]:
        if self._info is None:
            try:
                self._info = self._reply(self._client.get("/v1/detectors"))
            except self.httpx.HTTPError as exc:
                raise self._failure(f"could not be reached: {type(exc).__name__}") from None
        return self._info

    def check(self, question: str, documents: Docs) -> Verdict:
        body = self._body(question, documents)
        try:
            return self._verdict(self._post("/v1/check", body))
        except ScopeGuardError as exc:
            return self._failed_check(exc)

    def answer(
        self,
        question: str,
        documents: Docs,
        *,
        responder: Responder | None = None,
        speculative: bool | None = None,
    ) -> GuardResult:
        docs = as_documents(documents)  # once: a generator passed as documents is read once
        body, held = self._answer_request(start_answer, question, docs, responder, speculative)
        return settled(held, lambda: self._answer(body, question, docs, responder, held))

    def _answer(
        self,
        body: dict[str, Any],
        question: str,
        documents: Docs,
        responder: Responder | None,
        held: HeldAnswer[str] | None,
    ) -> GuardResult:
        try:
            result = self._result(self._post("/v1/answer", body), question, documents)
        except ScopeGuardError as exc:
            return self._failed_answer(exc, question, documents)
        if responder is not None and _caller_answers(result):
            text = held.result() if held is not None else responder(result.question, result.documents)
            return _callers_answer(result, text)
        return result

    def _aclient(self) -> AsyncGuardClient:
        loop = asyncio.get_running_loop()
        if self._async_clients is None:
            self._async_clients = weakref.WeakKeyDictionary()
        client = self._async_clients.get(loop)
        if client is None:
            client = AsyncGuardClient(
                self.base_url,
                api_key=self._api_key,
                timeout=self._timeout,
                on_error=self.on_error,
                concurrency=self.concurrency,
                speculative=self.speculative,
            )
            client._info = self._info
            self._async_clients[loop] = client
        return client

    async def acheck(self, question: str, documents: Docs) -> Verdict:
        return await self._aclient().check(question, documents)

    def preread(self, documents: Docs, *, progress: bool | None = None) -> int:
        """Have the server read ``documents`` ahead of the questions (``POST /v1/preread``, one
        request a document, within its ``max_documents``) and keep its reader's state; returns the
        passages it read (a document it had read before is not read again). Failures raise."""
        bodies = ({"documents": [d.model_dump(mode="json")]} for d in preread_documents(documents))
        return sum(int(self._post("/v1/preread", body)["passages"]) for body in bodies)

    def preread_in_background(self, documents: Docs) -> PrereadJob:
        """:meth:`preread` on a daemon thread, as :meth:`scopeguard.Guard.preread_in_background`
        (the server reads between its checks)."""
        return PrereadJob(lambda doc: self.preread([doc]), preread_documents(documents))

    async def aanswer(
        self,
        question: str,
        documents: Docs,
        *,
        responder: Responder | None = None,
        speculative: bool | None = None,
    ) -> GuardResult:
        return await self._aclient().answer(question, documents, responder=responder, speculative=speculative)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> GuardClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncGuardClient(_Protocol):
    """:class:`GuardClient` with ``async`` ``check`` and ``answer`` (one ``httpx.AsyncClient``)."""

    _HTTPX_CLIENT = "AsyncClient"

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._reply(await self._client.post(path, json=body))
        except self.httpx.HTTPError as exc:
            raise self._failure(f"could not be reached: {type(exc).__name__}: {exc}") from None

    def _describe(self) -> dict[str, Any]:
        if self._info is None:
            raise ConfigurationError("call `await client.describe()` first to learn the server's policy")
        return self._info

    async def describe(self) -> dict[str, Any]:
        """The server's detectors, active detector and policy (``GET /v1/detectors``)."""
        try:
            self._info = self._reply(await self._client.get("/v1/detectors"))
        except self.httpx.HTTPError as exc:
            raise self._failure(f"could not be reached: {type(exc).__name__}") from None
        return self._info

    async def check(self, question: str, documents: Docs) -> Verdict:
        body = self._body(question, documents)
        try:
            return self._verdict(await self._post("/v1/check", body))
        except ScopeGuardError as exc:
            return self._failed_check(exc)

    async def answer(
        self,
        question: str,
        documents: Docs,
        *,
        responder: Responder | None = None,
        speculative: bool | None = None,
    ) -> GuardResult:
        docs = as_documents(documents)  # once: a generator passed as documents is read once
        body, held = self._answer_request(astart_answer, question, docs, responder, speculative)
        return await asettled(held, self._answer(body, question, docs, responder, held))

    async def _answer(
        self,
        body: dict[str, Any],
        question: str,
        documents: Docs,
        responder: Responder | None,
        held: AsyncHeldAnswer[str] | None,
    ) -> GuardResult:
        try:
            result = self._result(await self._post("/v1/answer", body), question, documents)
        except ScopeGuardError as exc:
            return self._failed_answer(exc, question, documents)
        if responder is not None and _caller_answers(result):
            if held is not None:
                return _callers_answer(result, await held.result())
            text = await asyncio.to_thread(responder, result.question, result.documents)
            return _callers_answer(result, text)
        return result

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> AsyncGuardClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
