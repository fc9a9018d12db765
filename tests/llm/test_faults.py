"""Fault injection: a fake OpenAI-compatible server on 127.0.0.1 that misbehaves on demand.

The guard never crashes, never hangs, and uses the model it is given: every transport, protocol
or shape failure becomes a ScopeGuardError that the guard fails closed on, a deadline bounds a
stalled endpoint, and one bad item never costs a batch its other results.

The fake picks its behaviour per request from a marker in the prompt: ``[[html]]`` applies to
every request, ``[[judge:html]]`` only to judge prompts and ``[[answer:html]]`` only to the
others; without a marker it uses its default mode (``ok``). A request with ``"stream": true``
gets server-sent events (``ok``: the reply in three pieces; ``stall_mid``: two pieces, then
nothing; ``broken_event``/``not_chunk``: a piece, then an event that is not JSON / not a chunk).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from scopeguard import Action, Guard, GuardResult, Verdict
from scopeguard.cli._app import app
from scopeguard.detection.detectors.judge import JudgeDetector
from scopeguard.errors import (
    ConfigurationError,
    LLMAuthError,
    LLMError,
    LLMRateLimitError,
    LLMResponseError,
    LLMTimeoutError,
    error_kind,
)
from scopeguard.llm.base import StreamingChatModel
from scopeguard.llm.deadline import deadline
from scopeguard.llm.openai_compat import OpenAIChatModel, from_spec_arg

DOC = "The Kestrel ferry carries 180 passengers and crosses the bay in 35 minutes."
JUDGE_MARK = "The answer is: Yes or No"  # in the judge template, not in the answer template
SECRET = "sk-test-secret-0123456789abcdef"
MALFORMED = ["bad_json", "html", "error_object", "no_choices", "no_message", "no_content", "refusal"]
PIECES = ["35", " min", "utes."]  # the streamed reply: "35 minutes.", as the non-streamed one
_SSE_MODES = {"ok", "stall_mid", "broken_event", "not_chunk"}
_MARKER = re.compile(r"\[\[(?:(judge|answer):)?(\w+)\]\]")


class FakeOpenAI:
    """What the fake server does; one instance per test (see the ``fake`` fixture)."""

    def __init__(self) -> None:
        self.url = ""
        self.default = "ok"
        self.retry_after = "1"
        self.stall_s = 30.0
        self.requests: list[dict[str, Any]] = []
        self.auth: list[str] = []
        self.modes: Counter[str] = Counter()
        self.stopping = threading.Event()
        self._lock = threading.Lock()

    def mode_for(self, text: str) -> str:
        role = "judge" if JUDGE_MARK in text else "answer"
        for scope, mode in _MARKER.findall(text):
            if not scope or scope == role:
                return mode
        return self.default

    def reply(self, body: dict[str, Any], auth: str) -> tuple[int, dict[str, str], bytes | Iterator[bytes]]:
        messages = body.get("messages") or []
        text = "\n".join(m.get("content") or "" for m in messages if isinstance(m, dict))
        mode = self.mode_for(text)
        with self._lock:
            self.requests.append(body)
            self.auth.append(auth)
            self.modes[mode] += 1
            seen = self.modes[mode]
        n = int(body.get("n") or 1)
        judge = JUDGE_MARK in text
        if body.get("stream") and mode in _SSE_MODES:
            return 200, {"Content-Type": "text/event-stream"}, self.events(mode)
        if mode == "ok":
            content = "Everything asked is in the document. The answer is: No." if judge else "35 minutes."
            return _json(200, _completion([content] * n))
        if mode == "oos":
            return _json(200, _completion(["The shipyard is not mentioned. The answer is: Yes."] * n))
        if mode == "no_verdict":
            return _json(200, _completion(["It is hard to say."] * n))
        if mode in ("rate_limited", "rate_limited_once"):
            if mode == "rate_limited_once" and seen > 1 and body.get("stream"):
                return 200, {"Content-Type": "text/event-stream"}, self.events("ok")
            if mode == "rate_limited_once" and seen > 1:
                return _json(200, _completion(["Fine. The answer is: No."] * n))
            status, headers, payload = _json(429, {"error": {"message": "slow down"}})
            return status, {**headers, "Retry-After": self.retry_after}, payload
        if mode == "server_error":
            return _json(500, {"error": {"message": "internal error"}})
        if mode == "unauthorised":
            return _json(401, {"error": {"message": "invalid api key"}})
        if mode == "echo_key":  # a server that puts the caller's credentials in its error body
            return _json(500, {"error": {"message": f"bad request from {auth} (key {SECRET})"}})
        if mode == "stall":
            self.stopping.wait(self.stall_s)
            return _json(200, _completion(["late"] * n))
        if mode == "bad_json":
            return 200, {"Content-Type": "application/json"}, b'{"choices": [{"message": '
        if mode == "html":
            return 200, {"Content-Type": "text/html"}, b"<html><body><h1>Gateway login</h1></body></html>"
        if mode == "error_object":
            return _json(200, {"object": "error", "message": "model is loading", "code": 503})
        if mode == "no_choices":
            return _json(200, {"id": "x", "object": "chat.completion", "created": 0, "model": "fake"})
        if mode == "no_message":
            return _json(200, {**_completion([]), "choices": [{"index": 0, "finish_reason": "stop"}]})
        if mode == "no_content":
            choice = {"index": 0, "message": {"role": "assistant"}, "finish_reason": "length"}
            return _json(200, {**_completion([]), "choices": [choice]})
        if mode == "refusal":
            message = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            return _json(200, {**_completion([]), "choices": [choice]})
        raise AssertionError(f"unknown fake mode {mode!r}")

    def events(self, mode: str) -> Iterator[bytes]:
        """Server-sent events of a streamed completion; ``stall_mid`` stops after two pieces."""
        chunk = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": "fake"}
        deltas = [{"role": "assistant", "content": ""}, *({"content": p} for p in PIECES)]
        for i, delta in enumerate(deltas):
            if mode == "stall_mid" and i == 3:
                self.stopping.wait(self.stall_s)
            event = {**chunk, "choices": [{"index": 0, "delta": delta}]}
            yield b"data: " + json.dumps(event).encode() + b"\n\n"
            if i == 1 and mode == "broken_event":
                yield b'data: {"choices": [{"delta": \n\n'
            if i == 1 and mode == "not_chunk":
                yield b'data: {"status": "busy"}\n\n'
        final = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        yield b"data: " + json.dumps(final).encode() + b"\n\ndata: [DONE]\n\n"


def _completion(texts: list[str]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "choices": [
            {"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
            for i, t in enumerate(texts)
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _json(status: int, payload: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps(payload).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        fake: FakeOpenAI = self.server.fake  # type: ignore[attr-defined]
        status, headers, payload = fake.reply(body, self.headers.get("Authorization", ""))
        try:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            if isinstance(payload, bytes):
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            self.send_header("Connection", "close")  # server-sent events: the body ends with the connection
            self.close_connection = True
            self.end_headers()
            for event in payload:
                self.wfile.write(event)
                self.wfile.flush()
        except OSError:  # the client gave up (a stalled request timed out)
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    state = FakeOpenAI()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.fake = state  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        state.stopping.set()  # wake stalled handlers
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _llm(fake: FakeOpenAI, **kw: Any) -> OpenAIChatModel:
    kw = {"backoff": 0.01, "max_backoff": 0.05, "timeout": 10.0, **kw}
    return OpenAIChatModel("fake", base_url=fake.url, **kw)


def _guard(fake: FakeOpenAI, **kw: Any) -> Guard:
    return Guard(detector="judge", llm=_llm(fake), policy="refuse", **kw)


# -- the backend ------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MALFORMED)
def test_malformed_success_reply_is_a_response_error_naming_the_endpoint(fake: FakeOpenAI, mode: str) -> None:
    fake.default = mode
    with pytest.raises(LLMResponseError) as info:
        _llm(fake).complete("hi")
    assert fake.url in str(info.value)
    assert len(fake.requests) == 1  # a malformed reply is not retried


@pytest.mark.parametrize("mode", MALFORMED)
async def test_async_malformed_success_reply_is_a_response_error(fake: FakeOpenAI, mode: str) -> None:
    fake.default = mode
    with pytest.raises(LLMResponseError, match=re.escape(fake.url)):
        await _llm(fake).acomplete("hi")


def test_error_object_and_refusal_say_what_the_server_said(fake: FakeOpenAI) -> None:
    fake.default = "error_object"
    with pytest.raises(LLMResponseError, match="model is loading"):
        _llm(fake).complete("hi")
    fake.default = "refusal"
    with pytest.raises(LLMResponseError, match=r"refused to answer.*can.t help"):
        _llm(fake).complete("hi")


def test_chat_completion_returns_the_checked_sdk_response(fake: FakeOpenAI) -> None:
    llm = _llm(fake)
    resp = llm.chat_completion({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3})
    assert resp.choices[0].message.content == "35 minutes." and fake.requests[0]["model"] == "fake"
    fake.default = "no_choices"
    with pytest.raises(LLMResponseError, match="without choices"):
        llm.chat_completion({"messages": [{"role": "user", "content": "hi"}]})


async def test_achat_completion_returns_the_checked_sdk_response(fake: FakeOpenAI) -> None:
    resp = await _llm(fake).achat_completion({"messages": [{"role": "user", "content": "hi"}]})
    assert resp.choices[0].message.content == "35 minutes."


def test_a_model_collected_while_a_later_event_loop_runs_logs_nothing(
    fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    """The async client of a closed loop, collected while another loop runs (a model in a reference
    cycle, asyncio.run called again), is dropped quietly: the SDK's default HTTP client scheduled
    its aclose() on the running loop, and asyncio logged "Task exception was never retrieved ...
    Event loop is closed" each time."""
    import asyncio
    import gc

    async def collect() -> None:
        gc.collect()
        await asyncio.sleep(0.05)  # what the collector scheduled runs now

    def in_a_cycle(llm: OpenAIChatModel) -> OpenAIChatModel:  # as a limiter's callback makes one
        llm.on_rate_limit = lambda _: print(llm.rate_limits)
        return llm

    caplog.set_level(logging.ERROR, logger="asyncio")
    for _ in range(3):
        llm = in_a_cycle(_llm(fake))
        assert asyncio.run(llm.acomplete("hi")).text == "35 minutes."
        del llm
        asyncio.run(collect())
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


