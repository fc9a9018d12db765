"""The review server on a calibration folder: the chosen questions, labels.jsonl, the running
estimate and the completion (a real server on a free port, requests as the page sends them)."""

from __future__ import annotations

import json
import logging
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from scopeguard.errors import DatasetError, InputError
from scopeguard.review import make_server, read_question_labels
from scopeguard.review.store import QuestionLabelStore
from tests.review.chosen_folder import Calls, chosen_questions, label_rows, serving, write_chosen


def _by_id(folder: Path) -> dict[str, str]:
    rows = label_rows(folder)
    assert len(rows) == len({r["id"] for r in rows}), "two rows for one id"
    return {r["id"]: r["label"] for r in rows}


def test_items_carry_the_chunks_and_nothing_of_the_score(calibration_dir: Path) -> None:
    with serving(calibration_dir) as api:
        status, data = api.items()
    assert status == 200 and data["mode"] == "calibration"
    assert [i["id"] for i in data["items"]] == ["q1", "q2", "q3", "q4"]
    first = data["items"][0]
    assert first["question"] == "How often does ferry 1 leave?"
    assert first["documents"] == [
        {"id": "c1a", "text": "Ferry 1 leaves pier 1 every 11 minutes."},
        {"id": "c1b", "text": "The pier 1 cafe opens at 2 am."},
    ]
    assert len(data["items"][1]["documents"]) == 1
    assert data["labels"] == {} and data["estimate"] is None and data["done"] is None
    sent = json.dumps(data)
    assert not {"score", "weight", "stratum"} & {k for i in data["items"] for k in i}
    assert "0.4331" not in sent and "upper" not in sent  # the score is never sent: labels are blind


def test_the_page_is_the_calibration_page(calibration_dir: Path) -> None:
    with serving(calibration_dir) as api:
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=10)
        conn.request("GET", "/")
        html = conn.getresponse().read().decode()
        conn.close()
    assert "/static/calibrate.js" in html and "/static/app.js" not in html


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"id": "q99", "label": "in_scope"}, "unknown question id 'q99'"),
        ({"id": "q1", "label": "maybe"}, "invalid label 'maybe'; valid: in_scope, out_of_scope, unsure"),
        ({"id": "q1", "label": None}, "body needs string 'id' and 'label'"),
        ({"question_id": "q1", "field": "scope", "value": "in_scope"}, "body needs string 'id' and 'label'"),
        ({"id": ["q1"], "label": "in_scope"}, "body needs string 'id' and 'label'"),
    ],
)
def test_a_bad_label_is_a_400_with_a_clear_message(
    calibration_dir: Path, payload: dict[str, Any], message: str
) -> None:
    with serving(calibration_dir) as api:
        status, body = api.request("POST", "/api/label", payload)
    assert status == 400 and body == {"error": message}
    assert not (calibration_dir / "labels.jsonl").exists()


def test_every_label_rewrites_the_file_one_row_per_id(calibration_dir: Path) -> None:
    with serving(calibration_dir) as api:
        assert api.label("q2", "in_scope")[0] == 200
        status, body = api.label("q1", "unsure")
        assert status == 200 and body["labels"] == {"q2": "in_scope", "q1": "unsure"}
        assert _by_id(calibration_dir) == {"q2": "in_scope", "q1": "unsure"}
        status, body = api.label("q2", "out_of_scope")  # changed: the last label wins
        assert body == {
            "id": "q2",
            "label": "out_of_scope",
            "labels": {"q2": "out_of_scope", "q1": "unsure"},
            "estimate": None,
            "done": None,
        }
    rows = label_rows(calibration_dir)
    assert [r["id"] for r in rows] == ["q2", "q1"]
    assert set(rows[0]) == {"id", "label", "updated"}
    assert datetime.fromisoformat(rows[0]["updated"]).utcoffset() is not None
    assert not [p.name for p in calibration_dir.iterdir() if p.name.endswith(".tmp")]


def test_a_restarted_server_and_a_second_one_see_the_labels(calibration_dir: Path) -> None:
    with serving(calibration_dir) as api:
        api.label("q1", "in_scope")
        api.label("q3", "out_of_scope")
    with serving(calibration_dir) as first, serving(calibration_dir) as second:
        assert first.items()[1]["labels"] == {"q1": "in_scope", "q3": "out_of_scope"}
        second.label("q1", "unsure")  # another tab on another server: last write wins per id
        first.label("q2", "in_scope")  # ... and keeps what the other one wrote
        assert first.items()[1]["labels"] == {"q1": "unsure", "q3": "out_of_scope", "q2": "in_scope"}
    assert _by_id(calibration_dir) == {"q1": "unsure", "q3": "out_of_scope", "q2": "in_scope"}


