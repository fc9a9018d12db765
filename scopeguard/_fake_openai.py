"""A fake OpenAI-compatible server on 127.0.0.1: chat completions, files and the Batch API.

Re-exported as :class:`scopeguard.testing.FakeOpenAIServer`. Replies come from any
:class:`~scopeguard.llm.base.ChatModel` (``EloqChatModel`` answers the generator's prompts), so
an online run and a batch run see the same replies. Chat requests can be slowed (``latency``)
and rate-limited (a 429 with ``Retry-After`` above ``capacity`` requests in flight); batches go
through ``batch_statuses`` one status per poll, and ``request_error`` fails chosen requests into
an errors file. ``"stream": true`` requests get the reply as server-sent events, one word a
chunk; ``garbage=True`` (settable at any time) answers chat requests with a 200 that is not a
completion (a broken body, or broken events when streaming), to test a client's handling.
Counters (``submitted``, ``uploads``, ``chat_requests``, ``rate_limited``) let a
test check that nothing was paid for twice; ``files`` holds the files present (``DELETE
/v1/files/{id}`` removes one), so a test can check that a run leaves none behind.

Standalone, for checking a batch run by hand (serves :class:`~scopeguard.testing.EloqChatModel`
replies until interrupted, and prints its base URL)::

    python -m scopeguard._fake_openai --port 8400 --latency 0.05 \
        --batch-statuses validating in_progress in_progress completed
"""

from __future__ import annotations

import argparse
import contextlib
import email.parser
import email.policy
import json
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from scopeguard.llm.base import ChatMessage, ChatModel

__all__ = ["FakeOpenAIServer"]

_TERMINAL = ("completed", "failed", "expired", "cancelled")


