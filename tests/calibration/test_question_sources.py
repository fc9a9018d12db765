"""Where the calibration questions come from: --labelled datasets (instead of generated questions,
or with --also-generate as well), and a finished generation folder (--generation)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scopeguard.calibration._generated import split_sample
from scopeguard.calibration._run import run_calibration
from scopeguard.cli._app import app
from scopeguard.data import load_dataset
from scopeguard.detection.detectors import registry as detector_registry
from scopeguard.detection.profile import load_profile
from scopeguard.generation import GenerationConfig, Generator
from scopeguard.testing import ScriptedChatModel, ScriptedDetector
from scopeguard.types import Document
from tests.generation.writer_replies import IN_SCOPE_ASK, answered

from .conftest import TOPICS, IdentifiedDetector, calibrate_args, fake_score, rephrased, write_jsonl

runner = CliRunner()

DOCS = [
    {"doc_id": "d1", "text": "The Brindlewick library opened on Saturday. It cost 12 million dollars."},
    {"doc_id": "d2", "text": "A storm closed the Kessling harbour for two days. Repairs take a week."},
]


def _labelled(folder: Path, n_in: int = 12, n_out: int = 8) -> dict[str, float]:
    """An invented labelled dataset; returns each question's scripted score."""
    rows, scores = [], {}
    for i in range(n_in + n_out):
        label = "in_scope" if i < n_in else "out_of_scope"
        question = f"Labelled question {i} about the {'library' if i % 2 else 'harbour'}?"
        rows.append({"id": f"q{i}", "doc_id": f"d{1 + i % 2}", "question": question, "label": label})
        scores[question] = round(0.03 * i if label == "in_scope" else 0.3 + 0.03 * (i - n_in), 4)
    write_jsonl(folder / "documents.jsonl", DOCS)
    write_jsonl(folder / "questions.jsonl", rows)
    return scores


def _register(monkeypatch: pytest.MonkeyPatch, scores: dict[str, float]) -> IdentifiedDetector:
    det = IdentifiedDetector(lambda q: scores[q] if q in scores else fake_score(q), name="calib-scripted")
    monkeypatch.setitem(detector_registry._DETECTORS, "calib-scripted", lambda **_: det)
    return det


def test_labelled_questions_instead_of_generated(
    tmp_path: Path, corpus: Path, no_llm: ScriptedChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    scores = _labelled(tmp_path / "people")
    det = _register(monkeypatch, scores)
    out = tmp_path / "calib"
    result = runner.invoke(
        app,
        calibrate_args(
            corpus, str(out), "--labelled", str(tmp_path / "people"), "--no-progress", llm="nollm"
        ),
    )
    assert result.exit_code == 0, result.output
    assert not no_llm.calls and not (out / "generation").exists() and det.calls == 20
    profile = load_profile(out)
    assert (profile.false_refusals.n, profile.caught.n) == (12, 8)
    in_scope = sorted(s for q, s in scores.items() if int(q.split()[2]) < 12)
    refused = sum(s >= profile.threshold for s in in_scope)
    assert refused == profile.false_refusals.k and refused / 12 <= 0.1
    assert set(profile.data) == {"corpus", "labelled:people"}
    assert "labelled by people" in profile.sources[0]
    assert "Generated questions are easier" not in (out / "report.md").read_text()
    rows = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    assert {r["source"] for r in rows} == {"labelled:people"}


def test_labelled_and_generated(
    tmp_path: Path, corpus: Path, llm: ScriptedChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    scores = _labelled(tmp_path / "people")
    det = _register(monkeypatch, scores)
    out = tmp_path / "calib"
    result = runner.invoke(
        app,
        calibrate_args(
            corpus,
            str(out),
            "--labelled",
            str(tmp_path / "people"),
            "--also-generate",
            "--sample",
            "3",
            "--no-progress",
        ),
    )
    assert result.exit_code == 0, result.output
    profile = load_profile(out)
    assert set(profile.data) == {"corpus", "labelled:people", "generated"}
    generated = [
        json.loads(line) for line in (out / "generation" / "questions.jsonl").read_text().splitlines()
    ]
    assert det.calls == 20 + len(generated) == profile.false_refusals.n + profile.caught.n
    assert "Generated questions are easier" in (out / "report.md").read_text()


def test_a_finished_generation_folder(
    tmp_path: Path,
    corpus: Path,
    llm: ScriptedChatModel,
    no_llm: ScriptedChatModel,
    detector: IdentifiedDetector,
) -> None:
    gen = tmp_path / "testset"
    Generator(llm, progress=False).run(corpus, gen)
    n = len((gen / "questions.jsonl").read_text().splitlines())
    out = tmp_path / "calib"
    result = runner.invoke(
        app,
        calibrate_args(
            corpus, str(out), "--generation", str(gen), "--no-rephrase", "--no-progress", llm="nollm"
        ),
    )
    assert result.exit_code == 0, result.output
    assert not no_llm.calls and not (out / "generation").exists() and detector.calls == n
    profile = load_profile(out)
    assert profile.false_refusals.n + profile.caught.n == n
    assert set(profile.data) == {"corpus", "generation:testset"}
    assert "fake-calib" in profile.sources[0] and str(gen) in profile.sources[0]


def test_generated_in_scope_questions_are_read_in_a_readers_words(
    tmp_path: Path, corpus: Path, llm: ScriptedChatModel, detector: IdentifiedDetector
) -> None:
    """#58: the writer rephrases each generated in-scope question once (resumably, in
    rephrased.jsonl); the detector reads the rephrased question, and out-of-scope ones as written."""
    gen = tmp_path / "testset"
    Generator(llm, progress=False).run(corpus, gen)
    written = [json.loads(line) for line in (gen / "questions.jsonl").read_text().splitlines()]
    in_scope = [q["question"] for q in written if q["label"] == "in_scope"]
    out_of_scope = [q["question"] for q in written if q["label"] == "out_of_scope"]
    out = tmp_path / "calib"
    args = calibrate_args(corpus, str(out), "--generation", str(gen), "--no-progress")
    before = len(llm.calls)
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert len(llm.calls) - before == len(in_scope)
    read = list(detector.questions)
    assert sorted(read) == sorted([rephrased(q) for q in in_scope] + out_of_scope)
    rows = [json.loads(line) for line in (out / "rephrased.jsonl").read_text().splitlines()]
    assert sorted(r["question"] for r in rows) == sorted(in_scope)
    assert "rephrased by fake-calib" in load_profile(out).sources[0]
    # a rerun asks the writer nothing again
    again = len(llm.calls)
    assert runner.invoke(app, args).exit_code == 0
    assert len(llm.calls) == again


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: write_jsonl(p / "documents.jsonl", DOCS), "questions.jsonl: file not found"),
        (
            lambda p: (
                write_jsonl(p / "documents.jsonl", DOCS),
                write_jsonl(p / "questions.jsonl", [{"id": "q", "doc_id": "d1", "question": "Why?"}]),
            ),
            "missing or empty field(s): label",
        ),
    ],
    ids=["no questions", "no labels"],
)
def test_a_dataset_without_labels_is_one_line(
    tmp_path: Path, corpus: Path, detector: IdentifiedDetector, make: object, message: str
) -> None:
    make(tmp_path / "people")  # type: ignore[operator]
    (tmp_path / "people").mkdir(exist_ok=True)
    result = runner.invoke(
        app,
        calibrate_args(corpus, str(tmp_path / "o"), "--labelled", str(tmp_path / "people"), llm=None),
    )
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --labelled") and message in lines[0]
    assert detector.calls == 0 and not (tmp_path / "o").exists()