def test_labels_written_by_another_tool_are_picked_up(calibration_dir: Path) -> None:
    other = [
        {"id": "q1", "label": "in_scope", "updated": "2026-12-02T05:01:02+00:00", "by": "sheet"},
        {"id": "q4", "label": "out_of_scope"},
        {"id": "old7", "label": "unsure", "note": "not one of the chosen"},
    ]
    (calibration_dir / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in other))
    with serving(calibration_dir) as api:
        assert api.items()[1]["labels"] == {"q1": "in_scope", "q4": "out_of_scope"}
        with (calibration_dir / "labels.jsonl").open("a") as fh:  # written while the server runs
            fh.write(
                json.dumps({"id": "q2", "label": "unsure", "updated": "2026-12-02T06:00:00+00:00"}) + "\n"
            )
        assert api.items()[1]["labels"] == {"q1": "in_scope", "q4": "out_of_scope", "q2": "unsure"}
        api.label("q3", "in_scope")
    assert _by_id(calibration_dir) == {
        "q1": "in_scope",
        "q4": "out_of_scope",
        "old7": "unsure",
        "q2": "unsure",
        "q3": "in_scope",
    }
    rows = {r["id"]: r for r in label_rows(calibration_dir)}
    assert rows["q1"] == {"id": "q1", "label": "in_scope", "updated": "2026-12-02T05:01:02+00:00"}
    assert rows["q4"] == {"id": "q4", "label": "out_of_scope"}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "labels.jsonl:2: invalid JSON"),
        ('{"id": "q2", "label": "yes"}', "labels.jsonl:2: invalid label 'yes' for 'q2'"),
        ('{"label": "in_scope"}', "labels.jsonl:2: each label needs a string 'id'"),
        ('["q2", "in_scope"]', "labels.jsonl:2: each line must be a JSON object"),
    ],
)
def test_an_unreadable_labels_file_names_its_line(calibration_dir: Path, line: str, message: str) -> None:
    path = calibration_dir / "labels.jsonl"
    path.write_text(json.dumps({"id": "q1", "label": "in_scope"}) + "\n" + line + "\n")
    with pytest.raises(DatasetError, match=message.replace("(", r"\(")) as exc:
        make_server(calibration_dir, port=0)
    assert exc.value.line == 2 and "\n" not in str(exc.value)
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        read_question_labels(path)


def test_a_labels_file_broken_while_serving_is_refused_not_overwritten(calibration_dir: Path) -> None:
    with serving(calibration_dir) as api:
        api.label("q1", "in_scope")
        path = calibration_dir / "labels.jsonl"
        broken = path.read_text() + '{"id": "q2", "label": "perhaps"}\n'
        path.write_text(broken)
        status, body = api.label("q3", "in_scope")
        assert status == 400 and "labels.jsonl:2: invalid label 'perhaps'" in body["error"]
        status, body = api.items()
        assert status == 409 and "labels.jsonl:2: invalid label 'perhaps'" in body["error"]
    assert path.read_text() == broken


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"to_label\.jsonl:2: invalid JSON"),
        ('{"id": "q9", "documents": [{"id": "c", "text": "t"}]}', r"to_label\.jsonl:2: question 'q9' has no"),
        ('{"question": "Why?", "documents": []}', r"to_label\.jsonl:2: each question needs"),
        ('{"id": "q9", "question": "Why?", "documents": []}', r"to_label\.jsonl:2: 'documents' must be"),
        ('{"id": "q9", "question": "Why?", "documents": [{"id": "c"}]}', r"to_label\.jsonl:2: chunk 1 needs"),
        (
            '{"id": "q9", "question": "Why?", "documents": [{"text": "t"}]}',
            r"to_label\.jsonl:2: chunk 1 needs",
        ),
        (
            '{"id": "q1", "question": "Why?", "documents": [{"id": "c", "text": "t"}]}',
            "duplicate question id",
        ),
    ],
)
def test_a_malformed_to_label_line_is_one_line_naming_it(tmp_path: Path, line: str, message: str) -> None:
    good = json.dumps(chosen_questions(1)[0])
    (tmp_path / "to_label.jsonl").write_text(good + "\n" + line + "\n")
    with pytest.raises(InputError, match=message) as exc:
        make_server(tmp_path, port=0)
    assert "\n" not in str(exc.value) and str(tmp_path / "to_label.jsonl") in str(exc.value)


