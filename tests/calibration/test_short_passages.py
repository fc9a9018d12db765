"""A corpus of short passages: neighbours of one source are joined into documents long enough to
generate on; when none can be, calibrate says what it needs in one line (never exit 0 with
nothing written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scopeguard.calibration import run_calibration
from scopeguard.calibration._passages import load_documents, sample_documents
from scopeguard.cli._app import app
from scopeguard.data import load_dataset
from scopeguard.detection.profile import load_profile
from scopeguard.errors import ConfigurationError
from scopeguard.generation import GenerationConfig
from scopeguard.testing import ScriptedChatModel, invented_document

from .conftest import TOPICS, IdentifiedDetector, calibrate_args, fake_score, write_jsonl

runner = CliRunner()


def _snippets(path: Path, *, per_source: int = 6, source: bool = True) -> Path:
    """Passages of 45 words; ``per_source`` of each topic in a row, under one title."""
    rows = []
    for topic in TOPICS:
        for i in range(per_source):
            row = {"doc_id": f"{topic}-{i}", "text": invented_document(topic, words=30)}
            if source:
                row["title"] = f"The {topic} plan"
            rows.append(row)
    return write_jsonl(path, rows)


def test_short_passages_of_one_source_are_joined(
    tmp_path: Path, llm: ScriptedChatModel, detector: IdentifiedDetector
) -> None:
    corpus = _snippets(tmp_path / "snippets.jsonl")
    out = tmp_path / "calib"
    result = runner.invoke(
        app,
        calibrate_args(corpus, str(out), "--sample", "4", "--max-false-refusals", "0.15", "--no-progress"),
    )
    assert result.exit_code == 0, result.output
    generated = load_dataset(out / "generation")
    assert len(generated.documents) == 4 and generated.questions
    for doc_id, doc in generated.documents.items():
        parts = doc.metadata["joined"]
        assert doc_id == f"{parts[0]}..{parts[-1]}" and len(parts) > 1
        assert len({p.split("-")[0] for p in parts}) == 1  # one source each
        assert len(doc.text.split()) >= 150
    profile = load_profile(out)
    assert "4 joined from short passages" in profile.sources[0]
    assert "4 of the 4 sampled documents were joined from short passages" in profile.notes
    assert "joined from short passages of one source" in (out / "report.md").read_text()


@pytest.mark.parametrize("per_source", [1, 6], ids=["each its own source", "no source field"])
def test_short_passages_that_cannot_be_joined_are_one_line(
    tmp_path: Path, llm: ScriptedChatModel, detector: IdentifiedDetector, per_source: int
) -> None:
    corpus = _snippets(tmp_path / "snippets.jsonl", per_source=per_source, source=per_source == 1)
    n = len(TOPICS) * per_source
    result = runner.invoke(
        app,
        calibrate_args(corpus, str(tmp_path / "o")),
    )
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        f"error: the {n} documents of {corpus} are all under 150 words and no neighbouring passages of "
        "one source (source, source_url, url, title, source_path) add up to 150: calibrate needs "
        "passages of at least 150 words (--min-words), or --labelled questions"
    )
    assert not llm.calls and not detector.calls and not (tmp_path / "o").exists()


def test_min_words_lets_short_passages_stand_alone(
    tmp_path: Path, llm: ScriptedChatModel, detector: IdentifiedDetector
) -> None:
    corpus = _snippets(tmp_path / "snippets.jsonl", per_source=1, source=False)
    run = run_calibration(
        corpus, tmp_path / "o", detector=detector, llm=llm, min_words=20, budget=0.2, progress=False
    )
    generated = load_dataset(tmp_path / "o" / "generation")
    assert set(generated.documents) == {f"{t}-0" for t in TOPICS}
    assert run.profile.false_refusals.n >= 4
    assert all("logits" in note for note in run.profile.notes)  # nothing joined, nothing unread


def test_no_question_generated_is_one_error_with_the_reason(
    tmp_path: Path, llm: ScriptedChatModel, detector: IdentifiedDetector
) -> None:
    # long enough, but one sentence: the offline modes cannot use it
    text = " ".join(["the council talked about a plan for the harbour and the ferry"] * 14)
    corpus = write_jsonl(tmp_path / "c.jsonl", [{"doc_id": f"d{i}", "text": f"{text} {i}"} for i in range(3)])
    with pytest.raises(ConfigurationError) as caught:
        run_calibration(
            corpus,
            tmp_path / "o",
            detector=detector,
            llm=llm,
            generation_config=GenerationConfig(mode="offline"),
            progress=False,
        )
    message = str(caught.value)
    assert message.startswith("generation wrote no questions on the 3 sampled documents (0 done, 3 unusable")
    assert "first reason: too short: 1 sentence" in message and "--labelled" in message
    assert not llm.calls and not detector.calls


def test_joining_keeps_to_neighbours_of_one_source(tmp_path: Path) -> None:
    short = "A short passage about the harbour plan. It has two sentences and few words."  # 14 words
    long = invented_document("long", words=200)
    rows = [
        {"doc_id": "a1", "text": short, "source": "A"},
        {"doc_id": "a2", "text": short, "source": "A"},
        {"doc_id": "b1", "text": short, "source": "B"},  # another source: closes a1..a2 (too short)
        {"doc_id": "b2", "text": short, "source": "B"},
        {"doc_id": "L", "text": long, "source": "B"},  # a long document between: b1..b2 stay apart from b3
        {"doc_id": "b3", "text": short, "source": "B"},
        {"doc_id": "b4", "text": short, "source": "B"},
        {"doc_id": "n1", "text": short},  # no source: never joined
    ]
    docs = load_documents(write_jsonl(tmp_path / "c.jsonl", rows), min_words=28, max_words=300)
    assert [d.id for d in docs.documents] == ["a1..a2", "b1..b2", "L", "b3..b4"]
    assert docs.joined == 3 and docs.left_out == 1 and docs.passages == 8
    assert docs.documents[0].text == f"{short}\n\n{short}" and docs.documents[0].metadata["source"] == "A"
    cut = load_documents(tmp_path / "c.jsonl", min_words=28, max_words=100).documents[2]
    assert len(cut.text.split()) < 120  # the generator's cut, at a sentence end
    with pytest.raises(ConfigurationError, match="all under 100 words"):
        load_documents(write_jsonl(tmp_path / "s.jsonl", rows[:4]), min_words=100, max_words=None)


def test_a_larger_sample_draws_the_same_documents_and_more() -> None:
    from scopeguard.types import Document

    docs = [Document(id=str(i), text="x") for i in range(50)]

    def ids(n: int, seed: int) -> list[int]:
        return [int(d.id) for d in sample_documents(docs, n, seed)]

    small, large = ids(10, 3), ids(20, 3)
    assert set(small) < set(large) and len(large) == 20
    assert large == sorted(large)  # corpus order
    assert ids(10, 4) != small
    assert len(ids(80, 3)) == 50


def test_the_joined_documents_are_what_generation_reads(
    tmp_path: Path, llm: ScriptedChatModel, detector: IdentifiedDetector
) -> None:
    corpus = _snippets(tmp_path / "snippets.jsonl")
    run_calibration(corpus, tmp_path / "o", detector=detector, llm=llm, sample=2, budget=0.2, progress=False)
    rows = [json.loads(line) for line in (tmp_path / "o" / "generation" / "documents.jsonl").open()]
    first = rows[0]["joined"]
    snippets = {json.loads(line)["doc_id"]: json.loads(line)["text"] for line in corpus.open()}
    assert rows[0]["text"] == "\n\n".join(snippets[i] for i in first)
    assert detector.calls > 0 and fake_score("x") > 0


def test_a_topic_does_not_join_passages(tmp_path: Path) -> None:
    """A coarse topic groups unrelated sources: never joined on it."""
    short = "The stall sells apples and pears every market day of the week."
    corpus = write_jsonl(
        tmp_path / "docs.jsonl",
        [{"doc_id": f"p{i}", "text": short, "topic": "groceries"} for i in range(20)],
    )
    with pytest.raises(ConfigurationError, match="all under 40 words"):
        load_documents(corpus, min_words=40, max_words=None)