def test_retry_after_seconds_replaces_the_backoff(fake: FakeOpenAI) -> None:
    fake.default, fake.retry_after = "rate_limited_once", "0.2"
    started = time.monotonic()
    text = _llm(fake, backoff=30.0, max_backoff=30.0).complete("hi").text  # backoff alone: 30 s
    assert text.endswith("The answer is: No.") and len(fake.requests) == 2
    assert time.monotonic() - started < 10


def test_retry_after_http_date_is_honoured(fake: FakeOpenAI) -> None:
    fake.default, fake.retry_after = "rate_limited_once", formatdate(time.time() + 1, usegmt=True)
    started = time.monotonic()
    assert _llm(fake, backoff=30.0, max_backoff=30.0).complete("hi").text and len(fake.requests) == 2
    assert time.monotonic() - started < 10


def test_retry_after_beyond_the_deadline_fails_fast(fake: FakeOpenAI) -> None:
    fake.default, fake.retry_after = "rate_limited", "30"
    started = time.monotonic()
    with pytest.raises(LLMTimeoutError, match="deadline of 2s") as info:
        _llm(fake, deadline=2.0).complete("hi")
    assert time.monotonic() - started < 10 and len(fake.requests) == 1
    assert info.value.deadline == 2.0 and info.value.endpoint == fake.url