def test_a_generation_folder_must_be_one(tmp_path: Path, corpus: Path, detector: IdentifiedDetector) -> None:
    (tmp_path / "empty").mkdir()
    result = runner.invoke(
        app,
        calibrate_args(corpus, str(tmp_path / "o"), "--generation", str(tmp_path / "empty"), llm=None),
    )
    assert result.exit_code == 2 and "is not a run folder (no run.json)" in result.output


def test_an_offline_writer_writes_both_kinds_on_the_first_documents_and_in_scope_ones_on_the_rest() -> None:
    """#58: the threshold reads in-scope questions; out-of-scope ones cost most of a document's time."""
    docs = tuple(Document(id=f"d{i}", text=f"Text {i}.") for i in range(5))
    assert split_sample(docs, 2, True) == [("generation", docs[:2]), ("generation-in-scope", docs[2:])]
    assert split_sample(docs, 0, True) == [("generation-in-scope", docs)]
    # fewer documents than oos_sample, or a writer behind an API: both kinds everywhere
    assert split_sample(docs, 5, True) == [("generation", docs)]
    assert split_sample(docs, 2, False) == [("generation", docs)]


_PLAN = re.compile(r"spending plan (\d+) for the (\w+)")


def _offline_reply(prompt: str) -> str:
    """A scripted offline writer: questions about the plan of the sentence it is shown."""
    if "What is this text mainly about" in prompt:
        return json.dumps({"subject": "the council of Alderby", "kind": "organisation"})
    plan = _PLAN.search(prompt.rsplit("entence", 1)[-1])
    number, topic = plan.groups() if plan else ("1", "harbour")
    if IN_SCOPE_ASK in prompt:
        return answered(f"Which spending plan {number} for the {topic} did the council approve?", prompt)
    return json.dumps(
        {
            "questions": [
                f"Which architect will the council of Alderby hire for the {topic} plan {number}?",
                f"How much will spending plan {number} for the {topic} cost the council of Alderby?",
            ]
        }
    )


def test_calibrate_with_an_offline_writer_reads_both_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [
        {
            "doc_id": topic,
            "text": " ".join(
                f"On day {i} the council of Alderby approved spending plan {i} for the {topic} by vote."
                for i in range(1, 16)
            ),
        }
        for topic in TOPICS
    ]
    corpus = write_jsonl(tmp_path / "plans" / "documents.jsonl", rows)
    writer = ScriptedChatModel(_offline_reply, model="offline-fake")
    judge = ScriptedDetector(lambda q: 0.9 if "architect" in q or "How much" in q else 0.1)

    def generators(llm: object, config: object, progress: object) -> tuple[Generator, Generator]:
        both = GenerationConfig(mode="offline", min_oos=0, extra_rounds=0)
        alone = both.model_copy(update={"mode": "in_scope"})
        return (
            Generator(writer, config=both, judge=judge, concurrency=1, progress=False),
            Generator(writer, config=alone, judge=judge, concurrency=1, progress=False),
        )

    monkeypatch.setattr("scopeguard.calibration._generated._generators", generators)
    run = run_calibration(
        corpus,
        tmp_path / "c",
        detector=IdentifiedDetector(fake_score),
        oos_sample=2,
        rephrase=False,
        budget=0.25,
    )
    first = load_dataset(tmp_path / "c" / "generation")
    rest = load_dataset(tmp_path / "c" / "generation-in-scope")
    assert len(first.documents) == 2 and len(rest.documents) == 4
    assert {q.label for q in first.questions} == {"in_scope", "out_of_scope"}
    assert {q.label for q in rest.questions} == {"in_scope"}
    assert run.questions == len(first.questions) + len(rest.questions)
    assert "both kinds on 2, in-scope questions alone on the others" in run.profile.sources[0]
