"""Calibrating on a query log: the log's format and errors, the questions chosen to label, the
weighted threshold their labels give, and the whole loop through the CLI (log -> select -> labels
-> profile), with the scripted detector."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from scopeguard.calibration import (
    RULES,
    UPPER_SHARE,
    Evidence,
    label_estimate,
    run_calibration,
    update_profile,
)
from scopeguard.calibration._choose import OperatingPoint
from scopeguard.calibration._labels import LabelledScore, choose_to_label, weighted_point
from scopeguard.calibration._log import LABELS_FILE, TO_LABEL_FILE, log_questions, read_labels
from scopeguard.calibration._rules import points
from scopeguard.cli._app import app
from scopeguard.detection.profile import budget_threshold, load_profile
from scopeguard.errors import ConfigurationError, InputError
from scopeguard.querylog import read_query_log
from scopeguard.testing import ScriptedChatModel
from scopeguard.types import Document, Verdict

from .conftest import TOPICS, IdentifiedDetector, calibrate_args, is_in_scope_question, write_jsonl

runner = CliRunner()


def _log(path: Path, n: int = 60) -> Path:
    """An invented log: 3 of 5 questions answerable (they ask about the spending plan), every other
    one naming the document it was answered from, the rest left to the retriever."""
    rows = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        answerable = i % 5 < 3
        question = (
            f"What does the spending plan say about the {topic}, item {i}?"
            if answerable
            else f"Who painted the {topic} mural, number {i}?"
        )
        row: dict[str, object] = {"id": f"u{i}", "question": question}
        if i % 2:
            row["doc_ids"] = [topic]
        rows.append(row)
    return write_jsonl(path, rows)


def _label_all(folder: Path) -> None:
    """Label every chosen question as the truth has it."""
    rows = [json.loads(line) for line in (folder / TO_LABEL_FILE).read_text().splitlines()]
    labels = [
        {"id": r["id"], "label": "in_scope" if is_in_scope_question(r["question"]) else "out_of_scope"}
        for r in rows
    ]
    write_jsonl(folder / LABELS_FILE, labels)


# -- the log's format ---------------------------------------------------------------------------


def test_jsonl_and_csv_logs(tmp_path: Path) -> None:
    jsonl = write_jsonl(
        tmp_path / "log.jsonl",
        [
            {"question": "Who built it?", "doc_ids": ["a", "b"], "user": "x"},
            {"id": "q9", "query": "When?", "documents": ["Chunk one.", {"id": "c2", "text": "Chunk two."}]},
            {"question": "Is it open?", "label": "unsure"},
        ],
    )
    first, second, third = read_query_log(jsonl)
    assert (first.id, first.doc_ids, first.metadata) == ("log-1", ("a", "b"), {"user": "x"})
    assert second.id == "q9" and [d.id for d in second.documents] == ["q9#1", "c2"]
    assert third.label == "unsure"
    csv = tmp_path / "log.csv"
    csv.write_text('question,doc_ids,label\nWho built it?,a|b,in_scope\n"When, then?",,\n')
    rows = read_query_log(csv)
    assert [(q.question, q.doc_ids, q.label) for q in rows] == [
        ("Who built it?", ("a", "b"), "in_scope"),
        ("When, then?", (), None),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"question": "ok?"}\n{"question": \n', "log.jsonl:2: invalid JSON"),
        ('{"question": "ok?"}\n\n{"query": "  "}\n', "log.jsonl:3: no question"),
        ('{"question": "ok?", "label": "yes"}\n', "log.jsonl:1: label 'yes' is not one of"),
        (
            '{"id": "a", "question": "x?"}\n{"id": "a", "question": "y?"}\n',
            "log.jsonl:2: id 'a' was already used on line 1",
        ),
        ('{"question": "x?", "documents": [3]}\n', "log.jsonl:1: document 1 is neither a string"),
        ("\n\n", "has no questions"),
    ],
)
def test_a_malformed_log_names_its_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        read_query_log(path)


def test_a_csv_without_a_question_column(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    path.write_text("text,label\nWho?,in_scope\n")
    with pytest.raises(InputError, match="header with a 'question' column"):
        read_query_log(path)


def test_chunks_given_named_or_retrieved(tmp_path: Path, corpus: Path) -> None:
    log = write_jsonl(
        tmp_path / "log.jsonl",
        [
            {"question": "What about the ferry plan?", "documents": ["Given chunk."]},
            {"question": "What about the museum plan?", "doc_ids": ["museum", "ferry"]},
            {"question": "What did the council say about the bridge plan?"},
        ],
    )
    given, named, found = log_questions(log, corpus, k=2, retriever="bm25")
    assert [d.text for d in given.documents] == ["Given chunk."] and not given.retrieved
    assert [d.id for d in named.documents] == ["museum", "ferry"]
    assert found.retrieved and len(found.documents) == 2 and found.documents[0].id == "bridge"
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"question": "x?"}, {"question": "y?", "doc_ids": ["nope"]}])
    with pytest.raises(InputError, match=r"bad\.jsonl:2: doc_ids 'nope' are not documents of"):
        log_questions(bad, corpus, k=2, retriever="bm25")


# -- which questions are chosen, and the threshold their labels give --------------------------------


def test_chosen_questions_stand_for_the_whole_log() -> None:
    rng = random.Random(3)
    scores = {f"q{i}": rng.random() for i in range(300)}
    chosen = choose_to_label(scores, 50, 0.10, seed=7)
    assert len(chosen) == 50 == len({c.id for c in chosen})
    assert sum(c.weight for c in chosen) == pytest.approx(300)  # Horvitz-Thompson: the log's size
    upper = [c for c in chosen if c.stratum == "upper"]
    assert len(upper) == round(UPPER_SHARE * 50) and min(c.score for c in upper) > max(
        c.score for c in chosen if c.stratum == "lower"
    )
    # the upper stratum is measured more finely than a random draw would
    assert max(c.weight for c in upper) < 300 / 50 < min(c.weight for c in chosen if c.stratum == "lower")
    assert chosen == choose_to_label(scores, 50, 0.10, seed=7)
    assert {c.stratum for c in choose_to_label(scores, 400, 0.10)} == {"all"}


@pytest.mark.parametrize("n", [19, 30, 57, 200])
def test_unweighted_labels_give_the_conformal_threshold(n: int) -> None:
    rng = random.Random(n)
    scores = [rng.random() for _ in range(n)]
    labelled = [LabelledScore(score=s, label="in_scope") for s in scores]
    assert weighted_point(labelled, 0.10, 1.0).threshold == budget_threshold(scores, 0.10)


def test_weighted_threshold_refuses_the_budget_of_the_weight() -> None:
    # ten answerable labels standing for 10 questions each above 0.5, forty for 1 each below: the
    # weighted tail at the threshold holds at most 10% of the 140 (+ 1) answerable questions
    labelled = [LabelledScore(0.5 + 0.04 * i, "in_scope", 10.0) for i in range(10)]
    labelled += [LabelledScore(0.01 * i, "in_scope", 1.0) for i in range(40)]
    labelled += [LabelledScore(0.99, "out_of_scope", 2.0)]
    point = weighted_point(labelled, 0.10, 1.0)
    refused = sum(q.weight for q in labelled if q.label == "in_scope" and q.score >= point.threshold)
    assert refused <= 0.10 * 141 and refused + 10 > 0.10 * 141
    assert point.caught.value == 1.0
    with pytest.raises(ConfigurationError, match=re.escape("cannot promise a false-refusal budget of 0.1")):
        weighted_point(labelled[:3], 0.10, 10.0)  # one more answerable question of weight 10: 10/40


# -- the loop, end to end ---------------------------------------------------------------------------


def test_log_select_label_profile(
    tmp_path: Path,
    corpus: Path,
    detector: IdentifiedDetector,
    no_llm: ScriptedChatModel,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log, out = _log(tmp_path / "log.jsonl"), tmp_path / "calib"
    read_against: list[int] = []
    scripted = detector._detect

    def counted(q: str, docs: Sequence[Document]) -> Verdict:
        read_against.append(len(docs))
        return scripted(q, docs)

    monkeypatch.setattr(detector, "_detect", counted)
    args = calibrate_args(
        corpus, out, "--questions", str(log), "--select", "30", "--retriever", "bm25", llm="nollm"
    )
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "chosen to label" in first.output and "no profile yet" in first.output
    assert not (out / "profile.json").exists()
    rows = [json.loads(line) for line in (out / TO_LABEL_FILE).read_text().splitlines()]
    assert len(rows) == 30 and all(r["documents"] and r["documents"][0]["text"] for r in rows)
    assert label_estimate(out) == {
        "text": "0 labelled (0 answerable): too few answerable labels for a threshold yet",
        "threshold": None,
        "labels": 0,
    }
    assert "no profile yet: the questions chosen to label have no label yet" in first.output
    reads = detector.calls
    assert reads == 60  # every logged question read once, against its chunks
    # labels that give too few answerable questions say so, not that labels are missing
    chosen = [json.loads(line)["id"] for line in (out / TO_LABEL_FILE).read_text().splitlines()]
    write_jsonl(out / LABELS_FILE, [{"id": qid, "label": "out_of_scope"} for qid in chosen])
    assert update_profile(out).startswith("no profile yet: the 0 answerable labels cannot promise")
    assert sorted(set(read_against)) == [1, 3]  # its one named document, or the top 3 retrieved

    _label_all(out)
    estimate = label_estimate(out)
    assert estimate is not None and estimate["labels"] == 30 and estimate["threshold"] is not None
    line = update_profile(out)
    assert line.startswith("profile updated") and detector.calls == reads  # nothing read again
    profile = load_profile(out)
    assert profile.threshold == pytest.approx(estimate["threshold"])
    assert "profile applied: log labels" in profile.sources and "log" in profile.data
    # the rerun from the CLI gives the same profile, and resumes every score
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert load_profile(out).threshold == profile.threshold and detector.calls == reads


def test_profiles_side_by_side_with_generated_questions(
    tmp_path: Path, corpus: Path, detector: IdentifiedDetector, llm: ScriptedChatModel
) -> None:
    log, out = _log(tmp_path / "log.jsonl"), tmp_path / "calib"
    common: dict[str, Any] = {
        "detector": "calib-scripted",
        "llm": llm,
        "progress": False,
        "sample": 6,
        "oos_sample": 6,
    }
    run = run_calibration(
        corpus, out, questions=log, select=30, retriever="bm25", also_generate=True, rephrase=False, **common
    )
    assert run.profile is not None and "profile applied: generated" in run.profile.sources
    _label_all(out)
    run = run_calibration(
        corpus, out, questions=log, select=30, retriever="bm25", also_generate=True, rephrase=False, **common
    )
    assert run.profile is not None and "profile applied: log labels" in run.profile.sources
    report = Path(run.report).read_text()
    assert "## Profiles" in report
    for name in ("log labels (applied)", "| combined", "| generated"):
        assert name in report


def test_labels_file_errors_name_the_line(tmp_path: Path) -> None:
    write_jsonl(tmp_path / LABELS_FILE, [{"id": "a", "label": "in_scope"}, {"id": "b", "label": "maybe"}])
    with pytest.raises(InputError, match=re.escape("labels.jsonl:2: invalid label 'maybe' for 'b'")):
        read_labels(tmp_path)
    (tmp_path / LABELS_FILE).write_text('{"id": "a", "label": "in_scope"}\n{"id": "a", "label": "unsure"}\n')
    assert read_labels(tmp_path) == {"a": "unsure"}


def test_cli_names_a_malformed_log_line(tmp_path: Path, corpus: Path, detector: IdentifiedDetector) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text('{"question": "What about the ferry plan?"}\n{"question": "x?", "label": "yes"}\n')
    result = runner.invoke(app, calibrate_args(corpus, tmp_path / "c", "--questions", str(log), llm=None))
    assert result.exit_code == 2
    assert "log.jsonl:2: label 'yes' is not one of" in result.output
    assert "Traceback" not in result.output


def test_k_is_one_error_line_before_anything_is_read(tmp_path: Path, corpus: Path) -> None:
    log = _log(tmp_path / "log.jsonl")
    args = calibrate_args(corpus, tmp_path / "c", "--questions", str(log), "--k", "0", llm=None)
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "error: invalid calibration setting: k: " in result.output
    assert not (tmp_path / "c").exists()


def test_rules_in_order_and_a_rule_of_ones_own() -> None:
    rng = random.Random(5)
    generated_in = [rng.uniform(0.0, 0.6) for _ in range(40)]
    generated_out = [rng.uniform(0.4, 1.0) for _ in range(20)]
    labels = [LabelledScore(rng.uniform(0.0, 0.8), "in_scope", 2.0) for _ in range(30)]
    labels += [LabelledScore(rng.uniform(0.5, 1.0), "out_of_scope", 2.0) for _ in range(20)]
    evidence = Evidence(budget=0.10, in_scope=generated_in, out_of_scope=generated_out, labelled=labels)
    found = points(evidence)
    assert list(found) == ["log labels", "combined", "generated"]
    assert found["generated"].threshold == budget_threshold(generated_in, 0.10)
    # the combined rule sits between the two sources it pools
    low, high = sorted((found["log labels"].threshold, found["generated"].threshold))
    assert low <= found["combined"].threshold <= high

    class Fixed:
        name = "fixed"

        def point(self, evidence: Evidence) -> OperatingPoint:
            return weighted_point(list(evidence.labelled), evidence.budget, 0.0)

    assert list(points(evidence, (Fixed(), *RULES))) == ["fixed", "log labels", "combined", "generated"]
    # without labels, only the generated questions set a threshold; too few of them say why
    assert list(points(Evidence(budget=0.10, in_scope=generated_in))) == ["generated"]
    few = Evidence(budget=0.10, in_scope=generated_in[:3])
    assert points(few) == {} and "no profile from the generated questions" in few.notes[0]


def test_a_rule_says_why_it_set_no_point_only_when_it_had_something_to_work_on() -> None:
    class Strict:
        name = "strict"

        def point(self, evidence: Evidence) -> OperatingPoint:
            raise ConfigurationError("never")

        def note(self, evidence: Evidence, reason: str) -> str | None:
            return f"no profile from the strict rule: {reason}"

    empty = Evidence(budget=0.10)
    assert points(empty, (Strict(), *RULES)) == {}
    # the packaged rules had nothing to work on: only the rule of one's own says why
    assert empty.notes == ["no profile from the strict rule: never"]
    labelled = Evidence(budget=0.10, labelled=[LabelledScore(0.2, "in_scope", 1.0)])
    assert points(labelled) == {}
    assert [n.split(":")[0] for n in labelled.notes] == ["no profile from the log's labels yet"]