def test_refused_credentials_and_lasting_429s_have_their_own_kinds(fake: FakeOpenAI) -> None:
    fake.default = "unauthorised"
    with pytest.raises(LLMAuthError, match="refused the credentials") as auth:
        _llm(fake).complete("hi")
    assert auth.value.kind == "auth" and len(fake.requests) == 1  # never retried
    fake.default, fake.retry_after = "rate_limited", "0"
    with pytest.raises(LLMRateLimitError, match="429") as limited:
        _llm(fake, backoff=0.01, max_backoff=0.01, max_attempts=2).complete("hi")
    assert limited.value.kind == "rate_limited"
    verdict = Guard(detector="judge", llm=_llm(fake, max_attempts=1), deadline=30).check("How long?", DOC)
    assert verdict.label == "unknown" and verdict.error_kind == "rate_limited"
    assert error_kind(TimeoutError()) == "timeout" and error_kind(KeyError("x")) == "internal"


def test_persistent_5xx_stops_at_an_ambient_deadline(fake: FakeOpenAI) -> None:
    fake.default = "server_error"
    started = time.monotonic()
    with pytest.raises(LLMTimeoutError, match="internal error"), deadline(1.5):
        _llm(fake, backoff=0.5, max_backoff=1.0, max_attempts=100).complete("hi")  # 100 would take minutes
    assert time.monotonic() - started < 10


