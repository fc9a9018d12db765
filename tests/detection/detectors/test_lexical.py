"""The lexical-coverage baseline: control flow on an invented document, accuracy on the dev set."""

from __future__ import annotations

from pathlib import Path

import pytest

from scopeguard.data import load_dataset
from scopeguard.detection.detectors import get_detector
from scopeguard.detection.detectors.lexical import LexicalDetector, coverage_to_score
from scopeguard.detection.read.text import chunk_question, content_stems, coverage, sentence_windows, stem
from scopeguard.errors import ConfigurationError, InputError
from scopeguard.evaluation.detection import detection_metrics, run_detector

# An invented document (written for these tests; no dataset text).
DOC = (
    "The town of Brindlewick opened a new public library on Saturday after three years of construction. "
    "Mayor Elena Torvik said the building cost 12 million dollars and was paid for by a regional grant. "
    "The library holds forty thousand books and a maker space with two laser cutters. "
    "Head librarian Marcus Ode said opening hours will run from eight in the morning until nine at night. "
    "Children under twelve can borrow up to ten books at a time."
)
IN_SCOPE = "How much did the new Brindlewick library building cost?"
OUT_OF_SCOPE = "Which architecture firm designed the Brindlewick library's solar roof panels?"
PARTIAL = "How many laser cutters and 3D printers does the library hold?"  # 4 of 7 content words


def test_text_helpers() -> None:
    assert stem("rulings") == stem("ruling") == stem("ruled")
    assert stem("libraries") == stem("library")
    assert content_stems("What did the Mayor say about the libraries?") == ["mayor", "say", "library"]
    assert coverage(["a", "b"], ["a", "c"]) == 0.5
    assert coverage([], ["a"]) == 1.0
    sents = sentence_windows("Mr. Smith arrived. He left at 5 p.m. on Monday.\n\nA new paragraph")
    assert sents == ["Mr. Smith arrived.", "He left at 5 p.m. on Monday.", "A new paragraph"]
    assert chunk_question("Which architecture firm designed the solar roof panels?") == [
        "architecture firm designed",
        "solar roof panels",
    ]


def test_in_scope_question_is_in_scope() -> None:
    v = LexicalDetector().detect(IN_SCOPE, DOC)
    assert v.label == "in_scope"
    assert v.score is not None and v.score < 0.5
    assert v.detector == "lexical"
    assert v.uncovered == ()


def test_out_of_scope_question_reports_missing_words() -> None:
    v = LexicalDetector().detect(OUT_OF_SCOPE, DOC)
    assert v.label == "out_of_scope"
    assert v.score is not None and v.score > 0.5
    assert {"architecture", "firm", "solar", "panels"} <= set(v.uncovered)
    assert "brindlewick" not in v.uncovered


def test_threshold_and_score_mapping() -> None:
    assert coverage_to_score(0.0, 0.5) == 1.0
    assert coverage_to_score(0.5, 0.5) == 0.5
    assert coverage_to_score(1.0, 0.5) == 0.0
    assert coverage_to_score(0.2, 0.4) > coverage_to_score(0.3, 0.4) > coverage_to_score(0.6, 0.4)
    # two thirds covered: in scope at the default threshold, out of scope at a strict one
    assert LexicalDetector().detect(PARTIAL, DOC).label == "in_scope"
    strict = LexicalDetector(threshold=0.9).detect(PARTIAL, DOC)
    assert strict.label == "out_of_scope"
    assert {"3d", "printers"} <= set(strict.uncovered)
    assert "laser" not in strict.uncovered
    with pytest.raises(ConfigurationError, match="threshold"):
        LexicalDetector(threshold=1.5)


def test_bad_input() -> None:
    with pytest.raises(InputError, match="question is empty"):
        LexicalDetector().detect("  ", DOC)
    with pytest.raises(InputError, match="no documents"):
        LexicalDetector().detect(IN_SCOPE, [])


def test_registry_builds_it() -> None:
    det = get_detector("lexical", threshold=0.4)
    assert isinstance(det, LexicalDetector) and det.threshold == 0.4


def test_dev_set_accuracy(dev_data_dir: Path) -> None:
    """The baseline's reference figure: about 0.85 on the gold dev split (0.868 measured)."""
    y, verdicts = run_detector(LexicalDetector(), load_dataset(dev_data_dir), progress=False)
    m = detection_metrics(y, verdicts)
    assert 0.82 <= m["accuracy"] <= 0.90
    assert m["unknown_rate"] == 0.0
