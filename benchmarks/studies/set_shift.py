"""The generated shift for set reads: how far people's in-scope questions score above calibrate's
rephrased generated ones when the default detector reads sets (``DefaultDetector(read="set")``).

``calibrate`` moves generated in-scope questions' scores up by a shift before it chooses the
threshold, because generated questions are easier than people's (``GENERATED_SHIFT``, learned on
passage-by-passage reads: ``calibration_study.py``). This measures the same gap for set reads, per
group of ``set_reads.py``'s sets (both SQuAD 2.0 files one group):

- people's side: ``set_reads.py``'s reads (each question once against its MiniLM top 3 joined, what
  the guard reads in a RAG chain), scored by the set head fitted without the question's group, in
  scope = answerable and its own document among the 3;
- generated side: calibrate's rephrased in-scope questions on a few documents of the set
  (``calibration_rephrase.py``'s ``PARA/<set>``), read as ``calibrate --read set`` reads them (against
  their own document, ``DefaultDetector(read="set").reading``) by the same left-out set head.

The gap of a group is the 90th percentile (the 0.10 budget's quantile) of the people's in-scope
logits minus the generated ones' (``calibration_study.py``'s ``shifts_logit_extra``). Each group is
judged with no shift, the passage reads' shift, and a shift learned on the other groups (their
median, their largest): false refusals of its people's in-scope questions and caught of its
out-of-scope ones at the generated budget threshold so moved. The shipped rule is the largest gap
(``GENERATED_SHIFT_SET``): learned on the other groups it keeps false refusals at or under 0.15 on
every group, the median does not. Reads are logged in ``--work`` (``shift-reads.jsonl``; a rerun resumes)::

    S=/work/scratch/sg
    python benchmarks/studies/calibration_corpora.py --out $S/corpora \
        --sets eloq-gold-dev,squad2-train,policies
    for s in eloq-gold-dev squad2-train policies; do
      scopeguard generate $S/corpora/$s/documents.jsonl --out $S/gen/$s --min-words 40; done
    python benchmarks/studies/calibration_rephrase.py --generated $S/gen --out $S/para \
        --sets eloq-gold-dev,squad2-train,policies
    python benchmarks/set_reads.py                     # the people's side (resumable)
    python benchmarks/studies/set_shift.py --para $S/para

Writes ``benchmarks/studies/results/set_shift.json`` and prints the table, the CPU named.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _report import report, run_header
from set_reads import (
    BUDGET,
    GROUPS,
    NAMES,
    SetReadsConfig,
    detector,
    head_p,
    log_name,
    rows_of,
    scored,
    signals,
)

from scopeguard.calibration import GENERATED_SHIFT, GENERATED_SHIFT_SET
from scopeguard.data import load_dataset
from scopeguard.detection.head.default import DefaultHead, default_head_path, fit_default_head
from scopeguard.detection.profile import budget_threshold
from scopeguard.runs import RunFolder

RESULT = Path(__file__).resolve().parent / "results" / "set_shift.json"
VERDICT = "answerability_verdict"  # the prompt of set_reads.py's plain log


def logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def expit(z: float) -> float:
    return 1 / (1 + math.exp(-z))


def group(name: str) -> str:
    return GROUPS.get(name, name)


def read_generated(
    work: Path, paras: list[Path], sets: list[str], threads: int, template: str
) -> list[dict[str, Any]]:
    """Each rephrased in-scope question's set read against its own document (margin and hidden
    state logged, not the score: each group's left-out head scores them)."""
    folder = RunFolder(work, SetReadsConfig, free=("threads",))
    folder.open(SetReadsConfig(threads=threads))
    log = folder.log("shift-reads.jsonl" if template == VERDICT else f"shift-reads-{template}.jsonl")
    done = {(r["set"], r["id"]) for r in log.rows()}
    det = detector(work, threads)  # set_reads.py's reader and states: only its reads are used here
    det.reader.template = template
    for name, para in [(n, p) for n in sets for p in paras]:
        ds = load_dataset(para / name)
        todo = [q for q in ds.questions if q.label == "in_scope" and (name, q.id) not in done]
        print(f"{name} ({para}): {len(todo)} generated in-scope questions to read", flush=True)
        for q in todo:
            docs = [ds.documents[q.doc_id]]
            passages = det.reader.passages(docs)
            (score,) = det.reader.read_set(q.question, passages)
            hidden = np.asarray(score.hidden, dtype=np.float32).ravel()
            log.append({"set": name, "id": q.id, "margin": score.margin, "passages": len(passages),
                        "hidden": [round(float(x), 5) for x in hidden]})  # fmt: skip
    return list(log.rows())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--para", type=Path, nargs="+", required=True, help="PARA/<set>: calibration_rephrase.py's output"
    )
    ap.add_argument("--work", type=Path, default=Path("/tmp/scopeguard-set-reads"), help="set_reads.py's")
    ap.add_argument("--sets", default="eloq-gold-dev,squad2-train,policies", help="generated sets")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--template", default=None, help="the set reads' prompt (default: the shipped set head's)"
    )
    args = ap.parse_args()
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    shipped = DefaultHead.load(default_head_path(read="set"))
    template = args.template or shipped.template
    generated = read_generated(args.work, args.para, sets, args.threads, template)

    folder = RunFolder(args.work, SetReadsConfig, free=("threads",))
    people_log = log_name("last", None if template == VERDICT else template)
    reads = {(r["set"], r["id"]): r for r in folder.log(people_log).rows()}
    names = [n for n in NAMES if any(s == n for s, _ in reads)]
    quantile = 1.0 - BUDGET
    gaps: dict[str, float] = {}
    per: dict[str, dict[str, Any]] = {}
    for name in sets:
        g = group(name)
        train = [n for n in names if group(n) != g]
        left_out, _ = fit_default_head(
            signals(train, reads, shipped.layer or 0), verdict_model=shipped.verdict_model,
            names=shipped.signals, layer=shipped.layer, l2=float(shipped.info.get("l2", 300.0)),
            dataset_of=GROUPS,
        )  # fmt: skip
        p_g = [head_p(left_out, r) for r in generated if r["set"] == name]
        p_h: list[float] = []
        p_o: list[float] = []  # the people's out-of-scope questions: what a threshold catches
        for n in [n for n in names if group(n) == g]:
            for row in rows_of(n):
                read = reads.get((n, row["id"]))
                if read is not None:
                    truth = scored(row, 0.0, 1.0, 0.0).truth
                    (p_h if truth == "in_scope" else p_o).append(head_p(left_out, read))
        if not p_g or not p_h:
            print(f"{name}: no generated ({len(p_g)}) or no people's ({len(p_h)}) in-scope scores, left out")
            continue
        gaps[name] = float(np.quantile([logit(p) for p in p_h], quantile)) - float(
            np.quantile([logit(p) for p in p_g], quantile)
        )
        per[name] = {"p_h": p_h, "p_g": p_g, "p_o": p_o}
    shift = max(gaps.values())  # the shipped rule: the largest gap measured
    rows = []
    for name, gap in gaps.items():
        others = [v for k, v in gaps.items() if k != name]
        row: dict[str, Any] = {
            "set": name,
            "people_in_scope": len(per[name]["p_h"]),
            "people_out_of_scope": len(per[name]["p_o"]),
            "generated_in_scope": len(per[name]["p_g"]),
            "gap_logit": round(gap, 3),
        }
        base = budget_threshold(per[name]["p_g"], BUDGET)
        for label, s in (
            ("none", 0.0),
            ("passage", GENERATED_SHIFT),
            ("others_median", statistics.median(others) if others else None),
            ("others_max", max(others) if others else None),
        ):
            if s is None:
                continue
            t = expit(logit(base) + s)
            row[f"fr_{label}"] = round(float(np.mean([p >= t for p in per[name]["p_h"]])), 3)
            row[f"caught_{label}"] = round(float(np.mean([p >= t for p in per[name]["p_o"]])), 3)
        rows.append(row)
    result = {
        **run_header("set_shift"),
        "template": template,
        "budget": BUDGET,
        "quantile": quantile,
        "gaps_logit": {k: round(v, 3) for k, v in gaps.items()},
        "shift_set": round(shift, 3),
        "shift_rule": "the largest group's gap",
        "shipped": GENERATED_SHIFT_SET,
        "shift_passages": GENERATED_SHIFT,
        "rows": rows,
        "scores": per,
    }
    report(rows, result, RESULT if template == VERDICT else RESULT.with_name(f"set_shift_{template}.json"))
    print(
        f"set-read shift (the largest of {len(gaps)} groups' gaps): {shift:.3f} logits "
        f"(shipped: {GENERATED_SHIFT_SET}); passage reads: {GENERATED_SHIFT}"
    )


if __name__ == "__main__":
    main()
