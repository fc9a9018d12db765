"""Calibration folders for the review tests: invented questions as ``scopeguard calibrate --select``
writes them to ``to_label.jsonl``."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from scopeguard.review import make_server, read_question_labels

#: a chunk that tries to run script in the page
HOSTILE_CHUNK = 'Pier <script>window.__pwned = 1;</script> <img src=x onerror="window.__pwned = 2"> notes'


def chosen_questions(n: int) -> list[dict[str, Any]]:
    """``n`` invented questions; odd ones have two chunks, even ones one, question 3's second
    chunk carries HTML/script. Scores are distinctive (0.4331, 0.4341, ...) so that a test can
    see they are never shown."""
    rows: list[dict[str, Any]] = []
    for i in range(1, n + 1):
        chunks = [
            {"id": f"c{i}a", "text": f"Ferry {i} leaves pier {i % 7} every {10 + i} minutes."},
            {
                "id": f"c{i}b",
                "text": HOSTILE_CHUNK if i == 3 else f"The pier {i % 7} cafe opens at {i % 12 + 1} am.",
            },
        ]
        rows.append(
            {
                "id": f"q{i}",
                "question": f"How often does ferry {i} leave?",
                "documents": chunks[: 1 + i % 2],
                "score": round(0.4321 + i / 1000, 4),
                "weight": 4.5,
                "stratum": "upper" if i % 2 else "lower",
            }
        )
    return rows


def write_chosen(folder: Path, n: int) -> Path:
    """A calibration folder with ``n`` chosen questions."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "to_label.jsonl").write_text("".join(json.dumps(r) + "\n" for r in chosen_questions(n)))
    return folder


def label_rows(folder: Path) -> list[dict[str, Any]]:
    """The rows of ``folder/labels.jsonl``."""
    return [json.loads(line) for line in (folder / "labels.jsonl").read_text().splitlines()]


class Api:
    """Requests to a running review server, as its own page sends them."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.token = self.items()[1]["token"]

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        headers = {"Host": f"127.0.0.1:{self.port}"}
        if method == "POST":
            headers |= {"Content-Type": "application/json", "X-Scopeguard-Token": self.token}
        try:
            conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read())
        finally:
            conn.close()

    def items(self) -> tuple[int, Any]:
        return self.request("GET", "/api/items")

    def label(self, qid: str, label: str) -> tuple[int, Any]:
        return self.request("POST", "/api/label", {"id": qid, "label": label})


@contextmanager
def serving(folder: Path, **kwargs: Any) -> Iterator[Api]:
    """A review server on ``folder`` (``make_server``'s keyword arguments), stopped afterwards."""
    server = make_server(folder, port=0, **kwargs)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Api(int(server.server_address[1]))
    finally:
        server.shutdown()
        server.server_close()


class Calls:
    """Test callables for the calibration interface: they read the folder as the real ones do."""

    def __init__(self, folder: Path, *, fail_estimate: bool = False, fail_finish: bool = False) -> None:
        self.folder = folder
        self.fail_estimate = fail_estimate
        self.fail_finish = fail_finish
        self.estimates = 0
        self.finished: list[dict[str, str]] = []

    def estimate(self) -> dict[str, Any] | None:
        self.estimates += 1
        if self.fail_estimate:
            raise RuntimeError("the estimate broke")
        labels = read_question_labels(self.folder / "labels.jsonl")
        if not labels:
            return None
        out = sum(lab.label == "out_of_scope" for lab in labels.values())
        return {"text": f"{out} of {len(labels)} labelled out of scope", "threshold": 0.5}

    def on_complete(self) -> str:
        self.finished.append(
            {k: v.label for k, v in read_question_labels(self.folder / "labels.jsonl").items()}
        )
        if self.fail_finish:
            raise ValueError("no in-scope questions\nTraceback (most recent call last): ...")
        return f"profile written from {len(self.finished[-1])} labels"
