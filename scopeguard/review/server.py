"""A local review server (standard library only): one page, a JSON API, no external resources.

Routes: ``GET /`` the page; ``GET /static/<file>`` its script and style; ``GET /api/items``
every question with its document, provenance, response (when the run has one) and this
annotator's labels; ``POST /api/label`` ``{"question_id", "field", "value"}``.
Document text is untrusted: the page renders it with ``textContent`` only, and a strict
Content-Security-Policy forbids inline script.
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any

from scopeguard.data import Dataset, load_dataset, read_jsonl
from scopeguard.errors import InputError
from scopeguard.review.store import LabelStore

__all__ = ["load_items", "make_server", "serve"]

logger = logging.getLogger(__name__)

_STATIC = {"app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8"}
_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'"
_RESPONSE_KEYS = ("response", "reference_response")


def _responses(dataset_dir: Path) -> dict[str, str]:
    path = dataset_dir / "responses.jsonl"
    if not path.exists():
        return {}
    out: dict[str, str] = {}
    for row in read_jsonl(path):
        qid = row.get("question_id") or row.get("id")
        if qid and isinstance(row.get("response"), str):
            out[str(qid)] = row["response"]
    return out


def load_items(dataset: Dataset, dataset_dir: Path) -> list[dict[str, Any]]:
    """The review items: question, document, provenance and optional response."""
    responses = _responses(dataset_dir)
    items = []
    for q in dataset.questions:
        doc = dataset.documents[q.doc_id]
        response = responses.get(q.id) or next(
            (q.metadata[k] for k in _RESPONSE_KEYS if isinstance(q.metadata.get(k), str)), None
        )
        provenance = {k: v for k, v in q.metadata.items() if k not in _RESPONSE_KEYS}
        items.append(
            {
                "id": q.id,
                "doc_id": q.doc_id,
                "question": q.question,
                "generator_label": q.label,
                "document": doc.text,
                "title": str(doc.metadata.get("title", "")),
                "provenance": provenance,
                "response": response,
            }
        )
    return items


class _Handler(BaseHTTPRequestHandler):
    server: _ReviewServer

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("review: " + format, *args)

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", _CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, obj: Any) -> None:
        self._send(
            status, json.dumps(obj, ensure_ascii=False).encode("utf-8"), "application/json; charset=utf-8"
        )

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        static = resources.files("scopeguard.review").joinpath("static")
        if path in ("/", "/index.html"):
            self._send(HTTPStatus.OK, static.joinpath("index.html").read_bytes(), "text/html; charset=utf-8")
        elif path.startswith("/static/") and path[8:] in _STATIC:
            self._send(HTTPStatus.OK, static.joinpath(path[8:]).read_bytes(), _STATIC[path[8:]])
        elif path == "/api/items":
            srv = self.server
            self._json(
                HTTPStatus.OK,
                {"annotator": srv.store.annotator, "items": srv.items, "labels": srv.store.labels()},
            )
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no such path: {path}"})

    def do_POST(self) -> None:
        if self.path != "/api/label":
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no such path: {self.path}"})
            return
        try:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(min(length, 65536)) or b"{}")
            qid = str(body["question_id"])
            if qid not in self.server.ids:
                raise InputError(f"unknown question id {qid!r}")
            row = self.server.store.set(qid, body["field"], body.get("value"))
        except (KeyError, ValueError, InputError) as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return
        self._json(HTTPStatus.OK, row)


class _ReviewServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], items: list[dict[str, Any]], store: LabelStore) -> None:
        super().__init__(address, _Handler)
        self.items = items
        self.ids = {i["id"] for i in items}
        self.store = store


def make_server(
    dataset_dir: str | Path, *, annotator: str, host: str = "127.0.0.1", port: int = 8765
) -> ThreadingHTTPServer:
    """Build (but do not start) the review server for ``dataset_dir``; ``port=0`` picks a free one."""
    root = Path(dataset_dir)
    dataset = load_dataset(root)
    return _ReviewServer((host, port), load_items(dataset, root), LabelStore(root, annotator))


def serve(dataset_dir: str | Path, *, annotator: str, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve until interrupted."""
    server = make_server(dataset_dir, annotator=annotator, host=host, port=port)
    logger.info("review page on http://%s:%d/", *server.server_address[:2])
    try:
        server.serve_forever()
    finally:
        server.server_close()