def test_stalled_endpoint_is_cut_off_by_the_deadline(fake: FakeOpenAI) -> None:
    fake.default = "stall"
    started = time.monotonic()
    with pytest.raises(LLMTimeoutError) as info:
        _llm(fake, timeout=60.0, deadline=2.0).complete("hi")
    assert time.monotonic() - started < 10
    assert fake.url in str(info.value) and info.value.deadline == 2.0


async def test_async_stalled_endpoint_is_cut_off_by_the_deadline(fake: FakeOpenAI) -> None:
    fake.default = "stall"
    started = time.monotonic()
    with pytest.raises(LLMTimeoutError):
        await _llm(fake, timeout=60.0, deadline=2.0).acomplete("hi")
    assert time.monotonic() - started < 10


def test_a_guard_is_bounded_by_default_and_none_removes_the_bound() -> None:
    from scopeguard.guard import DEFAULT_DEADLINE_S

    assert DEFAULT_DEADLINE_S <= 120
    assert Guard(detector="lexical").deadline == DEFAULT_DEADLINE_S
    assert Guard(detector="lexical", deadline=30).deadline == 30.0
    assert Guard(detector="lexical", deadline=None).deadline is None


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_stalled_endpoint_with_default_settings_fails_closed_within_the_default_deadline(
    fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, use_async: bool
) -> None:
    """The user's setup: ``Guard(detector="judge", llm="openai:...")`` with nothing else set (the
    backend's own 60 s timeout and 4 attempts would block 245 s). The default is shortened to 2 s
    here so the test is quick; the guard reads it when built, as it reads the real 120 s."""
    monkeypatch.setattr("scopeguard.guard.DEFAULT_DEADLINE_S", 2.0)
    fake.default = "stall"
    guard = Guard(detector="judge", llm=OpenAIChatModel("fake", base_url=fake.url), policy="refuse")
    assert guard.deadline == 2.0
    started = time.monotonic()
    result = (
        await guard.aanswer("Who won?", ["A document."])
        if use_async
        else guard.answer("Who won?", ["A doc."])
    )
    assert time.monotonic() - started < 2.0 + 3.0  # the deadline, plus the async hard stop's grace
    assert result.failed_closed and result.action == "refused"
    assert result.verdict.label == "unknown" and "deadline" in (result.verdict.error or "")


def test_the_key_never_reaches_messages_or_logs(fake: FakeOpenAI, caplog: pytest.LogCaptureFixture) -> None:
    fake.default = "echo_key"
    caplog.set_level(logging.DEBUG)
    with pytest.raises(LLMError) as info:
        _llm(fake, api_key=SECRET, max_attempts=2).complete("hi")
    assert fake.auth[0] == f"Bearer {SECRET}"  # the server did see (and echo) it
    texts = [str(info.value), str(info.value.__cause__ or "")] + [r.getMessage() for r in caplog.records]
    assert not [t for t in texts if SECRET in t]
    assert "***" in str(info.value)


