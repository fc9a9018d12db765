"""The review page resists other web pages: raw HTTP requests against a running server.

A page the annotator visits can send requests to 127.0.0.1 (a ``text/plain`` POST needs no CORS
preflight) and, through DNS rebinding, read the answers under its own host name. Only requests
addressed to this server, from its own origin, carrying the session's token may write labels.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scopeguard.review import make_server

LABEL = {"question_id": "d1_ins_1", "field": "scope", "value": "in_scope"}


class Client:
    def __init__(self, port: int) -> None:
        self.port = port
        self.host = f"127.0.0.1:{port}"
        self.token = self.request("GET", "/api/items")[1]["token"]

    def request(
        self, method: str, path: str, body: bytes | str = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers={"Host": self.host, **(headers or {})})
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        ctype = resp.getheader("Content-Type", "")
        return resp.status, json.loads(data) if ctype.startswith("application/json") else data

    def post(self, payload: Any = LABEL, **headers: str) -> tuple[int, Any]:
        base = {"Content-Type": "application/json", "X-Scopeguard-Token": self.token}
        return self.request("POST", "/api/label", json.dumps(payload), {**base, **headers})


@pytest.fixture()
def client(review_dir: Path) -> Iterator[Client]:
    server = make_server(review_dir, annotator="tester", port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Client(int(server.server_address[1]))
    finally:
        server.shutdown()
        server.server_close()


def _labels(review_dir: Path) -> str:
    path = review_dir / "reviews" / "tester.jsonl"
    return path.read_text() if path.exists() else ""


def test_own_page_writes_with_token(client: Client, review_dir: Path) -> None:
    origin = f"http://{client.host}"
    status, row = client.post(Origin=origin)
    assert status == 200 and row["scope"] == "in_scope"
    status, _ = client.post(Host=f"localhost:{client.port}", Origin=f"http://localhost:{client.port}")
    assert status == 200
    assert '"in_scope"' in _labels(review_dir)


def test_cross_site_text_plain_post_is_refused(client: Client, review_dir: Path) -> None:
    """What a form or fetch(no-cors) on another site sends: no token, text/plain, foreign Origin."""
    status, body = client.request(
        "POST",
        "/api/label",
        json.dumps(LABEL),
        {"Content-Type": "text/plain;charset=UTF-8", "Origin": "http://evil.example"},
    )
    assert status == 403 and "cross-origin" in body["error"]
    assert _labels(review_dir) == ""


def test_foreign_origin_is_refused_even_with_the_token(client: Client, review_dir: Path) -> None:
    for origin in (
        "http://evil.example",
        "null",
        f"https://{client.host}",
        f"http://127.0.0.1:{client.port + 1}",
    ):
        status, _ = client.post(Origin=origin)
        assert status == 403, origin
    assert _labels(review_dir) == ""


@pytest.mark.parametrize(
    "host", ["evil.example:{port}", "127.0.0.1.nip.io:{port}", "127.0.0.1:1", "", "a@127.0.0.1:{port}"]
)
def test_foreign_host_is_refused_dns_rebinding(client: Client, host: str) -> None:
    host = host.format(port=client.port)
    for path in ("/", "/api/items", "/static/app.js"):
        status, body = client.request("GET", path, headers={"Host": host})
        assert status == 403, (host, path)
        assert "token" not in body and "items" not in body
    status, _ = client.post(Host=host)
    assert status == 403


def test_write_without_or_with_a_wrong_token_is_refused(client: Client, review_dir: Path) -> None:
    status, body = client.request(
        "POST", "/api/label", json.dumps(LABEL), {"Content-Type": "application/json"}
    )
    assert status == 403 and "X-Scopeguard-Token" in body["error"]
    status, _ = client.post(**{"X-Scopeguard-Token": "guess"})
    assert status == 403
    assert _labels(review_dir) == ""


@pytest.mark.parametrize(
    "ctype", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]
)
def test_write_needs_json_content_type(client: Client, ctype: str, review_dir: Path) -> None:
    status, _ = client.post(**{"Content-Type": ctype})
    assert status == 415
    assert _labels(review_dir) == ""


@pytest.mark.parametrize("payload", [["d1_ins_1", "scope", "in_scope"], "d1_ins_1", 3, None])
def test_non_object_json_body_is_a_400(client: Client, payload: Any) -> None:
    status, body = client.post(payload)
    assert status == 400 and "JSON object" in body["error"]


@pytest.mark.parametrize(
    "payload",
    [
        {"question_id": ["d1_ins_1"], "field": "scope", "value": "in_scope"},
        {"question_id": "d1_ins_1", "field": {"a": 1}, "value": "in_scope"},
        {"question_id": "d1_ins_1", "field": "scope", "value": ["in_scope"]},
        {"question_id": "d1_ins_1", "field": "colour", "value": "red"},
    ],
)
def test_malformed_fields_are_a_400(client: Client, payload: dict[str, Any]) -> None:
    status, body = client.post(payload)
    assert status == 400 and body["error"]


@pytest.mark.parametrize(
    ("length", "status"), [("-1", 400), ("-5", 400), ("abc", 400), ("1e3", 400), ("99999999", 413)]
)
def test_bad_content_length_is_answered_not_hung(client: Client, length: str, status: int) -> None:
    got, body = client.post(**{"Content-Length": length})
    assert got == status and body["error"]


def test_body_that_is_not_json_is_a_400(client: Client) -> None:
    base = {"Content-Type": "application/json", "X-Scopeguard-Token": client.token}
    for raw in (b"{not json", b"\xff\xfe\x00"):
        status, body = client.request("POST", "/api/label", raw, base)
        assert status == 400 and "not JSON" in body["error"]


def test_responses_forbid_framing(client: Client) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", client.port, timeout=10)
    conn.request("GET", "/")
    resp = conn.getresponse()
    resp.read()
    conn.close()
    assert resp.status == 200
    assert "frame-ancestors 'none'" in resp.getheader("Content-Security-Policy", "")
    assert resp.getheader("X-Frame-Options") == "DENY"


def test_bound_to_all_interfaces_accepts_ip_hosts_only(review_dir: Path) -> None:
    server = make_server(review_dir, annotator="tester", host="0.0.0.0", port=0)
    port = int(server.server_address[1])
    srv: Any = server
    assert srv.host_allowed(f"192.168.1.20:{port}") and srv.host_allowed(f"localhost:{port}")
    assert not srv.host_allowed(f"evil.example:{port}") and not srv.host_allowed("192.168.1.20:1")
    server.server_close()


# A calibration folder is served by the same server, with the same checks on its label writes.
CALIBRATION_LABEL = {"id": "q1", "label": "in_scope"}


@pytest.fixture()
def calibration_client(calibration_dir: Path) -> Iterator[Client]:
    from tests.review.chosen_folder import serving

    with serving(calibration_dir) as api:
        yield Client(api.port)


def _calibration_labels(calibration_dir: Path) -> str:
    path = calibration_dir / "labels.jsonl"
    return path.read_text() if path.exists() else ""


def test_calibration_page_writes_with_token_from_its_own_origin(
    calibration_client: Client, calibration_dir: Path
) -> None:
    status, body = calibration_client.post(CALIBRATION_LABEL, Origin=f"http://{calibration_client.host}")
    assert status == 200 and body["labels"] == {"q1": "in_scope"}
    assert '"in_scope"' in _calibration_labels(calibration_dir)


def test_calibration_label_writes_are_refused_like_dataset_ones(
    calibration_client: Client, calibration_dir: Path
) -> None:
    c = calibration_client
    # another site's form or fetch(no-cors): no token, text/plain, a foreign Origin
    status, _ = c.request(
        "POST",
        "/api/label",
        json.dumps(CALIBRATION_LABEL),
        {"Content-Type": "text/plain;charset=UTF-8", "Origin": "http://evil.example"},
    )
    assert status == 403
    assert c.post(CALIBRATION_LABEL, Origin="http://evil.example")[0] == 403
    assert c.post(CALIBRATION_LABEL, Origin="null")[0] == 403
    assert c.post(CALIBRATION_LABEL, Host=f"evil.example:{c.port}")[0] == 403  # DNS rebinding
    assert c.post(CALIBRATION_LABEL, **{"X-Scopeguard-Token": "guess"})[0] == 403
    no_token = c.request(
        "POST", "/api/label", json.dumps(CALIBRATION_LABEL), {"Content-Type": "application/json"}
    )
    assert no_token[0] == 403 and "X-Scopeguard-Token" in no_token[1]["error"]
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        assert c.post(CALIBRATION_LABEL, **{"Content-Type": ctype})[0] == 415
    assert c.post(["q1", "in_scope"])[0] == 400
    assert c.post(CALIBRATION_LABEL, **{"Content-Length": "99999999"})[0] == 413
    assert _calibration_labels(calibration_dir) == ""


def test_calibration_items_are_not_served_to_a_foreign_host(calibration_client: Client) -> None:
    for path in ("/", "/api/items", "/static/calibrate.js"):
        status, body = calibration_client.request("GET", path, headers={"Host": "evil.example"})
        assert status == 403 and "token" not in body and "items" not in body
