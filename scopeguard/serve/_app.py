"""The FastAPI application: the check-only API, the guarded proxy, health, readiness and metrics."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from scopeguard._optional import require
from scopeguard.detection.detectors.base import Detector
from scopeguard.detection.detectors.registry import available_detectors
from scopeguard.errors import ConfigurationError, InputError, LLMError, LLMTimeoutError, ScopeGuardError
from scopeguard.serve._admission import Rejected
from scopeguard.serve._config import ServeConfig
from scopeguard.serve._limits import LimitError, checked_documents
from scopeguard.serve._middleware import GuardrailsMiddleware, error_body
from scopeguard.serve._proxy import add_proxy_routes
from scopeguard.serve._runtime import Runtime
from scopeguard.serve._schemas import (
    AnswerRequest,
    AnswerResponse,
    CheckBatchRequest,
    CheckBatchResponse,
    CheckRequest,
    DetectorsResponse,
    ErrorResponse,
    PrereadRequest,
    PrereadResponse,
)
from scopeguard.types import Document, Verdict, validate_question

if TYPE_CHECKING:
    from scopeguard.detection.profile import CalibrationProfile

logger = logging.getLogger(__name__)

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (401, 413, 422, 429, 502, 503, 504)
}


def calibration_info(config: ServeConfig, profile: CalibrationProfile | None) -> dict[str, Any] | None:
    """What ``/readyz`` and the start-up log say of the calibration profile (``None`` without one)."""
    if profile is None:
        return None
    return {
        "path": None if config.calibration is None else str(config.calibration),
        "detector": profile.detector,
        "threshold": profile.threshold,
        "hedge_from": profile.hedge_from,
        "budget": profile.budget,
        "summary": profile.summary(),
    }


def create_app(config: ServeConfig, *, detector: Detector | None = None) -> Any:
    """The ASGI app for ``config`` (``detector``: an instance to use instead of ``config.detector``,
    for example a :class:`scopeguard.testing.ScriptedDetector`). Models load in the background at
    start-up: ``/healthz`` answers at once, ``/readyz`` once they are loaded."""
    fastapi = require("fastapi", extra="serve", feature="scopeguard serve")
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response

    runtime = Runtime(config, detector=detector)  # a profile for another detector raises here
    calibration = calibration_info(config, runtime.guard.calibration)
    if calibration is not None:
        logger.info("calibration profile: %s", calibration["summary"], extra={"calibration": calibration})
        runtime.metrics.calibration.labels(calibration["detector"], f"{calibration['budget']:g}").set(
            calibration["threshold"]
        )

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(runtime.executor)  # detectors' to_thread calls run on the workers
        loader = loop.run_in_executor(None, runtime.start)  # models, then the --preread corpus
        watcher = asyncio.create_task(runtime.watch_loop())  # the loop's lag, for admission
        try:
            yield
        finally:
            watcher.cancel()
            loader.cancel()
            runtime.close()

    app = fastapi.FastAPI(
        title="scopeguard",
        summary="Checks that a question is in scope of the retrieved documents before an LLM answers.",
        lifespan=lifespan,
        responses=_ERRORS,
    )
    app.state.runtime = runtime

    def fail(
        status: int, message: str, error_type: str, headers: dict[str, str] | None = None, **extra: Any
    ) -> Any:
        return Response(error_body(message, error_type, **extra), status, headers, "application/json")

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Any, exc: Any) -> Any:
        problems = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        summary = "; ".join(f"{'.'.join(str(p) for p in d['loc'])}: {d['msg']}" for d in problems)
        return JSONResponse(
            {
                "error": {
                    "message": f"invalid request: {summary}",
                    "type": "invalid_request",
                    "details": problems,
                }
            },
            422,
        )

    @app.exception_handler(LimitError)
    async def _limit(request: Any, exc: LimitError) -> Any:
        runtime.metrics.rejected.labels("limit").inc()
        return fail(422, str(exc), "limit_exceeded", limit=exc.limit)

    @app.exception_handler(Rejected)
    async def _busy(request: Any, exc: Rejected) -> Any:
        seconds = str(exc.retry_after)
        return fail(429, f"{exc}; retry after {seconds}s", exc.error_type, {"Retry-After": seconds})

    @app.exception_handler(ScopeGuardError)
    async def _scopeguard(request: Any, exc: ScopeGuardError) -> Any:
        if isinstance(exc, InputError | ConfigurationError):
            return fail(422, str(exc), "invalid_request", kind=exc.kind)
        if isinstance(exc, LLMTimeoutError):
            return fail(504, str(exc), "deadline_exceeded", kind=exc.kind)
        if isinstance(exc, LLMError):
            return fail(502, str(exc), "upstream_error", kind=exc.kind)
        logger.warning("request failed: %s", exc)
        return fail(500, str(exc), "scopeguard_error", kind=exc.kind)

    @app.exception_handler(Exception)
    async def _internal(request: Any, exc: Exception) -> Any:
        logger.error("internal error", exc_info=exc)  # the trace goes to the log, never to the client
        return fail(
            500, "internal error (see the server log for this request id)", "internal_error", kind="internal"
        )

    def timed_out(verdict: Verdict | None = None, result: AnswerResponse | None = None) -> Any:
        body = ErrorResponse.model_validate(
            {
                "error": {
                    "message": f"the request ran past its deadline of {config.deadline:g}s; "
                    f"the guard failed closed ({config.on_error})",
                    "type": "deadline_exceeded",
                    "kind": "timeout",
                },
                "verdict": verdict,
                "result": result,
            }
        )
        return JSONResponse(body.model_dump(mode="json", exclude_none=True), 504)

    @app.post("/v1/check", response_model=Verdict, summary="The verdict for one question")
    async def check(req: CheckRequest) -> Any:
        """The verdict JSON that ``scopeguard check --json`` prints; 504 (with the fail-closed
        verdict) when the deadline runs out."""
        question, docs = validate_question(req.question), checked_documents(config, req.documents)
        with runtime.admit(docs):
            done = await runtime.check(question, docs)
        return timed_out(verdict=done.value) if done.timed_out else done.value

    @app.post("/v1/check/batch", response_model=CheckBatchResponse, summary="Verdicts for many questions")
    async def check_batch(req: CheckBatchRequest) -> Any:
        """One verdict per item, in order; each item has its own deadline and fails closed alone."""
        if len(req.items) > config.max_batch:
            raise LimitError(
                f"{len(req.items)} items: more than max_batch={config.max_batch}", limit="max_batch"
            )
        items = [(validate_question(i.question), checked_documents(config, i.documents)) for i in req.items]
        every = [d for _, docs in items for d in docs]
        with runtime.admit(every, units=len(items)):
            sem = asyncio.Semaphore(runtime.guard.concurrency)

            async def one(question: str, docs: Sequence[Document]) -> Verdict:
                async with sem:
                    return (await runtime.check(question, docs)).value  # type: ignore[no-any-return]

            verdicts = await asyncio.gather(*(one(q, d) for q, d in items))
        return CheckBatchResponse(verdicts=list(verdicts))

    @app.post("/v1/answer", response_model=AnswerResponse, summary="Verdict, policy action and response")
    async def answer(req: AnswerRequest) -> Any:
        """Check, then answer with the server's LLM (in scope) or apply the policy (out of scope).
        Without an LLM (or with ``generate: false``) in-scope questions get ``response: null``."""
        question, docs = validate_question(req.question), checked_documents(config, req.documents)
        with runtime.admit(docs):
            done = await runtime.answer(question, docs, generate=req.generate)
        result = AnswerResponse.model_validate(done.value.model_dump(exclude={"documents"}))
        return timed_out(verdict=result.verdict, result=result) if done.timed_out else result

    @app.post("/v1/preread", response_model=PrereadResponse, summary="Read documents ahead of questions")
    async def preread(req: PrereadRequest) -> Any:
        """The reading stage reads the documents now and keeps its state, so later questions about
        them cost only their own tokens; documents this server has read before are not read again."""
        docs = checked_documents(config, req.documents)
        with runtime.admit(docs, kind="preread", units=max(len(docs), 1)):
            read, kept, passages = await asyncio.to_thread(runtime.preread, docs)
        return PrereadResponse(read=read, kept=kept, passages=passages)

    @app.get("/v1/detectors", response_model=DetectorsResponse, summary="Detector names")
    async def detectors() -> Any:
        return DetectorsResponse(
            detectors=available_detectors(), active=runtime.detector_name, policy=config.policy
        )

    @app.get("/healthz", summary="Liveness")
    async def healthz() -> Any:
        return {"status": "ok"}

    @app.get("/readyz", summary="Readiness: the models are loaded (calibration profile, pre-read progress)")
    async def readyz() -> Any:
        if runtime.ready:
            return {
                "status": "ready",
                "detector": runtime.detector_name,
                "calibration": calibration,
                "preread": runtime.startup_preread.status(),
            }
        if runtime.load_error:
            return fail(503, f"loading the detector failed: {runtime.load_error}", "not_ready")
        return fail(503, "loading the models", "not_ready", {"Retry-After": "1"})

    @app.get("/metrics", summary="Prometheus metrics")
    async def metrics() -> Any:
        body, content_type = runtime.metrics.render()
        return Response(body, media_type=content_type)

    add_proxy_routes(app, runtime)
    routes = {getattr(r, "path", "") for r in app.routes}
    return GuardrailsMiddleware(app, runtime, routes)