def test_an_empty_to_label_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "to_label.jsonl").write_text("")
    with pytest.raises(InputError, match="no questions to label"):
        make_server(tmp_path, port=0)


def test_the_estimate_comes_with_each_label_and_the_items(calibration_dir: Path) -> None:
    calls = Calls(calibration_dir)
    with serving(calibration_dir, estimate=calls.estimate) as api:
        assert api.items()[1]["estimate"] is None  # the callable said None: nothing to show
        assert api.label("q1", "out_of_scope")[1]["estimate"] == "1 of 1 labelled out of scope"
        assert api.label("q2", "in_scope")[1]["estimate"] == "1 of 2 labelled out of scope"
        assert api.items()[1]["estimate"] == "1 of 2 labelled out of scope"
    assert calls.estimates == 5  # these four requests and the one that fetched the token


def test_a_failing_estimate_is_logged_and_labelling_goes_on(
    calibration_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    calls = Calls(calibration_dir, fail_estimate=True)
    with (
        caplog.at_level(logging.ERROR, logger="scopeguard.review"),
        serving(calibration_dir, estimate=calls.estimate) as api,
    ):
        status, body = api.label("q1", "in_scope")
        assert status == 200 and body["estimate"] is None
        assert api.items()[1]["estimate"] is None
    assert _by_id(calibration_dir) == {"q1": "in_scope"}
    assert "the running estimate failed" in caplog.text and "the estimate broke" in caplog.text


def test_an_estimate_without_text_shows_nothing(calibration_dir: Path) -> None:
    with serving(calibration_dir, estimate=lambda: {"threshold": 0.7}) as api:
        assert api.label("q1", "in_scope")[1]["estimate"] is None


def test_on_complete_runs_once_per_completion(calibration_dir: Path) -> None:
    calls = Calls(calibration_dir)
    with serving(calibration_dir, on_complete=calls.on_complete, estimate=calls.estimate) as api:
        for qid in ("q1", "q2", "q3"):
            assert api.label(qid, "in_scope")[1]["done"] is None
        assert calls.finished == []
        status, body = api.label("q4", "out_of_scope")
        assert status == 200
        assert body["done"] == {"ok": True, "text": "Done: profile written from 4 labels"}
        assert calls.finished == [
            {"q1": "in_scope", "q2": "in_scope", "q3": "in_scope", "q4": "out_of_scope"}
        ]
        assert api.items()[1]["done"] == body["done"]  # a reload shows it too
        api.label("q4", "out_of_scope")  # the same label again: nothing changed, no new call
        assert len(calls.finished) == 1
        body = api.label("q2", "unsure")[1]  # relabelled after completion: called again
        assert body["done"]["ok"] and calls.finished[-1]["q2"] == "unsure" and len(calls.finished) == 2


def test_complete_without_on_complete_says_done(calibration_dir: Path) -> None:
    with serving(calibration_dir) as api:
        for qid in ("q1", "q2", "q3", "q4"):
            body = api.label(qid, "unsure")[1]
    assert body["done"] == {"ok": True, "text": "Done: all 4 questions are labelled."}


def test_a_failing_on_complete_is_one_line_and_logged(
    calibration_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    calls = Calls(calibration_dir, fail_finish=True)
    with (
        caplog.at_level(logging.ERROR, logger="scopeguard.review"),
        serving(calibration_dir, on_complete=calls.on_complete) as api,
    ):
        for qid in ("q1", "q2", "q3", "q4"):
            status, body = api.label(qid, "out_of_scope")
            assert status == 200
        assert body["done"]["ok"] is False
        assert body["done"]["text"] == "Every label is saved, but finishing failed: no in-scope questions"
        assert api.label("q1", "in_scope")[1]["done"]["ok"] is False  # tried again, still failing
    assert len(calls.finished) == 2
    assert _by_id(calibration_dir) == {
        "q1": "in_scope",
        "q2": "out_of_scope",
        "q3": "out_of_scope",
        "q4": "out_of_scope",
    }
    assert "finishing the calibration failed" in caplog.text


def test_the_store_alone(tmp_path: Path) -> None:
    store = QuestionLabelStore(write_chosen(tmp_path, 2))
    assert store.labels() == {}
    before, after = store.set("q1", "in_scope")
    assert before is None and after["q1"].label == "in_scope"
    before, _ = QuestionLabelStore(tmp_path).set("q1", "unsure")  # a second store on the folder
    assert before is not None and before.label == "in_scope"
    assert {k: v.label for k, v in store.labels().items()} == {"q1": "unsure"}
    with pytest.raises(InputError, match="invalid label 'yes'"):
        store.set("q1", "yes")
