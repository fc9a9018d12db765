"""A local review server (standard library only): one page, a JSON API, no external resources.

One server serves either kind of folder; what it serves is chosen by the folder:

- a dataset folder (``documents.jsonl`` + ``questions.jsonl``): ``GET /api/items`` gives every
  question with its document, provenance, response (when the run has one) and this annotator's
  labels; ``POST /api/label`` takes ``{"question_id", "field", "value"}``
  (labels in ``DIR/reviews/<annotator>.jsonl``);
- a calibration folder (``to_label.jsonl``, :mod:`scopeguard.review._calibration`):
  ``GET /api/items`` gives the chosen questions with their chunks, the labels, the running
  estimate and the last completion; ``POST /api/label`` takes ``{"id", "label"}``
  (labels in ``DIR/labels.jsonl``).

Routes: ``GET /`` the folder kind's page; ``GET /static/<file>`` its script and style;
``GET /api/items`` (with the session's write token); ``POST /api/label``.

Document text is untrusted: the page renders it with ``textContent`` only, and a strict
Content-Security-Policy forbids inline script and framing.

Other web pages the annotator visits must not read or rewrite the labels:

- every request must carry a ``Host`` of this server (``127.0.0.1``, ``localhost`` or ``[::1]``
  with the served port, or the host it was bound to; any IP literal when bound to all
  interfaces), which defeats DNS rebinding; a request with an ``Origin`` must come from one of
  those origins (403 otherwise);
- a write needs the per-session random token (served by ``GET /api/items``, which other origins
  cannot read) in the ``X-Scopeguard-Token`` header (403), ``Content-Type: application/json``
  (415, so no cross-site form or ``text/plain`` request gets through) and a JSON object body
  with a valid ``Content-Length`` (400, 411 or 413 otherwise).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import re
import secrets
import socket
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from scopeguard.data import Dataset, load_dataset, read_jsonl
from scopeguard.errors import InputError
from scopeguard.review._calibration import CalibrationReview, Estimate, OnComplete, is_calibration_folder
from scopeguard.review.store import DEFAULT_ANNOTATOR, LabelStore

__all__ = ["ReviewFolder", "load_items", "make_server", "serve"]

logger = logging.getLogger(__name__)

_STATIC = {
    "api.js": "text/javascript; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "calibrate.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
_WILDCARD = ("", "0.0.0.0", "::")
_TOKEN_HEADER = "X-Scopeguard-Token"
_MAX_BODY = 65536
_DIGITS = re.compile(r"[0-9]{1,12}")
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


class ReviewFolder(Protocol):
    """What the server serves for one kind of folder: its page (a file of ``static/``), the data
    ``GET /api/items`` answers, and label writes (a bad one raises
    :class:`~scopeguard.errors.InputError`, answered 400 with its message)."""

    page: str

    def snapshot(self) -> dict[str, Any]: ...  # an InputError is answered 409 with its message

    def label(self, body: dict[str, Any]) -> dict[str, Any]: ...


class _DatasetReview:
    """A dataset folder: one annotator labels generated questions (scope, and defusion where the
    run has a response)."""

    page = "index.html"

    def __init__(self, items: list[dict[str, Any]], store: LabelStore) -> None:
        self.items = items
        self.ids = {i["id"] for i in items}
        self.store = store

    def snapshot(self) -> dict[str, Any]:
        return {"annotator": self.store.annotator, "items": self.items, "labels": self.store.labels()}

    def label(self, body: dict[str, Any]) -> dict[str, Any]:
        qid, field, value = body.get("question_id"), body.get("field"), body.get("value")
        if not isinstance(qid, str) or not isinstance(field, str) or not isinstance(value, (str, type(None))):
            raise InputError("body needs string 'question_id' and 'field', and 'value' (string or null)")
        if qid not in self.ids:
            raise InputError(f"unknown question id {qid!r}")
        return self.store.set(qid, field, value)  # type: ignore[arg-type]


class _Rejected(Exception):
    """A request refused with ``status`` and a one-line reason (answered as JSON)."""

    def __init__(self, status: HTTPStatus, reason: str) -> None:
        super().__init__(reason)
        self.status = status


class _Handler(BaseHTTPRequestHandler):
    server: _ReviewServer
    timeout = 30  # seconds a client may stall mid-request
    _body_read = False

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("review: " + format, *args)

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", _CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, obj: Any) -> None:
        self._send(
            status, json.dumps(obj, ensure_ascii=False).encode("utf-8"), "application/json; charset=utf-8"
        )

    def _check_origin(self) -> None:
        """Refuse a foreign ``Host`` (DNS rebinding) and a foreign ``Origin`` (another web page)."""
        if not self.server.host_allowed(self.headers.get("Host")):
            raise _Rejected(HTTPStatus.FORBIDDEN, "this server only answers requests addressed to itself")
        origin = self.headers.get("Origin")
        if origin is not None and not self.server.origin_allowed(origin):
            raise _Rejected(HTTPStatus.FORBIDDEN, "cross-origin requests are not allowed")

    def _handle(self, route: Callable[[], None]) -> None:
        try:
            self._check_origin()
            route()
        except _Rejected as exc:
            self.close_connection = True
            self._json(exc.status, {"error": str(exc)})
            if self.command != "GET" and not self._body_read:
                self._linger()
        except Exception:  # never a traceback to the client, never a dropped connection
            logger.exception("review: %s %s failed", self.command, self.path)
            self.close_connection = True
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": "internal error (see the server log)"})

    def _linger(self) -> None:
        """Discard what a refused client still sends, then close (a "lingering close"): closing a
        socket with unread input resets the connection, and the client would lose the answer."""
        deadline = time.monotonic() + 2.0
        try:
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(0.5)
            while time.monotonic() < deadline and self.connection.recv(65536):
                pass
        except OSError:
            pass

    def do_GET(self) -> None:
        self._handle(self._get)

    def do_POST(self) -> None:
        self._handle(self._post)

    def _get(self) -> None:
        path = self.path.split("?", 1)[0]
        static = resources.files("scopeguard.review").joinpath("static")
        if path in ("/", "/index.html"):
            page = static.joinpath(self.server.folder.page).read_bytes()
            self._send(HTTPStatus.OK, page, "text/html; charset=utf-8")
        elif path.startswith("/static/") and path[8:] in _STATIC:
            self._send(HTTPStatus.OK, static.joinpath(path[8:]).read_bytes(), _STATIC[path[8:]])
        elif path == "/api/items":
            try:
                snapshot = self.server.folder.snapshot()
            except InputError as exc:  # a label file another tool broke since the server started
                raise _Rejected(HTTPStatus.CONFLICT, str(exc)) from None
            self._json(HTTPStatus.OK, {**snapshot, "token": self.server.token})
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no such path: {path}"})

    def _read_json_object(self) -> dict[str, Any]:
        media_type = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if media_type != "application/json":
            raise _Rejected(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "writes need Content-Type: application/json")
        token = self.headers.get(_TOKEN_HEADER) or ""
        if not hmac.compare_digest(token.encode("utf-8", "replace"), self.server.token.encode("ascii")):
            raise _Rejected(HTTPStatus.FORBIDDEN, f"missing or wrong {_TOKEN_HEADER} header")
        raw_length = self.headers.get("Content-Length")
        if raw_length is None:
            raise _Rejected(HTTPStatus.LENGTH_REQUIRED, "Content-Length is required")
        if not _DIGITS.fullmatch(raw_length.strip()):
            raise _Rejected(HTTPStatus.BAD_REQUEST, f"invalid Content-Length {raw_length!r}")
        length = int(raw_length)
        if length > _MAX_BODY:
            raise _Rejected(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {_MAX_BODY} bytes")
        data = self.rfile.read(length)
        self._body_read = True
        try:
            body = json.loads(data)
        except ValueError as exc:  # also UnicodeDecodeError
            raise _Rejected(HTTPStatus.BAD_REQUEST, f"body is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise _Rejected(HTTPStatus.BAD_REQUEST, "body must be a JSON object")
        return body

    def _post(self) -> None:
        if self.path != "/api/label":
            raise _Rejected(HTTPStatus.NOT_FOUND, f"no such path: {self.path}")
        body = self._read_json_object()
        try:
            answer = self.server.folder.label(body)
        except InputError as exc:
            raise _Rejected(HTTPStatus.BAD_REQUEST, str(exc)) from None
        self._json(HTTPStatus.OK, answer)


def _host_port(host: str) -> tuple[str, int] | None:
    """``("127.0.0.1", 8765)`` from ``"127.0.0.1:8765"`` (``[::1]`` unbracketed, 80 by default)."""
    try:
        parts = urlsplit("//" + host.strip())
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname or parts.username is not None or parts.path or parts.query or parts.fragment:
        return None
    return parts.hostname, port or 80


def _ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class _ReviewServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], folder: ReviewFolder) -> None:
        super().__init__(address, _Handler)
        self.folder = folder
        self.token = secrets.token_urlsafe(32)
        bound = address[0].strip().lower()
        self.port = int(self.server_address[1])
        # Bound to all interfaces, the annotator may use any of the machine's addresses: an IP
        # literal in Host cannot come from DNS rebinding, so any one is accepted then.
        self._any_ip = bound in _WILDCARD
        self._names = {*_LOOPBACK_NAMES} | (set() if self._any_ip else {bound.strip("[]")})

    def host_allowed(self, host: str | None) -> bool:
        """Whether a ``Host`` header (or an origin's host part) names this server."""
        parsed = _host_port(host or "")
        if parsed is None or parsed[1] != self.port:
            return False
        return parsed[0] in self._names or (self._any_ip and _ip_literal(parsed[0]))

    def origin_allowed(self, origin: str) -> bool:
        """Whether an ``Origin`` header is this server's own origin (``http://`` + an allowed host)."""
        scheme, sep, host = origin.strip().partition("://")
        return sep == "://" and scheme.lower() == "http" and self.host_allowed(host)


def make_server(
    folder: str | Path,
    *,
    annotator: str = DEFAULT_ANNOTATOR,
    host: str = "127.0.0.1",
    port: int = 8765,
    estimate: Estimate | None = None,
    on_complete: OnComplete | None = None,
) -> ThreadingHTTPServer:
    """Build (but do not start) the review server for ``folder``; ``port=0`` picks a free one.

    A folder with ``to_label.jsonl`` is a calibration folder: its chosen questions are labelled
    into ``labels.jsonl``; ``estimate`` gives the running estimate shown after each label and
    ``on_complete`` runs when every question has a label (both optional; neither can break
    labelling). Any other folder is a dataset folder, labelled by ``annotator`` (who is not
    asked for in a calibration folder, as ``estimate`` and ``on_complete`` are not in a dataset).
    """
    root = Path(folder)
    review: ReviewFolder
    if is_calibration_folder(root):
        review = CalibrationReview(root, estimate=estimate, on_complete=on_complete)
    else:
        review = _DatasetReview(load_items(load_dataset(root), root), LabelStore(root, annotator))
    return _ReviewServer((host, port), review)


def serve(folder: str | Path, **options: Any) -> None:
    """Serve until interrupted; ``options`` are :func:`make_server`'s."""
    server = make_server(folder, **options)
    logger.info("review page on http://%s:%d/", *server.server_address[:2])
    try:
        server.serve_forever()
    finally:
        server.server_close()
