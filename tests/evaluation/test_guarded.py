"""The guarded view of a run: questions routed by the detector (refused, hedged, answered), and the
defusion and false-refusal rates with hedged answers counted as answers and as defused / refused."""

from __future__ import annotations

import json
from pathlib import Path

from scopeguard.detection.profile import calibrated
from scopeguard.evaluation import Judgement, ResponseRecord, RunConfig, evaluate
from scopeguard.evaluation.report import report_from_records
from scopeguard.evaluation.store import DetectionRecord
from scopeguard.policies import HEDGE_CAVEAT
from scopeguard.testing import ScriptedChatModel, ScriptedDetector, calibration_profile
from scopeguard.types import Verdict

from .conftest import ANSWERING, QUESTIONS, scripted_system

# answered, hedged, hedged, refused under the profile (threshold 0.6, hedged from 0.4)
SCORES = {"s_in": 0.1, "f_in": 0.45, "s_oos": 0.45, "f_oos": 0.9}


def test_a_run_with_a_calibrated_detector_reports_routes_and_both_rates(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    text = {q["question"]: SCORES[q["id"]] for q in QUESTIONS}
    detector = calibrated(ScriptedDetector(text), calibration_profile())
    judge = ScriptedChatModel(scripted_system())
    out = tmp_path / "run"
    report = evaluate(
        tiny_dataset,
        rag=lambda question, docs: f"{ANSWERING}\n\n{HEDGE_CAVEAT}",  # a guarded pipeline's hedged answer
        judge=judge,
        detector=detector,
        out=out,
        progress=False,
        plots=False,
    )
    # the judges read the answer without the caveat line: no prompt carries it, and the in-scope
    # answer (no negation left) is decided by the lexical pre-check
    assert judge.calls and not any(HEDGE_CAVEAT in c.prompt for c in judge.calls)
    rows = [json.loads(line) for line in (out / "responses.jsonl").read_text().splitlines()]
    assert all(r["response"].endswith(HEDGE_CAVEAT) for r in rows)  # stored as answered
    assert {r["refusal"]["method"] for r in rows if r["label"] == "in_scope"} == {"lexical"}

    assert report.routes is not None
    oos, ins = report.routes["out_of_scope"], report.routes["in_scope"]
    assert (oos.n, oos.refused, oos.hedged, oos.answered) == (2, 1, 1, 0)
    assert (ins.n, ins.refused, ins.hedged, ins.answered) == (2, 0, 1, 1)
    assert oos.shares == {"refused": 0.5, "hedged": 0.5, "answered": 0.0}

    p = report.prompt("pipeline")
    assert (p.defusion.rate, p.false_refusal.rate) == (0.0, 0.0)  # the system alone: never defuses
    g = p.guarded
    assert g is not None
    assert (g.defusion.rate, g.defusion.n) == (0.5, 2)  # f_oos refused; s_oos hedged, judged answered
    assert g.defusion_with_hedges.rate == 1.0  # s_oos's caveat counted as defusing it
    assert (g.false_refusal.rate, g.false_refusal.n) == (0.0, 2)
    assert g.false_refusal_with_hedges.rate == 0.5  # f_in's caveat counted against the answer
    assert g.defusion.by_topic == {"food": 1.0, "sport": 0.0}

    assert "Behind the detector (failing closed): out-of-scope questions refused 50.00%, hedged 50.00%" in (
        report.summary
    )
    assert "defused 50.00% of out-of-scope questions (100.00% counting hedged answers as defused" in (
        report.summary
    )
    markdown = (out / "report.md").read_text()
    assert "## Behind the detector: refused, hedged, answered" in markdown
    assert "| pipeline | 50.00 | 100.00 | 0.00 | 50.00 | 2 / 2 |" in markdown
    assert "| out-of-scope | 2 | 1 (50.00) | 1 (50.00) | 0 (0.00) |" in markdown
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["routes"]["in_scope"]["hedged"] == 1
    assert metrics["prompts"][0]["guarded"]["defusion_with_hedges"]["rate"] == 1.0
    assert metrics["prompts"][0]["defusion"]["rate"] == 0.0  # the existing keys are as they were


def _response(qid: str, label: str, value: bool | None, *, error: str | None = None) -> ResponseRecord:
    judgement = None if error else Judgement(value=value)
    field = "defusion" if label == "out_of_scope" else "refusal"
    return ResponseRecord(
        question_id=qid,
        doc_id="d",
        topic="t",
        label=label,  # type: ignore[arg-type]
        prompt="basic",
        question=f"{qid}?",
        response=None if error else "a response",
        error=error,
        **{field: judgement},  # type: ignore[arg-type]
    )


def _detection(qid: str, label: str, verdict: Verdict | None) -> DetectionRecord:
    error = None if verdict is not None else "DetectionError: down"
    return DetectionRecord(question_id=qid, doc_id="d", topic="t", label=label, verdict=verdict, error=error)  # type: ignore[arg-type]


def test_unknowns_errors_and_missing_verdicts_are_left_out_and_counted() -> None:
    out, hedged, answered = (
        Verdict(label="out_of_scope", score=0.9),
        Verdict(label="in_scope", score=0.4, hedge=True),
        Verdict(label="in_scope", score=0.1),
    )
    responses = [
        _response("o1", "out_of_scope", None),  # unknown judgement, but refused: defused anyway
        _response("o2", "out_of_scope", None),  # unknown judgement of a hedged answer
        _response("o3", "out_of_scope", False, error="LLMError: down"),  # the response failed
        _response("o4", "out_of_scope", False),  # no verdict: its detection failed
        _response("o5", "out_of_scope", True),  # no detection record at all
        _response("o6", "out_of_scope", False),  # detector failed closed (unknown): refused
        _response("i1", "in_scope", True),  # answered and judged a refusal
    ]
    detections = [
        _detection("o1", "out_of_scope", out),
        _detection("o2", "out_of_scope", hedged),
        _detection("o3", "out_of_scope", answered),
        _detection("o4", "out_of_scope", None),
        _detection("o6", "out_of_scope", Verdict(label="unknown", error="timeout")),
        _detection("i1", "in_scope", answered),
    ]
    config = RunConfig(dataset="x", rag="m", judge="j", prompts=("basic",), detector="d")
    report = report_from_records(config, responses, detections)
    g = report.prompt("basic").guarded
    assert g is not None
    d = g.defusion
    assert (d.rate, d.n, d.unknown, d.errors) == (1.0, 2, 1, 3)  # o1, o6 defused; o2 unknown; o3-o5
    dh = g.defusion_with_hedges
    assert (dh.rate, dh.n, dh.unknown, dh.errors) == (1.0, 3, 0, 3)  # o2's hedge counted
    assert (g.false_refusal.rate, g.false_refusal.n) == (1.0, 1)
    routes = report.routes
    assert routes is not None  # o1, o2, o3, o6: o4's failed detection and o5's missing one left out
    assert (routes["out_of_scope"].n, routes["out_of_scope"].hedged) == (4, 1)
    assert routes["out_of_scope"].refused == 2  # o1 out of scope, o6 failed closed


def test_without_a_detector_there_is_no_guarded_view() -> None:
    config = RunConfig(dataset="x", rag="m", judge="j", prompts=("basic",))
    report = report_from_records(config, [_response("o1", "out_of_scope", True)], [])
    assert report.routes is None and report.prompt("basic").guarded is None
    assert "Behind the detector" not in report.summary
    data = json.loads(report.model_dump_json())
    assert data["routes"] is None and data["prompts"][0]["guarded"] is None


def test_without_a_hedge_band_both_ways_agree() -> None:
    config = RunConfig(dataset="x", rag="m", judge="j", prompts=("basic",), detector="d")
    verdict = Verdict(label="in_scope", score=0.2)
    responses = [_response("o1", "out_of_scope", False), _response("i1", "in_scope", False)]
    detections = [_detection("o1", "out_of_scope", verdict), _detection("i1", "in_scope", verdict)]
    g = report_from_records(config, responses, detections).prompt("basic").guarded
    assert g is not None
    assert g.defusion == g.defusion_with_hedges and g.false_refusal == g.false_refusal_with_hedges
