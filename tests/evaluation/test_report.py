"""Numbers, tables, plots and comparisons computed from stored records."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from scopeguard.evaluation import (
    Judgement,
    ResponseRecord,
    RunConfig,
    RunStore,
    build_report,
    compare_runs,
    write_evaluation_report,
)
from scopeguard.evaluation.store import DetectionRecord
from scopeguard.types import Verdict


def _rec(qid: str, topic: str, label: str, prompt: str, value: bool | None, **kw: object) -> ResponseRecord:
    judgement = Judgement(value=value, share=1.0, counts={}, llm_calls=2)
    field = "defusion" if label == "out_of_scope" else "refusal"
    return ResponseRecord(
        question_id=qid,
        doc_id=f"doc_{topic}",
        topic=topic,
        label=label,  # type: ignore[arg-type]
        prompt=prompt,
        question=f"question {qid}?",
        response="some response",
        **{field: judgement},  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


def _make_run(
    root: Path, prompts: dict[str, dict[str, list[bool | None]]], detector: bool = False
) -> RunStore:
    """prompts: prompt -> topic -> defusion values of its out-of-scope questions."""
    store = RunStore(root)
    store.open(
        RunConfig(dataset="x", rag="m", judge="j", prompts=tuple(prompts), detector="d" if detector else None)
    )
    for prompt, topics in prompts.items():
        for topic, values in topics.items():
            for i, v in enumerate(values):
                store.append_response(_rec(f"{topic}_oos_{i}", topic, "out_of_scope", prompt, v))
            # one in-scope question per topic: refused with "basic" only
            store.append_response(_rec(f"{topic}_in", topic, "in_scope", prompt, prompt == "basic"))
    if detector:
        for topic in prompts[next(iter(prompts))]:
            for qid, label, pred in (
                (f"{topic}_oos_0", "out_of_scope", "out_of_scope"),
                (f"{topic}_in", "in_scope", "out_of_scope"),
            ):
                store.append_detection(
                    DetectionRecord(
                        question_id=qid,
                        doc_id="d",
                        topic=topic,
                        label=label,  # type: ignore[arg-type]
                        verdict=Verdict(label=pred, score=0.9),  # type: ignore[arg-type]
                    )
                )
    return store


RUN = {
    "basic": {
        "sport": [True, True, False, False],
        "science": [False, False, False, True],
        "tech": [True, None],
    },
    "two-shot": {
        "sport": [True, True, True, False],
        "science": [True, False, False, False],
        "tech": [True, True],
    },
}


def test_rates_topic_statistics_and_summary(tmp_path: Path) -> None:
    report = build_report(_make_run(tmp_path / "r", RUN))
    basic = report.prompt("basic").defusion
    assert basic.by_topic == {"science": 0.25, "sport": 0.5, "tech": 1.0}
    assert basic.n == 9 and basic.unknown == 1 and basic.positives == 4  # the unknown judgement is left out
    assert basic.rate == pytest.approx(4 / 9)
    assert basic.topic_mean == pytest.approx((0.25 + 0.5 + 1.0) / 3)
    assert basic.topic_std == pytest.approx(0.3118, abs=1e-4)  # population std, as ELOQ Table 5
    assert (basic.min_topic, basic.max_topic) == ("science", "tech")
    assert report.prompt("basic").false_refusal.rate == 1.0
    assert report.prompt("two-shot").false_refusal.rate == 0.0
    assert report.best_prompt == "two-shot" and report.best_balanced_prompt == "two-shot"
    assert report.worst_topic == "science"
    assert "Best prompt (defusion): two-shot" in report.summary and "Worst topic: science" in report.summary


def test_written_tables_json_and_plots(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    root = tmp_path / "r"
    _make_run(root, RUN, detector=True)
    report = write_evaluation_report(root)
    rows = list(csv.reader((root / "defusion_by_topic.csv").open()))
    assert rows[0] == [
        "prompt",
        "science",
        "sport",
        "tech",
        "avg",
        "std",
        "min topic",
        "max topic",
        "overall",
        "n",
    ]
    assert rows[1][:4] == ["basic", "25.00", "50.00", "100.00"] and rows[1][-1] == "9"
    md = (root / "report.md").read_text()
    assert "| two-shot | 25.00 | 75.00 | 100.00 |" in md and "Confusion matrix" in md
    data = json.loads((root / "metrics.json").read_text())
    assert data["prompts"][0]["defusion"]["by_topic"]["science"] == 0.25
    assert data["confusion"]["in_scope"]["out_of_scope"] == 3 and report.detection is not None
    assert report.detection["accuracy"] == 0.5
    for png in ("defusion_by_topic.png", "detection_confusion.png"):
        assert (root / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_errors_are_counted_not_rated(tmp_path: Path) -> None:
    store = _make_run(tmp_path / "r", {"basic": {"sport": [True]}})
    store.append_response(
        ResponseRecord(
            question_id="sport_oos_9",
            doc_id="d",
            topic="sport",
            label="out_of_scope",
            prompt="basic",
            question="q?",
            error="LLMError: boom",
        )
    )
    s = build_report(store).prompt("basic").defusion
    assert (s.n, s.errors, s.rate) == (1, 1, 1.0)


def test_compare_is_paired_on_shared_questions(tmp_path: Path) -> None:
    _make_run(tmp_path / "a", {"basic": {"sport": [False, False]}})
    _make_run(tmp_path / "b", {"basic": {"sport": [True, True, True, True]}})
    paired = compare_runs(tmp_path / "a", tmp_path / "b")
    (row,) = [r for r in paired.rows if r.metric == "defusion rate"]
    assert (row.a, row.b, row.delta, row.n_a, row.n_b) == (0.0, 1.0, 1.0, 2, 2)
    unpaired = compare_runs(tmp_path / "a", tmp_path / "b", paired=False)
    (row,) = [r for r in unpaired.rows if r.metric == "defusion rate"]
    assert (row.n_a, row.n_b) == (2, 4)
    assert "| basic | defusion rate | 0.00 | 100.00 | +100.00 | 2 | 2 |" in paired.markdown()


def test_judge_free_explicit_refusal_share(tmp_path: Path) -> None:
    store = _make_run(tmp_path / "r", {"basic": {"sport": [None]}})
    store.append_response(
        _rec("sport_oos_1", "sport", "out_of_scope", "basic", None).model_copy(
            update={"response": "The document does not mention a sponsor, so this cannot be answered."}
        )
    )
    p = build_report(store).prompt("basic")
    assert p.defusion.rate is None and p.defusion.unknown == 2  # the judge could not decide either
    assert p.explicit_refusal_oos == 0.5 and p.explicit_refusal_in == 0.0
    assert "50.00% of out-of-scope" in build_report(store).summary


def test_judge_sanity_check_on_explicit_refusals(tmp_path: Path) -> None:
    refusal = "The document does not mention a sponsor, so this cannot be answered."
    store = _make_run(tmp_path / "r", {"basic": {"sport": [True]}})
    for i, value in enumerate([True, False, False]):
        store.append_response(
            _rec(f"sport_oos_{i + 1}", "sport", "out_of_scope", "basic", value).model_copy(
                update={"response": refusal}
            )
        )
    report = build_report(store)
    # "some response" (judged defused) is no explicit refusal; the three refusals were judged 1 yes / 2 no
    assert report.prompt("basic").judge_on_explicit_refusals == (1, 3)
    assert "The judge called 1 of the 3 judged explicit refusals defused: treat" in report.summary
