"""The learned cascade (`default`) with scripted fast features and scripted verdict margins."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from scopeguard.calibration import LogisticHead
from scopeguard.detectors.default import DefaultDetector, DefaultHead, default_head_path, fit_default_head
from scopeguard.errors import ConfigurationError, LLMError, ModelError
from scopeguard.testing import ScriptedVerdictScorer
from scopeguard.types import Document

DOC = "The Brindlewick library opened in 2019 and cost 4 million pounds."


class Features:
    """Scripted fast features: coverage by question, alignment fixed; 'uncovered' words listed."""

    def __init__(self, coverage: dict[str, float]) -> None:
        self.coverage = coverage

    def analyse(
        self, question: str, documents: Sequence[Document]
    ) -> tuple[dict[str, float], tuple[str, ...]]:
        return {"coverage": self.coverage[question], "alignment": 0.8}, ("roof panels",)


def head(tmp_path, low: float = 0.3, high: float = 0.7):
    h = DefaultHead(
        # P(oos) falls with coverage: coverage 0 -> 0.88, 0.5 -> 0.5, 1 -> 0.12
        fast=LogisticHead(("coverage", "alignment"), (0.5, 0.8), (0.25, 1.0), (-1.0, 0.0), 0.0),
        fast_threshold=0.5,
        low=low,
        high=high,
        combined=LogisticHead(
            ("coverage", "alignment", "margin"), (0.5, 0.8, 0.0), (1.0, 1.0, 1.0), (0.0, 0.0, 2.0), 0.0
        ),
        threshold=0.5,
        verdict_model="scripted-verdicts",
    )
    return h.save(tmp_path / "head")


QS = {"covered?": 1.0, "half?": 0.5, "none?": 0.0}


def test_confident_fast_scores_decide_without_reading(tmp_path) -> None:
    scorer = ScriptedVerdictScorer(lambda _: 5.0)
    det = DefaultDetector(model=head(tmp_path), reader_llm=scorer, featurizer=Features(QS))
    v = det.detect("covered?", DOC)
    assert v.label == "in_scope" and v.stage == "fast" and not v.escalated and v.detector == "default"
    assert v.uncovered == ()  # never shown next to an in-scope verdict
    v = det.detect("none?", DOC)
    assert v.label == "out_of_scope" and v.stage == "fast" and v.uncovered == ("roof panels",)
    assert scorer.prompts == []


def test_uncertain_band_escalates_to_the_reader(tmp_path) -> None:
    says_yes = ScriptedVerdictScorer(lambda _: -3.0)
    det = DefaultDetector(model=head(tmp_path), reader_llm=says_yes, featurizer=Features(QS))
    v = det.detect("half?", DOC)
    assert v.escalated and v.stage == "logprob" and v.label == "in_scope" and v.uncovered == ()
    assert len(says_yes.prompts) == 1 and v.llm_calls == 1
    says_no = ScriptedVerdictScorer(lambda _: 3.0)
    v = DefaultDetector(model=head(tmp_path), reader_llm=says_no, featurizer=Features(QS)).detect(
        "half?", DOC
    )
    assert (
        v.label == "out_of_scope"
        and v.uncovered == ("roof panels",)
        and v.score == pytest.approx(1 / (1 + np.exp(-6)))
    )


def test_reading_stops_once_a_document_decides_the_label(tmp_path) -> None:
    # the head's boundary is margin 0: a first document answering with margin -1 settles "in scope"
    answers_first = ScriptedVerdictScorer(lambda p: -1.0 if "library" in p else 3.0)
    det = DefaultDetector(model=head(tmp_path), reader_llm=answers_first, featurizer=Features(QS))
    v = det.detect("half?", [DOC, "Gardens are green."])
    assert v.label == "in_scope" and len(answers_first.prompts) == 1 and v.llm_calls == 1
    # a weak first answer (margin -0.1, inside the boundary's safety gap) reads on
    weak = ScriptedVerdictScorer(lambda p: -0.1 if "library" in p else 3.0)
    v = DefaultDetector(model=head(tmp_path), reader_llm=weak, featurizer=Features(QS)).detect(
        "half?", [DOC, "Gardens are green."]
    )
    assert len(weak.prompts) == 2 and v.label == "in_scope"


def test_reader_failure_falls_back_to_the_fast_stage(tmp_path) -> None:
    def boom(_: str) -> float:
        raise LLMError("model crashed")

    det = DefaultDetector(
        model=head(tmp_path), reader_llm=ScriptedVerdictScorer(boom), featurizer=Features(QS)
    )
    v = det.detect("half?", DOC)
    assert v.stage == "fast" and v.escalated and "model crashed" in (v.error or "")


def test_head_round_trip_and_errors(tmp_path) -> None:
    path = head(tmp_path)
    again = DefaultHead.load(path)
    assert again.low == 0.3 and again.high == 0.7 and again.verdict_model == "scripted-verdicts"
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ModelError, match="not a valid"):
        DefaultHead.load(tmp_path / "bad.json")
    with pytest.raises(ConfigurationError, match="does not take"):
        DefaultDetector(model=path, featurizer=Features(QS), bogus=1)


def test_packaged_head_is_valid() -> None:
    h = DefaultHead.load(default_head_path())
    assert 0.0 <= h.low <= h.high <= 1.0
    assert h.verdict_model == "qwen2.5-coder-1.5b"
    cv = h.info["cv"]
    assert 0.0 < cv["escalated"] <= 1.0 and cv["cascade"]["accuracy"] > 0.5


def test_fit_chooses_a_band_where_the_fast_stage_is_unsure() -> None:
    rng = np.random.default_rng(1)
    n = 600
    y = rng.integers(0, 2, n)
    # coverage separates the extremes only; the margin separates everything
    coverage = np.where(y == 1, rng.uniform(0.0, 0.7, n), rng.uniform(0.3, 1.0, n))
    alignment = rng.uniform(0.6, 0.9, n)
    margin = np.where(y == 1, 2.0, -2.0) + rng.normal(0, 0.5, n)
    groups = [f"d{i // 5}" for i in range(n)]
    fitted, report = fit_default_head(coverage, alignment, margin, y, groups, verdict_model="m")
    assert 0.0 < report["escalated"] < 1.0
    # by default the fast stage only accepts on its own: every refusal is read
    assert fitted.high == 1.0 and fitted.low > 0.0 and report["fast_refuses"] is False
    refusing, free = fit_default_head(
        coverage, alignment, margin, y, groups, verdict_model="m", fast_refuses=True
    )
    assert refusing.high < 1.0 and free["escalated"] < report["escalated"]
    assert free["cascade"]["accuracy"] > 0.9
    assert report["cascade"]["accuracy"] > report["fast_alone"]["accuracy"] + 0.1
    assert report["cascade"]["accuracy"] > 0.9
    labels = fitted.labels(coverage, alignment, margin)
    assert float((labels == (y == 1)).mean()) > 0.9
    # a high escalation cost keeps more questions on the fast stage
    _, cheap = fit_default_head(
        coverage, alignment, margin, y, groups, verdict_model="m", escalation_cost=0.5, fast_refuses=True
    )
    assert cheap["escalated"] <= report["escalated"]


@pytest.mark.slow
@pytest.mark.integration
def test_real_default_reads_with_the_packaged_model(tmp_path) -> None:
    pytest.importorskip("llama_cpp", reason="needs scopeguard[local]")
    pytest.importorskip("sentence_transformers", reason="needs scopeguard[embeddings]")
    import dataclasses

    # the packaged head with a band covering everything: every question reaches the reading stage
    packaged = DefaultHead.load(default_head_path())
    path = dataclasses.replace(packaged, low=0.0, high=1.0).save(tmp_path / "all")
    det = DefaultDetector(model=path)
    doc = (
        "The Brindlewick public library opened on Saturday. Mayor Elena Torvik said the building "
        "cost 12 million dollars, paid by a regional grant, and that it holds 80,000 books."
    )
    v = det.detect("How many books does the Brindlewick library hold?", doc)
    assert v.stage == "logprob" and v.escalated and v.llm_calls == 1 and v.label == "in_scope"
    assert v.uncovered == ()
    v = det.detect("Which company built the Brindlewick library's heating system?", doc)
    assert v.stage == "logprob" and v.label == "out_of_scope"