# -- streaming --------------------------------------------------------------------------------
def test_stream_yields_the_pieces_in_order(fake: FakeOpenAI) -> None:
    llm = _llm(fake)
    assert isinstance(llm, StreamingChatModel)
    assert list(llm.stream("How long is the crossing?", max_tokens=8)) == PIECES
    assert "".join(PIECES) == llm.complete("How long is the crossing?").text
    assert fake.requests[0]["stream"] is True and fake.requests[0]["max_tokens"] == 8
    assert "stream" not in fake.requests[1]


async def test_astream_yields_the_pieces_in_order(fake: FakeOpenAI) -> None:
    assert [p async for p in _llm(fake).astream("hi")] == PIECES


def test_stream_retries_before_the_first_piece(fake: FakeOpenAI) -> None:
    fake.default, fake.retry_after = "rate_limited_once", "0"
    assert list(_llm(fake).stream("hi")) == PIECES
    assert len(fake.requests) == 2 and all(r["stream"] for r in fake.requests)


@pytest.mark.parametrize("mode", ["broken_event", "not_chunk"])
def test_a_broken_event_mid_stream_is_a_response_error(fake: FakeOpenAI, mode: str) -> None:
    fake.default = mode
    got: list[str] = []
    with pytest.raises(LLMResponseError, match=re.escape(fake.url)):
        got.extend(_llm(fake).stream("hi"))
    assert got == PIECES[:1] and len(fake.requests) == 1  # text was handed out: no retry


@pytest.mark.parametrize("mode", ["broken_event", "not_chunk"])
async def test_async_broken_event_mid_stream_is_a_response_error(fake: FakeOpenAI, mode: str) -> None:
    fake.default = mode
    got: list[str] = []
    with pytest.raises(LLMResponseError, match=re.escape(fake.url)):
        async for piece in _llm(fake).astream("hi"):
            got.append(piece)
    assert got == PIECES[:1]


def test_a_stall_mid_stream_hits_the_deadline(fake: FakeOpenAI) -> None:
    fake.default = "stall_mid"
    got: list[str] = []
    started = time.monotonic()
    with pytest.raises(LLMTimeoutError) as info:
        got.extend(_llm(fake, timeout=60.0, deadline=2.0).stream("hi"))
    assert got == PIECES[:2] and time.monotonic() - started < 10
    assert info.value.deadline == 2.0 and info.value.endpoint == fake.url


async def test_async_stall_mid_stream_hits_the_deadline(fake: FakeOpenAI) -> None:
    fake.default = "stall_mid"
    got: list[str] = []
    started = time.monotonic()
    with pytest.raises(LLMTimeoutError, match=r"deadline of 1\.5s"), deadline(1.5):
        async for piece in _llm(fake, timeout=60.0).astream("hi"):
            got.append(piece)
    assert got == PIECES[:2] and time.monotonic() - started < 6


@pytest.mark.parametrize("mode", ["html", "server_error"])
def test_a_stream_that_never_starts_is_a_typed_error(fake: FakeOpenAI, mode: str) -> None:
    fake.default = mode
    with pytest.raises(LLMError, match=re.escape(fake.url)):
        list(_llm(fake, max_attempts=2).stream("hi"))


