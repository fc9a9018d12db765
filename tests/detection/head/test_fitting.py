"""fit_detector end to end on an invented dataset, with scripted verdict margins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scopeguard.data import Dataset, LabeledQuestion, save_dataset
from scopeguard.detection.detectors.logprob import LogProbDetector
from scopeguard.detection.head.fitting import fit_detector
from scopeguard.detection.head.logprob import LogProbHead
from scopeguard.errors import ConfigurationError
from scopeguard.testing import ScriptedVerdictScorer
from scopeguard.types import Document


def invented(tmp_path: Path, name: str, n_docs: int = 10) -> Path:
    docs = {
        f"d{i}": Document(id=f"d{i}", text=f"Document {i} talks about the town of Brindle{i}.")
        for i in range(n_docs)
    }
    qs = []
    for i in range(n_docs):
        for j in range(4):
            oos = j % 2 == 1
            word = "unsaid" if oos else "said"
            # a few deliberately confusing items so that the fit is not trivially perfect
            if j == 3 and i % 5 == 0:
                word = "said"
            qs.append(
                LabeledQuestion(
                    id=f"{name}-{i}-{j}",
                    doc_id=f"d{i}",
                    question=f"What is {word} about Brindle{i} (item {j})?",
                    label="out_of_scope" if oos else "in_scope",
                )
            )
    path = tmp_path / name
    save_dataset(Dataset(documents=docs, questions=tuple(qs)), path)
    return path


def scorer() -> ScriptedVerdictScorer:
    return ScriptedVerdictScorer(lambda p: 2.5 if "unsaid" in p else -1.5, name="scripted")


def test_logprob_fit_saves_a_calibrated_head(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCOPEGUARD_CACHE", str(tmp_path / "cache"))
    a, b = invented(tmp_path, "a"), invented(tmp_path, "b", n_docs=6)
    s = scorer()
    report = fit_detector([a, b], "logprob", tmp_path / "head", llm=s, progress=False)
    assert report.n == 64 and set(report.per_dataset) == {"a", "b"}
    assert report.overall["accuracy"] == pytest.approx(0.9375)  # the 4 confusing items are wrong
    assert report.overall["false_refusal_rate"] == 0.0
    assert report.oof is not None and len(report.oof.p) == 64
    head = LogProbHead.load(report.path)
    assert head.model == "scripted" and head.info["cv"]["overall"]["n"] == 64
    det = LogProbDetector(reader=s, model=report.path)
    assert det.detect("What is unsaid here?", "text").label == "out_of_scope"
    assert det.detect("What is said here?", "text").label == "in_scope"
    # signals are cached: a second fit reads no prompt
    calls = len(s.prompts)
    fit_detector([a, b], "logprob", tmp_path / "head2", llm=s, progress=False)
    assert len(s.prompts) == calls
    saved = json.loads(report.path.read_text())
    assert saved["kind"] == "logprob" and 0 < saved["threshold"] < 1


def test_fit_rejects_bad_requests(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="not a scoring detector"):
        fit_detector([tmp_path], "judge", tmp_path / "x")
    with pytest.raises(ConfigurationError, match="at least one dataset"):
        fit_detector([], "logprob", tmp_path / "x")


def test_default_fit_reads_margins_probe_and_hidden_states_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    from scopeguard.detection.detectors.default import DefaultDetector
    from scopeguard.detection.head.default import DefaultHead

    monkeypatch.setenv("SCOPEGUARD_CACHE", str(tmp_path / "cache"))
    a, b = invented(tmp_path, "a"), invented(tmp_path, "b", n_docs=6)

    def hidden(prompt: str) -> list[float]:  # separates the classes only through the hidden state
        return [1.0 if "unsaid" in prompt else -1.0, 0.3]

    s = ScriptedVerdictScorer(lambda p: 0.1, hidden=hidden, layer=5)
    signals = ("margin", "inference_margin", "hidden")
    report = fit_detector(
        [a, b], "default", tmp_path / "head", llm=s, signals=signals, layer=5, l2=0.01, progress=False
    )
    assert report.n == 64 and set(report.per_dataset) == {"a", "b"}
    assert report.overall["accuracy"] >= 0.9 and "lodo_accuracy" in report.per_dataset["a"]
    # each question: the verdict prompt, then the inference probe on the same document state (b's
    # 24 questions are a's first 24, word for word, on the same documents: read once, from the cache)
    assert len(s.prompts) == 80 and sum("careful reader" in p for p in s.prompts) == 40
    head = DefaultHead.load(report.path)
    assert (
        head.layer == 5 and head.info["lodo"]["b"]["n"] == 24 and (report.path.with_suffix(".md")).is_file()
    )
    det = DefaultDetector(model=report.path, reader=s)
    assert det.detect("What is unsaid here?", "text").label == "out_of_scope"
    assert det.detect("What is said here?", "text").label == "in_scope"
    # everything is cached: a second fit with a subset of the signals reads nothing
    calls = len(s.prompts)
    reordered = fit_detector(
        [b, a], "default", tmp_path / "h2", llm=s, signals=("margin", "hidden"), layer=5, progress=False
    )
    assert len(s.prompts) == calls
    assert head.info["datasets"] == ["a", "b"]  # in the order given, as --max-docs pairs with them
    assert DefaultHead.load(reordered.path).info["datasets"] == ["b", "a"]
    with pytest.raises(ConfigurationError, match="signals must be among"):
        fit_detector([a, b], "default", tmp_path / "h3", llm=s, signals=("margin", "vibes"))
    assert np.isfinite(report.oof.p).all() if report.oof else False


def test_signals_are_read_through_a_reader_or_a_reading_detectors_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scopeguard.data import load_dataset
    from scopeguard.detection.read import Reader
    from scopeguard.detection.signals import extract_signals

    monkeypatch.setenv("SCOPEGUARD_CACHE", str(tmp_path / "cache"))
    data = load_dataset(invented(tmp_path, "a", n_docs=3))
    s = scorer()
    by_reader = extract_signals(data, fast=False, reader=Reader(s), progress=False)
    unsaid = [("unsaid" in q.question) for q in sorted(data.questions, key=lambda q: q.doc_id)]
    assert by_reader.margin.tolist() == pytest.approx([2.5 if u else -1.5 for u in unsaid], abs=1e-5)
    assert len(s.prompts) == len(data.questions)  # each question read once
    # a detector's own reader reads the same prompt: the cache answers, nothing is read again
    by_detector = extract_signals(data, fast=False, reader=LogProbDetector(reader=s), progress=False)
    assert by_detector.margin.tolist() == by_reader.margin.tolist()
    assert len(s.prompts) == len(data.questions)
    with pytest.raises(TypeError, match="a Reader or a reading detector, not str"):
        extract_signals(data, fast=False, reader="local", progress=False)
