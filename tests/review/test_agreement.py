from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from scopeguard import InputError, load_dataset
from scopeguard.review import LabelStore, agreement_report, cohen_kappa, export_resolved


def test_kappa_matches_hand_computation() -> None:
    a = ["in", "in", "out", "out", "in", "out"]
    b = ["in", "out", "out", "out", "in", "in"]
    # observed 4/6; expected (3*3 + 3*3) / 36 = 0.5; kappa = (2/3 - 1/2) / (1/2) = 1/3
    assert cohen_kappa(a, b) == pytest.approx(1 / 3)
    assert cohen_kappa(a, a) == pytest.approx(1.0)
    assert cohen_kappa(["in", "out"], ["out", "in"]) == pytest.approx(-1.0)
    assert math.isnan(cohen_kappa([], []))


def test_kappa_with_three_categories() -> None:
    a = ["in", "out", "unsure", "in"]
    b = ["in", "out", "in", "in"]
    # observed 3/4; a: in2 out1 unsure1; b: in3 out1 -> expected (2*3 + 1*1)/16 = 7/16
    assert cohen_kappa(a, b) == pytest.approx((3 / 4 - 7 / 16) / (1 - 7 / 16))


def test_store_validates_and_persists(review_dir: Path) -> None:
    store = LabelStore(review_dir, "ann")
    store.set("d1_ins_1", "scope", "in_scope")
    with pytest.raises(InputError, match="invalid scope label"):
        store.set("d1_ins_1", "scope", "yes")
    with pytest.raises(InputError, match="annotator name"):
        LabelStore(review_dir, "../evil")
    again = LabelStore(review_dir, "ann")
    assert again.labels()["d1_ins_1"]["scope"] == "in_scope"
    rows = [json.loads(line) for line in (review_dir / "reviews" / "ann.jsonl").read_text().splitlines()]
    assert len(rows) == 1


def test_report_resolution_and_export(review_dir: Path, tmp_path: Path) -> None:
    a, b = LabelStore(review_dir, "alice"), LabelStore(review_dir, "bob")
    for qid, la, lb in [
        ("d1_ins_1", "in_scope", "in_scope"),
        ("d1_oos_1", "out_of_scope", "in_scope"),
        ("d2_oos_1", "in_scope", "in_scope"),
    ]:
        a.set(qid, "scope", la)
        b.set(qid, "scope", lb)
    report = agreement_report(review_dir)
    assert report.annotators == ("alice", "bob")
    assert report.pairs[0].n == 3 and report.pairs[0].observed_agreement == pytest.approx(2 / 3)
    assert [d["question_id"] for d in report.disagreements] == ["d1_oos_1"]
    assert report.resolved == {"d1_ins_1": "in_scope", "d2_oos_1": "in_scope"}
    # generator: in, oos, oos; alice agrees on 2/3; resolved agrees on 1/2
    assert report.generator_accuracy["alice"] == pytest.approx(2 / 3)
    assert report.generator_accuracy["resolved"] == pytest.approx(1 / 2)

    LabelStore(review_dir, "carol").set("d1_oos_1", "scope", "out_of_scope")
    resolved = agreement_report(review_dir, resolver="carol")
    assert resolved.resolved["d1_oos_1"] == "out_of_scope" and not resolved.disagreements
    out = export_resolved(review_dir, tmp_path / "resolved", resolved)
    reloaded = load_dataset(tmp_path / "resolved")
    assert len(reloaded) == 3 == len(out)
    assert {q.id: q.label for q in reloaded.questions}["d2_oos_1"] == "in_scope"
    assert reloaded.questions[2].metadata["generator_label"] == "out_of_scope"


def test_report_without_labels_is_a_clear_error(review_dir: Path) -> None:
    with pytest.raises(InputError, match="no annotator label files"):
        agreement_report(review_dir)