def test_spec_options(fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
    llm = from_spec_arg("fake?deadline=20&timeout=5&max_attempts=2")
    assert (llm.deadline, llm.timeout, llm.max_attempts, llm.base_url) == (20.0, 5.0, 2, fake.url)
    with pytest.raises(ConfigurationError, match=r"unknown option 'dedline'.*valid options: .*deadline"):
        from_spec_arg("fake?dedline=20")
    with pytest.raises(ConfigurationError, match="unknown option 'api_key'"):
        from_spec_arg("fake?api_key=sk-abc")
    with pytest.raises(ConfigurationError, match="deadline='soon'"):
        from_spec_arg("fake?deadline=soon")
    with pytest.raises(ConfigurationError, match="positive"):
        from_spec_arg("fake?deadline=0")


def test_local_spec_options_are_checked_before_loading() -> None:
    from scopeguard.llm.local import from_spec_arg as local_spec

    with pytest.raises(ConfigurationError, match=r"unknown option 'ctx'.*n_ctx"):
        local_spec("smollm2?ctx=4096")


# -- the guard --------------------------------------------------------------------------------
def test_guard_judges_with_the_llm_it_is_given(fake: FakeOpenAI) -> None:
    guard = _guard(fake)
    assert isinstance(guard.detector, JudgeDetector) and guard.detector.llm is guard.llm
    result = guard.answer("How long is the crossing?", DOC)
    assert result.action is Action.ANSWERED and result.response == "35 minutes."
    assert any(JUDGE_MARK in m["content"] for r in fake.requests for m in r["messages"])


@pytest.mark.parametrize("mode", [*MALFORMED, "no_verdict", "server_error"])
def test_guard_check_fails_closed(fake: FakeOpenAI, mode: str) -> None:
    guard = _guard(fake)
    verdict = guard.check(f"How long is the crossing? [[{mode}]]", DOC)
    assert verdict.label == "unknown"
    if mode != "no_verdict":
        assert fake.url in (verdict.error or "")
        # the kind of failure is named where it happened, not inferred later
        assert verdict.error_kind == ("upstream" if mode == "server_error" else "bad_reply"), verdict
    result = guard.answer(f"How long is the crossing? [[{mode}]]", DOC)
    assert result.failed_closed and result.action is Action.REFUSED


@pytest.mark.parametrize("mode", MALFORMED)
async def test_guard_acheck_and_aanswer_fail_closed(fake: FakeOpenAI, mode: str) -> None:
    guard = _guard(fake)
    verdict = await guard.acheck(f"How long? [[{mode}]]", DOC)
    assert verdict.label == "unknown" and fake.url in (verdict.error or "")
    result = await guard.aanswer(f"How long? [[{mode}]]", DOC)
    assert result.failed_closed and result.action is Action.REFUSED


@pytest.mark.parametrize("mode", ["html", "no_content", "server_error"])
def test_a_failing_answer_is_refused_not_raised(fake: FakeOpenAI, mode: str) -> None:
    result = _guard(fake).answer(f"How long is the crossing? [[answer:{mode}]]", DOC)
    assert result.verdict.label == "in_scope"  # the judge was fine
    assert result.action is Action.REFUSED and result.failed_closed
    assert fake.url in result.metadata["error"] and result.metadata["error_stage"] == "answer"
    assert result.metadata["error_kind"] == ("upstream" if mode == "server_error" else "bad_reply")
    with pytest.raises(LLMError):
        Guard(detector="judge", llm=_llm(fake), on_error="raise").answer(f"How long? [[answer:{mode}]]", DOC)


async def test_a_failing_async_answer_is_refused_not_raised(fake: FakeOpenAI) -> None:
    result = await _guard(fake).aanswer("How long is the crossing? [[answer:bad_json]]", DOC)
    assert result.verdict.label == "in_scope" and result.failed_closed
    assert result.action is Action.REFUSED and "error" in result.metadata


def test_a_failing_policy_llm_is_refused_not_raised(fake: FakeOpenAI) -> None:
    guard = Guard(detector="judge", llm=_llm(fake), policy="defuse")
    result = guard.answer("Which shipyard built it? [[judge:oos]] [[answer:html]]", DOC)
    assert result.verdict.label == "out_of_scope" and result.action is Action.REFUSED
    assert result.failed_closed and result.metadata["error_stage"] == "policy"


@pytest.mark.parametrize("answer", [True, False])
async def test_abatch_keeps_the_other_results(fake: FakeOpenAI, answer: bool) -> None:
    items = [(f"How long is trip {i}?", DOC) for i in range(5)]
    items[2] = ("How long is trip 2? [[html]]", DOC)
    items.append(("   ", DOC))  # an invalid item does not sink the batch either
    results = await _guard(fake, concurrency=3).abatch(items, answer=answer)
    assert len(results) == 6
    for i, r in enumerate(results):
        verdict = r.verdict if isinstance(r, GuardResult) else r
        assert isinstance(verdict, Verdict)
        failed = i in (2, 5)
        assert (verdict.label == "unknown") is failed and (verdict.error is not None) is failed
        if isinstance(r, GuardResult):
            assert r.failed_closed is failed
            assert r.action is (Action.REFUSED if failed else Action.ANSWERED)


def test_guard_deadline_bounds_a_stalled_check(fake: FakeOpenAI) -> None:
    fake.default = "stall"
    guard = _guard(fake, deadline=2.0)
    started = time.monotonic()
    verdict = guard.check("How long is the crossing?", DOC)
    assert verdict.label == "unknown" and "deadline" in (verdict.error or "")
    result = guard.answer("How long is the crossing?", DOC)
    assert result.failed_closed and result.action is Action.REFUSED
    assert time.monotonic() - started < 20


async def test_guard_deadline_bounds_async_calls_and_batches(fake: FakeOpenAI) -> None:
    fake.default = "stall"
    guard = _guard(fake, deadline=2.0)
    started = time.monotonic()
    results = await guard.abatch([("How long?", DOC)] * 3, concurrency=3)
    assert all(isinstance(r, GuardResult) and r.failed_closed for r in results)
    assert time.monotonic() - started < 10


def test_guard_rejects_a_bad_deadline() -> None:
    with pytest.raises(ConfigurationError, match="positive"):
        Guard(detector="lexical", deadline=-1)


# -- the command line -------------------------------------------------------------------------
def _cli(fake: FakeOpenAI, *args: str) -> Any:
    env = {"OPENAI_BASE_URL": fake.url, "OPENAI_API_KEY": SECRET}
    return CliRunner().invoke(app, list(args), env=env)


def _stderr(result: Any) -> str:
    try:
        return str(result.stderr)
    except ValueError:  # older click mixes stderr into output
        return str(result.output)


@pytest.mark.parametrize("mode", ["bad_json", "html", "no_choices", "echo_key"])
def test_cli_check_prints_one_line_and_exits(fake: FakeOpenAI, tmp_path: Path, mode: str) -> None:
    fake.default = mode
    doc = tmp_path / "doc.txt"
    doc.write_text(DOC, encoding="utf-8")
    args = [
        "check",
        "-q",
        "How long?",
        "-d",
        str(doc),
        "--detector",
        "judge",
        "--llm",
        "openai:x?backoff=0.01&max_backoff=0.05",
    ]
    result = _cli(fake, *args)
    err = _stderr(result)
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)  # a clean exit, not a raised error
    assert "Traceback" not in err and err.startswith("error: ") and fake.url in err
    assert SECRET not in result.output + err


