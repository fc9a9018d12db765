"""Are a calibrated threshold's false refusals answerable questions? Read them blind (#58 item 5).

A calibration study (``calibration_study.py``) counts a false refusal for every question its data
set labels answerable and the threshold refuses. On SubjQA the shipped rule refused 14 of 87 such
questions (0.16; the issue's bound is 0.15). SubjQA's labels are its annotators': a question was
written for one opinion and paired with a review that may not be about it. This draws every
refused answerable question of one set and a seeded sample of the answerable ones it let through,
shuffles them together, and writes them beside their documents to a folder outside the repository
(``--work``), without scores, to be read and labelled not knowing which were refused:

    python benchmarks/studies/refusal_review.py draw --splits /work/scratch/sg/corpora12 --work DIR
    # read DIR/blind.txt; give each a label in benchmarks/studies/results/refusal_review.json:
    #   "answerable" (the document answers the question as asked), "not_answerable",
    #   "unclear" (it answers another object's or premise's version of it)
    python benchmarks/studies/refusal_review.py report

``report`` prints false refusals as the set labels them, with the questions read as not answerable
taken out of the answerable ones, and with the unclear ones out too, at the shipped shift and at the
shift learned on the other sets (the median of their gaps); Wilson 95% intervals. The review file
holds dataset question ids, scores and labels, never text.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import cpu_model, wilson
from calibration_study import human_questions
from default_budget import dataset_path

from scopeguard.calibration import GENERATED_SHIFT, shifted
from scopeguard.detection.profile import budget_threshold

HERE = Path(__file__).resolve().parent
STUDY = HERE / "results" / "calibration_study_answer_first_subjqa80.json"
REVIEW = HERE / "results" / "refusal_review.json"
LABELS = ("answerable", "not_answerable", "unclear")


def thresholds(study: dict[str, Any], name: str, rephrased: str) -> dict[str, float]:
    """The set's threshold at the shipped shift and at the median of the other sets' gaps, moved
    as ``calibrate`` moves it."""
    base = budget_threshold(study["sets"][name]["extra"][rephrased], study["budget"])
    gaps = study["shifts_logit_extra"][rephrased]
    others = statistics.median(g for n, g in gaps.items() if n != name)
    return {"shipped": shifted(base, GENERATED_SHIFT), "left_out": shifted(base, others)}


def scored_questions(study: dict[str, Any], name: str, splits: Path, docs: int) -> list[Any]:
    """The set's human questions in the order the study scored them (by document id), checked
    against the study's labels."""
    split = json.loads((splits / name / "split.json").read_text())
    qs = sorted(human_questions(name, split, docs).questions, key=lambda q: q.doc_id)
    if [0 if q.label == "in_scope" else 1 for q in qs] != study["sets"][name]["y_h"]:
        raise SystemExit("the questions do not line up with the study's: another --splits or --docs?")
    return qs


def draw(args: argparse.Namespace) -> None:
    from scopeguard.data import load_dataset

    study = json.loads(args.study.read_text())
    qs = scored_questions(study, args.set, args.splits, args.docs)
    scores = study["sets"][args.set]["p_h"]
    t = thresholds(study, args.set, args.rephrased)
    low = min(t.values())
    answerable = [(q, p) for q, p in zip(qs, scores, strict=True) if q.label == "in_scope"]
    refused = [(q, p) for q, p in answerable if p >= low]
    rng = random.Random(args.seed)
    passed = rng.sample([(q, p) for q, p in answerable if p < low], args.passed)
    picked = refused + passed
    rng.shuffle(picked)
    docs = load_dataset(dataset_path(args.set)).documents
    args.work.mkdir(parents=True, exist_ok=True)
    blind = [
        f"### {i}\nQ: {q.question}\nDOCUMENT: {docs[q.doc_id].text}\n" for i, (q, _) in enumerate(picked)
    ]
    (args.work / "blind.txt").write_text("\n".join(blind), encoding="utf-8")
    review = json.loads(args.out.read_text()) if args.out.is_file() else {}
    read = review.get("questions", {})
    review.update(
        {
            "study": args.study.name,
            "set": args.set,
            "seed": args.seed,
            "answerable": len(answerable),
            "thresholds": t,
            # a label already given stays: drawing again only adds the questions not read yet
            "questions": {
                q.id: {"label": None} | read.get(q.id, {}) | {"order": i, "score": p}
                for i, (q, p) in enumerate(picked)
            },
        }
    )
    args.out.write_text(json.dumps(review, indent=1) + "\n")
    print(f"{len(refused)} refused, {len(passed)} let through: {args.work / 'blind.txt'}")