class FakeOpenAIServer:
    """``with FakeOpenAIServer(EloqChatModel()) as server: server.base_url`` (``.../v1``).

    Args:
        chat: the model whose ``complete`` answers every chat request (online or in a batch).
        latency: seconds each chat request takes.
        capacity: chat requests in flight above this get a 429 (``retry_after`` seconds).
        batch_statuses: the statuses a batch shows, one per poll; the last one is final
            (``completed``, ``failed``, ``expired`` or ``cancelled``).
        request_error: ``custom_id -> message or None``: requests failed into the errors file.
        garbage: answer chat requests with a 200 whose body is not a chat completion.
        stream_gap: seconds between the events of a streamed reply (a slow or stalling stream).
        port: the port on 127.0.0.1 (0: a free one).
    """

    def __init__(
        self,
        chat: ChatModel,
        *,
        latency: float = 0.0,
        capacity: int | None = None,
        retry_after: float = 0.05,
        batch_statuses: Sequence[str] = ("validating", "in_progress", "completed"),
        request_error: Callable[[str], str | None] | None = None,
        garbage: bool = False,
        stream_gap: float = 0.0,
        port: int = 0,
    ) -> None:
        if not batch_statuses or batch_statuses[-1] not in _TERMINAL:
            raise ValueError(f"batch_statuses must end with one of {_TERMINAL}")
        self.chat, self.latency, self.capacity, self.retry_after = chat, latency, capacity, retry_after
        self.batch_statuses = tuple(batch_statuses)
        self.request_error = request_error
        self.garbage = garbage
        self.stream_gap = stream_gap
        self.port = port
        self.files: dict[str, bytes] = {}  # the files present (deleted ones are gone)
        self._file_ids = 0
        self.batches: dict[str, dict[str, Any]] = {}
        self.submitted: Counter[str] = Counter()  # custom_id -> batches it was submitted in
        self.uploads = 0
        self.chat_requests = 0
        self.rate_limited = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self._polls: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> FakeOpenAIServer:
        handler = type("_Handler", (_Handler,), {"fake": self})
        server = _QuietServer(("127.0.0.1", self.port), handler, bind_and_activate=False)
        server.request_queue_size = 1024
        server.daemon_threads = True
        server.server_bind()
        server.server_activate()
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the fake server is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    # -- chat -----------------------------------------------------------------------------
    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        """The chat completion body for a request body."""
        messages = [ChatMessage(role=m["role"], content=m["content"]) for m in body["messages"]]
        done = self.chat.complete(
            messages,
            n=int(body.get("n", 1)),
            temperature=float(body.get("temperature", 0.0)),
            max_tokens=body.get("max_tokens"),
            seed=body.get("seed"),
        )
        reasons = done.finish_reasons or ("stop",) * len(done.texts)
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.chat.name),
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": r}
                for i, (t, r) in enumerate(zip(done.texts, reasons, strict=True))
            ],
            "usage": {
                "prompt_tokens": done.prompt_tokens,
                "completion_tokens": done.completion_tokens,
                "total_tokens": done.prompt_tokens + done.completion_tokens,
            },
        }

    # -- files and batches ------------------------------------------------------------------
    def _new_file(self, data: bytes, purpose: str, name: str) -> dict[str, Any]:
        with self._lock:
            self._file_ids += 1
            file_id = f"file-{self._file_ids}"
            self.files[file_id] = data
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": name,
            "purpose": purpose,
            "status": "processed",
        }

    def create_batch(self, body: dict[str, Any]) -> dict[str, Any]:
        data = self.files.get(body.get("input_file_id", ""))
        if data is None:
            raise KeyError("input file not found")
        lines = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
        with self._lock:
            batch_id = f"batch-{len(self.batches) + 1}"
            self.submitted.update(line["custom_id"] for line in lines)
            self.batches[batch_id] = {
                "id": batch_id,
                "object": "batch",
                "endpoint": body.get("endpoint", "/v1/chat/completions"),
                "input_file_id": body["input_file_id"],
                "completion_window": body.get("completion_window", "24h"),
                "status": self.batch_statuses[0],
                "created_at": int(time.time()),
                "output_file_id": None,
                "error_file_id": None,
                "errors": None,
                "metadata": body.get("metadata"),
                "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                "_lines": lines,
            }
        if self.batch_statuses[0] in _TERMINAL:
            self._finish(batch_id)
        return self.public(batch_id)

    def public(self, batch_id: str) -> dict[str, Any]:
        return {k: v for k, v in self.batches[batch_id].items() if not k.startswith("_")}

    def poll(self, batch_id: str) -> dict[str, Any]:
        batch = self.batches[batch_id]
        if batch["status"] not in _TERMINAL:
            self._polls[batch_id] += 1
            step = min(self._polls[batch_id], len(self.batch_statuses) - 1)
            batch["status"] = self.batch_statuses[step]
            if batch["status"] in _TERMINAL:
                self._finish(batch_id)
        return self.public(batch_id)

    def _finish(self, batch_id: str) -> None:
        batch = self.batches[batch_id]
        status, lines = batch["status"], batch["_lines"]
        if status == "failed":
            batch["errors"] = {"data": [{"code": "invalid_request", "message": "the fake was told to fail"}]}
            return
        done_upto = len(lines) if status == "completed" else len(lines) // 2
        out, err = [], []
        for i, line in enumerate(lines):
            cid = line["custom_id"]
            problem = self.request_error(cid) if self.request_error is not None else None
            if i >= done_upto:
                problem = f"batch_{status}"
            if problem is None:
                try:
                    body = self.completion(line["body"])
                except Exception as exc:  # a prompt the fake's model cannot answer
                    problem = str(exc)
            if problem is not None:
                error = {"code": "fake_error", "message": problem}
                err.append({"id": f"req-{i}", "custom_id": cid, "response": None, "error": error})
            else:
                response = {
                    "status_code": 200,
                    "request_id": f"req-{i}",
                    "body": body,
                }
                out.append({"id": f"req-{i}", "custom_id": cid, "response": response, "error": None})
        encode = lambda rows: "".join(json.dumps(r) + "\n" for r in rows).encode()  # noqa: E731
        if out:
            batch["output_file_id"] = self._new_file(encode(out), "batch_output", "output.jsonl")["id"]
        if err:
            batch["error_file_id"] = self._new_file(encode(err), "batch_output", "errors.jsonl")["id"]
        batch["request_counts"] = {"total": len(lines), "completed": len(out), "failed": len(err)}


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (it gave up on a slow reply) is no error worth a traceback."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAIServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def _not_found(self) -> None:
        self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_GET(self) -> None:
        fake, parts = self.fake, self.path.split("?")[0].strip("/").split("/")
        if parts[:2] == ["v1", "batches"] and len(parts) == 2:
            data = [fake.public(b) for b in reversed(list(fake.batches))]
            self._send(200, {"object": "list", "data": data, "has_more": False})
        elif parts[:2] == ["v1", "batches"] and len(parts) == 3 and parts[2] in fake.batches:
            self._send(200, fake.poll(parts[2]))
        elif parts[:2] == ["v1", "files"] and len(parts) == 4 and parts[2] in fake.files:
            self._send(200, fake.files[parts[2]])
        else:
            self._not_found()

    def do_DELETE(self) -> None:
        fake, parts = self.fake, self.path.split("?")[0].strip("/").split("/")
        if parts[:2] == ["v1", "files"] and len(parts) == 3 and parts[2] in fake.files:
            with fake._lock:
                del fake.files[parts[2]]
            self._send(200, {"id": parts[2], "object": "file", "deleted": True})
        else:
            self._not_found()

    def do_POST(self) -> None:
        fake, path, body = self.fake, self.path.split("?")[0].rstrip("/"), self._body()
        if path == "/v1/chat/completions":
            self._chat(json.loads(body))
        elif path == "/v1/files":
            header = f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode()
            message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(header + body)
            fields: dict[str, bytes] = {
                str(part.get_param("name", header="content-disposition")): part.get_payload(decode=True)  # type: ignore[misc]
                for part in message.iter_parts()  # type: ignore[attr-defined]
            }
            with fake._lock:
                fake.uploads += 1
            purpose = (fields.get("purpose") or b"batch").decode()
            self._send(200, fake._new_file(fields["file"], purpose, "input.jsonl"))
        elif path == "/v1/batches":
            try:
                self._send(200, fake.create_batch(json.loads(body)))
            except KeyError as exc:
                self._send(400, {"error": {"message": str(exc), "type": "invalid_request_error"}})
        else:
            self._not_found()

    def _chat(self, body: dict[str, Any]) -> None:
        fake = self.fake
        with fake._lock:
            fake.chat_requests += 1
            fake.in_flight += 1
            fake.peak_in_flight = max(fake.peak_in_flight, fake.in_flight)
            over = fake.capacity is not None and fake.in_flight > fake.capacity
            if over:
                fake.rate_limited += 1
        try:
            if over:
                error = {"error": {"message": "rate limited", "type": "rate_limit_exceeded"}}
                self._send(429, error, {"Retry-After": f"{fake.retry_after:g}"})
                return
            if fake.latency:
                time.sleep(fake.latency)
            try:
                reply = fake.completion(body)
            except Exception as exc:  # a prompt the fake's model cannot answer: a clear 400
                error = {"error": {"message": str(exc), "type": "invalid_request_error"}}
                self._send(400, error)
                return
            if body.get("stream"):
                self._stream(reply)
            elif fake.garbage:
                self._send(200, b"<html>502 upstream \x00 not json")
            else:
                self._send(200, reply)
        finally:
            with fake._lock:
                fake.in_flight -= 1

    def _stream(self, reply: dict[str, Any]) -> None:
        """The reply as server-sent events: a role chunk, one chunk a word, a final chunk, [DONE]."""
        base = {k: reply[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
        text = reply["choices"][0]["message"]["content"] or ""
        pieces = [{"role": "assistant", "content": ""}] + [{"content": w} for w in text.split(" ") if w]
        pieces = [p if i < 2 else {"content": " " + p["content"]} for i, p in enumerate(pieces)]
        events = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in pieces]
        events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        lines = [f"data: {json.dumps(e)}\n\n" for e in events]
        if self.fake.garbage:
            lines[1:] = ["data: {not json at all\n\n"]
        parts = [line.encode() for line in [*lines, "data: [DONE]\n\n"]]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(sum(map(len, parts))))
        self.end_headers()
        for i, part in enumerate(parts):
            if i and self.fake.stream_gap:
                time.sleep(self.fake.stream_gap)
            self.wfile.write(part)
            self.wfile.flush()


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m scopeguard._fake_openai``: serve ELOQ-shaped replies until interrupted."""
    from scopeguard._scripted_llm import EloqChatModel

    parser = argparse.ArgumentParser(
        prog="python -m scopeguard._fake_openai",
        description="A fake OpenAI-compatible server (chat, files, Batch API) on 127.0.0.1.",
    )
    parser.add_argument("--port", type=int, default=8400, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds each chat request takes")
    parser.add_argument("--capacity", type=int, default=None, help="429 above this many requests in flight")
    parser.add_argument("--model", default="gpt-4o-mini", help="the model name replies carry")
    parser.add_argument(
        "--batch-statuses",
        nargs="+",
        default=["validating", "in_progress", "completed"],
        help=f"a batch's status at each poll; the last one is final ({', '.join(_TERMINAL)})",
    )
    args = parser.parse_args(argv)
    try:
        server = FakeOpenAIServer(
            EloqChatModel(model=args.model, keep_calls=False),
            latency=args.latency,
            capacity=args.capacity,
            batch_statuses=args.batch_statuses,
            port=args.port,
        )
    except ValueError as exc:
        parser.error(str(exc))
    # Ctrl-C (SIGINT) and SIGTERM stop the server, even when it was started with SIGINT ignored
    # (as a background job is, or under a CI runner that ignores it): then Python installs no handler
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with server:
        # the one line a user (or a script) reads: where to point OPENAI_BASE_URL
        print(server.base_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