def test_cli_check_with_a_spec_deadline_does_not_hang(fake: FakeOpenAI, tmp_path: Path) -> None:
    fake.default = "stall"
    doc = tmp_path / "doc.txt"
    doc.write_text(DOC, encoding="utf-8")
    started = time.monotonic()
    result = _cli(fake, "check", "-q", "How long?", "-d", str(doc), "--detector", "judge", "--llm",
                  "openai:x?deadline=2")  # fmt: skip
    assert result.exit_code == 2 and "deadline" in _stderr(result)
    assert time.monotonic() - started < 10


def test_cli_generate_counts_failed_documents_instead_of_crashing(fake: FakeOpenAI, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, mode in enumerate(["bad_json", "html", "no_choices"]):
        (corpus / f"doc{i}.txt").write_text(f"{DOC} Trip {i}. [[{mode}]]", encoding="utf-8")
    out = tmp_path / "out"
    result = _cli(
        fake, "generate", str(corpus), "--out", str(out), "--llm", "openai:x", "--no-filter",
        "--min-words", "0", "--concurrency", "2", "--no-progress",
    )  # fmt: skip
    # the run finishes and reports (exit 1 = "some documents failed"), it does not crash
    assert result.exit_code in (0, 1), result.output + _stderr(result)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "3 errored this run" in result.output and "Traceback" not in _stderr(result)


def test_sync_batch_keeps_the_other_results(fake: FakeOpenAI) -> None:
    results = _guard(fake).batch([("How long? [[no_choices]]", DOC), ("How long?", DOC)])
    assert [r.failed_closed for r in results if isinstance(r, GuardResult)] == [True, False]
