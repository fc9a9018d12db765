"""A detector read against retrieved documents: the truth, the figures and the rows, with a
scripted detector and the real bm25 retriever on a tiny invented dataset."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from scopeguard.data import Dataset, LabeledQuestion, load_dataset
from scopeguard.errors import ConfigurationError, InputError
from scopeguard.evaluation import (
    RetrievedQuestion,
    read_retrieved,
    retrieved_metrics,
    retrieved_records,
    retrieved_truth,
)
from scopeguard.testing import ScriptedDetector, calibration_profile
from scopeguard.types import Document, Verdict
from tests.evaluation.retrieved_data import QUESTIONS, SCORES, write_dataset

pytest.importorskip("rank_bm25", reason="needs scopeguard[retrieval]")


class _Recording(ScriptedDetector):
    """A scripted detector that also keeps the documents each question was read against."""

    def __init__(self) -> None:
        super().__init__(SCORES)
        self.seen: dict[str, list[str]] = {}

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        self.seen[question] = [d.id for d in documents]
        return super()._detect(question, documents)


@pytest.fixture
def dataset(tmp_path: Path) -> Dataset:
    return load_dataset(write_dataset(tmp_path / "tiny"))


def test_truth_needs_an_answerable_question_and_its_document() -> None:
    assert retrieved_truth("in_scope", "a", ("b", "a")) == "in_scope"
    assert retrieved_truth("in_scope", "a", ("b", "c")) == "out_of_scope"
    assert retrieved_truth("out_of_scope", "a", ("a",)) == "out_of_scope"


def test_top_1_relabels_an_answerable_question_not_retrieved(dataset: Dataset) -> None:
    detector = _Recording()
    rows = read_retrieved(detector, dataset, k=1, retriever="bm25", progress=False)
    by_id = {r.id: r for r in rows}
    assert [r.id for r in rows] == ["q1", "q2", "q3", "q4", "q5"]
    assert by_id["q2"].retrieved == ("lib",) and not by_id["q2"].gold_retrieved
    assert by_id["q2"].label == "in_scope" and by_id["q2"].truth == "out_of_scope"
    assert [by_id[i].truth for i in ("q1", "q3", "q4", "q5")] == [
        "in_scope",
        "in_scope",
        *["out_of_scope"] * 2,
    ]
    # each question was read against exactly what was retrieved for it, as the guard reads it
    assert detector.seen == {q: list(by_id[i].retrieved) for i, _, q, _, _ in QUESTIONS}

    m = retrieved_metrics(rows, k=1)
    assert (m["k"], m["n"], m["answerable"], m["in_scope"]) == (1.0, 5.0, 3.0, 2.0)
    assert m["recall_at_k"] == pytest.approx(2 / 3) and m["answerable_not_retrieved"] == 1.0
    # at 0.5: q1, q3 answered (no false refusal); q2 (0.9) and q4 (0.7) caught, q5 (0.3) missed
    assert m["false_refusals_at_threshold"] == 0.0 and m["caught_at_threshold"] == pytest.approx(2 / 3)
    assert m["false_refusal_rate"] == 0.0 and m["recall_oos"] == pytest.approx(2 / 3)
    assert m["accuracy"] == pytest.approx(4 / 5) and "caught_at_profile" not in m
    # in hindsight a threshold at 0.3 refuses no in-scope question (0.1, 0.2) and catches all three
    assert m["recall_oos_at_fr10"] == 1.0


def test_more_documents_retrieve_the_answer(dataset: Dataset) -> None:
    rows = read_retrieved(ScriptedDetector(lambda _q: 0.1), dataset, k=3, retriever="bm25", progress=False)
    # bm25 returns the documents sharing a word with the question: each question's own among them
    assert all(1 <= len(r.retrieved) <= 3 and r.gold_retrieved for r in rows), rows
    m = retrieved_metrics(rows, k=3)
    assert m["recall_at_k"] == 1.0 and m["answerable_not_retrieved"] == 0.0 and m["in_scope"] == 3.0


def test_limit_and_per_question_rows(dataset: Dataset) -> None:
    rows = read_retrieved(_Recording(), dataset, k=1, retriever="bm25", limit=2, progress=False)
    records = retrieved_records("tiny", dataset, rows)
    assert [r["id"] for r in records] == ["q1", "q2"]
    q2 = records[1]
    assert q2["retrieved"] == ["lib"] and q2["gold_retrieved"] is False
    assert (q2["label"], q2["truth"], q2["predicted"], q2["correct"]) == (
        "in_scope",
        "out_of_scope",
        "out_of_scope",
        True,
    )
    assert q2["at_threshold"] == "out_of_scope" and q2["score"] == 0.9 and q2["dataset"] == "tiny"


def test_a_profile_labels_the_verdicts_and_the_threshold_stays_reported(dataset: Dataset) -> None:
    from scopeguard.detection.detectors import get_detector

    detector = get_detector(_Recording(), calibration=calibration_profile(threshold=0.25, hedge_from=None))
    rows = read_retrieved(detector, dataset, k=1, retriever="bm25", progress=False)
    m = retrieved_metrics(rows, k=1, calibrated=True)
    # at 0.25 q3 (0.2, in scope) is answered and q5 (0.3) caught: every out-of-scope one caught
    assert m["caught_at_profile"] == 1.0 and m["false_refusals_at_profile"] == 0.0
    assert m["caught_at_threshold"] == pytest.approx(2 / 3)
    assert m["recall_oos"] == 1.0  # the metrics use the labels the guard acts on
    q5 = next(r for r in rows if r.id == "q5")
    assert (q5.verdict.label, q5.at_threshold) == ("out_of_scope", "in_scope")


def test_errors(dataset: Dataset) -> None:
    with pytest.raises(InputError, match="at least 1, got 0"):
        read_retrieved(ScriptedDetector(lambda _q: 0.1), dataset, k=0, retriever="bm25")
    with pytest.raises(ConfigurationError, match=r"unknown retriever 'nope'; valid: .*bm25"):
        read_retrieved(ScriptedDetector(lambda _q: 0.1), dataset, k=1, retriever="nope")
    with pytest.raises(InputError, match="no questions"):
        retrieved_metrics([], k=1)


def test_a_question_that_retrieves_nothing_is_unknown(dataset: Dataset) -> None:
    lone = LabeledQuestion(id="q9", doc_id="lib", question="Zyxwv qorpt?", label="in_scope")
    odd = dataset.model_copy(update={"questions": (lone,)})
    detector = _Recording()
    [row] = read_retrieved(detector, odd, k=2, retriever="bm25", progress=False)
    assert row.retrieved == () and row.truth == "out_of_scope" and detector.calls == 0
    assert row.verdict.label == "unknown" and "no documents" in (row.verdict.error or "")


def test_no_answerable_question_has_no_recall() -> None:
    row = RetrievedQuestion(
        "q", "d", "out_of_scope", ("d",), Verdict(label="in_scope", score=0.1), "in_scope"
    )
    m = retrieved_metrics([row], k=1)
    assert math.isnan(m["recall_at_k"]) and m["answerable"] == 0.0
    assert math.isnan(m["false_refusals_at_threshold"]) and m["caught_at_threshold"] == 0.0