def rate(refused: dict[str, int], passed: dict[str, float], n: int, drop: tuple[str, ...]) -> dict[str, Any]:
    """False refusals with the questions labelled ``drop`` taken out of the answerable ones:
    ``refused`` counts the refused by label, ``passed`` the let-through ones by label, scaled to
    all of them from the sample read; ``n`` answerable questions as the set labels them."""
    k = sum(refused.values()) - sum(refused[lab] for lab in drop)
    m = round(n - sum(refused[lab] + passed[lab] for lab in drop))
    return {"refused": k, "answerable": m, "false_refusals": k / m, "wilson95": wilson(k, m)}


COLUMNS = ("as_labelled", "without_not_answerable", "without_unclear_too")
DROPS: tuple[tuple[str, ...], ...] = ((), ("not_answerable",), ("not_answerable", "unclear"))


def report(args: argparse.Namespace) -> None:
    review = json.loads(args.out.read_text())
    read = review["questions"]
    if any(v["label"] not in LABELS for v in read.values()):
        raise SystemExit(f"every question needs a label ({', '.join(LABELS)}) in {args.out}")
    n = review["answerable"]
    rows: dict[str, Any] = {}
    for rule, t in review["thresholds"].items():
        refused = {lab: sum(v["label"] == lab and v["score"] >= t for v in read.values()) for lab in LABELS}
        passed = [v for v in read.values() if v["score"] < t]
        # the let-through ones read are a sample: their labels are scaled to every one let through
        scale = (n - sum(refused.values())) / len(passed) if passed else 0.0
        passed_by = {lab: sum(v["label"] == lab for v in passed) for lab in LABELS}
        scaled = {lab: k * scale for lab, k in passed_by.items()}
        rows[rule] = {"threshold": t, "refused_by_label": refused, "passed_read": len(passed)}
        rows[rule] |= {"passed_by_label": passed_by}
        rows[rule] |= {c: rate(refused, scaled, n, drop) for c, drop in zip(COLUMNS, DROPS, strict=True)}
    print(f"{review['set']}: {n} answerable questions; {len(read)} read blind ({cpu_model()}, no model run)")
    print(
        f"{'rule':<9} {'threshold':>9} {'refused: ans / not / unclear':>29}", *(f"{c:>23}" for c in COLUMNS)
    )
    for rule, r in rows.items():
        by = r["refused_by_label"]
        counts = f"{by['answerable']} / {by['not_answerable']} / {by['unclear']}"
        print(
            f"{rule:<9} {r['threshold']:9.3f} {counts:>29}",
            *(f"{r[c]['false_refusals']:23.2f}" for c in COLUMNS),
        )
    result = {"machine": cpu_model(), "review": args.out.name, "set": review["set"], "rules": rows}
    args.result.write_text(json.dumps(result, indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="step", required=True)
    d = sub.add_parser("draw", help="write the blind reading file and the review skeleton")
    d.add_argument("--splits", type=Path, required=True, help="calibration_corpora.py's --out")
    d.add_argument("--work", type=Path, required=True, help="where the text goes (not the repository)")
    d.add_argument("--set", default="subjqa")
    d.add_argument("--docs", type=int, default=80, help="the study's --human-docs")
    d.add_argument("--passed", type=int, default=24, help="answerable questions let through, to read too")
    d.add_argument("--seed", type=int, default=2911)
    r = sub.add_parser("report", help="false refusals as labelled and as read")
    r.add_argument("--result", type=Path, default=HERE / "results" / "refusal_review_report.json")
    for p in (d, r):
        p.add_argument("--study", type=Path, default=STUDY)
        p.add_argument("--rephrased", default="ansp")
        p.add_argument("--out", type=Path, default=REVIEW, help="the review file (labels)")
    args = ap.parse_args()
    draw(args) if args.step == "draw" else report(args)


if __name__ == "__main__":
    main()
