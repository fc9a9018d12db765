"""Do questions generated on a corpus calibrate the guard's threshold for it? (#58 item 5)

For each set, the ``default`` head that never saw it (fitted leave-one-dataset-out on the other
training sets of the packaged head; the packaged head itself for sets it was not fitted on) scores
two kinds of questions on that set's documents:

- questions generated on a few of its documents (``scopeguard generate``, run beforehand into
  ``--generated ROOT/<set>``), the only thing a new user has;
- the set's human-labelled questions (on documents the packaged head was not fitted on, where it
  was: SQuAD 2.0 and SubjQA), the truth the threshold is judged by.

Thresholds compared, each judged by false refusals (answerable human questions refused) and caught
(out-of-scope human questions refused) on the human questions:

- ``shipped``: the packaged head's own threshold, no profile;
- ``generated``: :func:`~scopeguard.detection.profile.budget_threshold` of the generated in-scope
  scores at the budget;
- ``generated-all``: the same over every in-scope candidate the generator wrote, those its filter
  (the same reading model) dropped as not answerable included;
- ``generated+shift``: the same, with the quantile moved by the shift from generated to human
  in-scope scores measured on the *other* sets (learned leave-one-dataset-out);
- ``LABEL``, ``LABEL+shift``, ``gen+LABEL`` for each ``--extra LABEL=ROOT``: the same from other
  in-scope questions on the same documents (``para``: the generated ones rephrased in a reader's
  words by ``calibration_rephrase.py``, what ``scopeguard calibrate`` reads), and from both;
  ``LABEL+shift-bt``: the shift measured from the statistic calibrate applies it to (the budget
  threshold, a conservative rank with few questions) instead of the plain quantile;
- ``human-N``: the budget threshold of N labelled human questions drawn at random (the rest
  measured; the mean over ``--repeats`` draws);
- ``hindsight``: what the best threshold catches at the false-refusal rate the generated one had,
  and at the budget (chosen on the very questions measured); every row also records
  ``short_of_hindsight``, what the best threshold at that row's false refusals catches beyond it
  (#58's second condition: at most 0.10), and the table ends with each row's worst set.

    S=/work/scratch/sg   # somewhere that outlives the session
    python benchmarks/studies/calibration_corpora.py --out $S/corpora
    for s in eloq-gold-dev squad2-train subjqa near-miss implied policies; do
      scopeguard generate $S/corpora/$s/documents.jsonl --out $S/gen/$s --min-words 40; done
    python benchmarks/studies/calibration_rephrase.py --generated $S/gen --out $S/para
    python benchmarks/studies/calibration_study.py --generated $S/gen --splits $S/corpora \
        --human-docs 25 --extra para=$S/para

``--splits DIR/<set>/split.json`` names the documents generated on and the held-out pool (written
by ``calibration_corpora.py``). Writes
``benchmarks/studies/results/calibration_study.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "benchmarks" / "studies" / "results" / "calibration_study.json"
sys.path.insert(0, str(Path(__file__).resolve().parent))
# the sets the left-out heads are fitted on, each left out in turn: default_budget.py's sample
from default_budget import DEFAULT_SETS, SAME_SOURCE, dataset_path, parse_sets, read_sets  # noqa: E402

TRAIN = parse_sets(DEFAULT_SETS)


def human_questions(name: str, split: dict[str, Any], human_docs: int) -> Any:
    """The set's human-labelled questions a threshold is judged on: those of the documents generated
    on and of the held-out pool, up to ``human_docs`` documents (every document of ELOQ dev and of
    the sets written here)."""
    from scopeguard.data import Dataset, load_dataset

    human = load_dataset(dataset_path(name))
    keep = set(split["generated_on"]) | set(split["pool"][: max(0, human_docs - len(split["generated_on"]))])
    if name in ("eloq-gold-dev", "near-miss", "implied", "policies"):
        keep = set(human.documents)
    return Dataset(
        documents={k: v for k, v in human.documents.items() if k in keep},
        questions=tuple(q for q in human.questions if q.doc_id in keep),
    )


def logit(p: np.ndarray | float) -> Any:
    q = np.clip(np.asarray(p, dtype=np.float64), 1e-6, 1 - 1e-6)
    return np.log(q / (1 - q))


def expit(z: Any) -> Any:
    return 1.0 / (1.0 + np.exp(-np.asarray(z, dtype=np.float64)))


def measure(p: np.ndarray, y: np.ndarray, t: float) -> dict[str, float]:
    refused = p >= t
    return {
        "threshold": float(t),
        "false_refusals": float(refused[y == 0].mean()),
        "caught": float(refused[y == 1].mean()),
    }


def _all_in(d: dict[str, Any]) -> np.ndarray:
    """Every generated in-scope candidate's score: kept, and dropped by the filter."""
    p_g, y_g = np.asarray(d["p_g"]), np.asarray(d["y_g"])
    return np.concatenate([p_g[y_g == 0], np.asarray(d["p_doubted"])])


def filter_dropped(gen_dir: Path, generated: Any) -> Any:
    """The in-scope candidates the generator's filter (the reading model) dropped as not
    answerable, from the run's checkpoints: kept in-scope questions are the ones the reader
    already finds answerable, so their scores are biased low for calibrating that reader."""
    from scopeguard.data import Dataset, LabeledQuestion
    from scopeguard.generation.checkpoint import DocumentRecord

    questions = []
    for path in sorted((gen_dir / ".checkpoints").glob("*.json")):
        rec = DocumentRecord.model_validate_json(path.read_text(encoding="utf-8"))
        for i, d in enumerate(rec.dropped):
            if d.label == "in_scope" and d.reason.startswith("filter:"):
                questions.append(
                    LabeledQuestion(
                        id=f"{rec.doc_id}-doubted-{i}",
                        doc_id=rec.doc_id,
                        question=d.question,
                        label="in_scope",
                    )
                )
    docs = {q.doc_id: generated.documents[q.doc_id] for q in questions if q.doc_id in generated.documents}
    return Dataset(documents=docs, questions=tuple(q for q in questions if q.doc_id in docs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generated", type=Path, required=True, help="ROOT/<set>: generation run folders")
    ap.add_argument("--splits", type=Path, required=True, help="ROOT/<set>/split.json")
    ap.add_argument("--sets", default="eloq-gold-dev,squad2-train,subjqa,near-miss,implied,policies")
    ap.add_argument("--budget", type=float, default=0.10)
    ap.add_argument("--human-docs", type=int, default=40, help="held-out documents read per set at most")
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="LABEL=ROOT",
        help="more in-scope questions to calibrate from: ROOT/<set> dataset folders (e.g. paraphrases)",
    )
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    from scopeguard.data import Dataset, load_dataset
    from scopeguard.detection.head.calibration import caught_at
    from scopeguard.detection.head.default import DefaultHead, default_head_path, fit_default_head
    from scopeguard.detection.profile import budget_threshold
    from scopeguard.detection.read.reader import Reader
    from scopeguard.detection.signals import extract_signals, signal_matrix
    from scopeguard.errors import ConfigurationError

    shipped = DefaultHead.load(default_head_path())
    reader = Reader(shipped.scorer())
    train = read_sets(TRAIN, shipped)
    train_sets = np.asarray([SAME_SOURCE.get(d, d) for d in train.datasets])
    fit = {
        "verdict_model": shipped.verdict_model,
        "names": shipped.signals,
        "layer": shipped.layer,
        "l2": float(shipped.info.get("l2", 300.0)),
        "folds": 2,
    }

    def head_without(name: str) -> Any:
        if name not in set(train_sets.tolist()):
            return shipped
        # Platt-scaled like the packaged head, so that every set's scores share one scale
        head, _ = fit_default_head(train.take(np.flatnonzero(train_sets != name)), **fit, platt_lodo=True)
        return head

    def scores(head: Any, ds: Dataset, name: str) -> tuple[np.ndarray, np.ndarray]:
        sig = extract_signals(ds, name=name, fast=False, reader=reader, progress=True)
        x, _ = signal_matrix(sig, head.signals, head.layer)
        return np.asarray(head.head.predict(x)), np.asarray(sig.labels, dtype=int)

    per: dict[str, Any] = {}
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        gen_dir = args.generated / name
        if not (gen_dir / "questions.jsonl").is_file():
            logging.warning("%s: no generated questions in %s, skipped", name, gen_dir)
            continue
        split = json.loads((args.splits / name / "split.json").read_text())
        head = head_without(name)
        human = human_questions(name, split, args.human_docs)
        generated = load_dataset(gen_dir)
        p_h, y_h = scores(head, human, name)
        p_g, y_g = scores(head, generated, f"{name}-generated")
        extra = {}
        for spec in args.extra:
            label, _, root = spec.partition("=")
            folder = Path(root) / name
            if (folder / "questions.jsonl").is_file():
                p_x, y_x = scores(head, load_dataset(folder), f"{name}-{label}")
                extra[label] = p_x[y_x == 0].tolist()
        doubted = filter_dropped(gen_dir, generated)
        p_d = scores(head, doubted, f"{name}-doubted")[0] if doubted.questions else np.zeros(0)
        per[name] = {
            "head": "packaged" if head is shipped else "left out",
            "human": {"n": len(y_h), "in_scope": int((y_h == 0).sum()), "docs": len(human.documents)},
            "generated": {"n": len(y_g), "in_scope": int((y_g == 0).sum()), "docs": len(generated.documents)},
            "p_h": p_h.tolist(),
            "y_h": y_h.tolist(),
            "p_g": p_g.tolist(),
            "y_g": y_g.tolist(),
            "p_doubted": p_d.tolist(),
            "extra": extra,
            "median_in": {
                "human": float(np.median(p_h[y_h == 0])),
                "generated": float(np.median(p_g[y_g == 0])),
            },
        }

    # thresholds, judged on the human questions
    b = args.budget
    rng = np.random.default_rng(0)
    names = list(per)
    quantile = 1.0 - b
    shifts = {
        n: float(np.quantile(logit(np.asarray(per[n]["p_h"])[np.asarray(per[n]["y_h"]) == 0]), quantile))
        - float(np.quantile(logit(np.asarray(per[n]["p_g"])[np.asarray(per[n]["y_g"]) == 0]), quantile))
        for n in names
    }
    shifts_all = {
        n: float(np.quantile(logit(np.asarray(per[n]["p_h"])[np.asarray(per[n]["y_h"]) == 0]), quantile))
        - float(np.quantile(logit(_all_in(per[n])), quantile))
        for n in names
    }
    h90 = {
        n: float(np.quantile(logit(np.asarray(per[n]["p_h"])[np.asarray(per[n]["y_h"]) == 0]), quantile))
        for n in names
    }
    labels = sorted({lab for n in names for lab in per[n]["extra"]})
    shifts_extra = {
        lab: {
            n: h90[n] - float(np.quantile(logit(per[n]["extra"][lab]), quantile))
            for n in names
            if lab in per[n]["extra"]
        }
        for lab in labels
    }

    def bt_logit(scores: Any) -> float | None:
        try:
            return float(logit(budget_threshold(scores, b)))
        except ConfigurationError:
            return None

    # the same gaps measured from the statistic calibrate applies the shift to (its budget threshold)
    shifts_extra_bt = {
        lab: {
            n: h90[n] - t
            for n in names
            if lab in per[n]["extra"] and (t := bt_logit(per[n]["extra"][lab])) is not None
        }
        for lab in labels
    }
    rows: dict[str, Any] = {}
    for n in names:
        d = per[n]
        p_h, y_h = np.asarray(d["p_h"]), np.asarray(d["y_h"])
        p_g, y_g = np.asarray(d["p_g"]), np.asarray(d["y_g"])
        row: dict[str, Any] = {"shipped": measure(p_h, y_h, shipped.threshold)}
        p_all = _all_in(d)
        try:
            t_all = budget_threshold(p_all, b)
            row["generated-all"] = measure(p_h, y_h, t_all)
            others = [shifts_all[m] for m in names if m != n]
            shift = float(np.median(others)) if others else 0.0
            row["generated-all+shift"] = {
                **measure(p_h, y_h, float(expit(logit(t_all) + shift))),
                "shift": shift,
            }
        except ConfigurationError as exc:
            row["generated-all"] = {"error": str(exc)}
        try:
            t_gen = budget_threshold(p_g[y_g == 0], b)
            row["generated"] = measure(p_h, y_h, t_gen)
            others = [shifts[m] for m in names if m != n]
            shift = float(np.median(others)) if others else 0.0
            row["generated+shift"] = {**measure(p_h, y_h, float(expit(logit(t_gen) + shift))), "shift": shift}
        except ConfigurationError as exc:
            row["generated"] = {"error": str(exc)}
        for lab in labels:
            if lab not in d["extra"]:
                continue
            for mix, ins in (
                (lab, np.asarray(d["extra"][lab])),
                (f"gen+{lab}", np.concatenate([p_g[y_g == 0], d["extra"][lab]])),
            ):
                try:
                    t_x = budget_threshold(ins, b)
                except ConfigurationError as exc:
                    row[mix] = {"error": str(exc)}
                    continue
                row[mix] = measure(p_h, y_h, t_x)
                if mix == lab:
                    others = [v for m, v in shifts_extra[lab].items() if m != n]
                    shift = float(np.median(others)) if others else 0.0
                    row[f"{lab}+shift"] = {
                        **measure(p_h, y_h, float(expit(logit(t_x) + shift))),
                        "shift": shift,
                    }
                    others = [v for m, v in shifts_extra_bt[lab].items() if m != n]
                    shift = float(np.median(others)) if others else 0.0
                    row[f"{lab}+shift-bt"] = {
                        **measure(p_h, y_h, float(expit(logit(t_x) + shift))),
                        "shift": shift,
                    }
        for k in (20, 50, 100):
            if k >= len(y_h):
                continue
            frs, cs = [], []
            for _ in range(args.repeats):
                idx = rng.permutation(len(y_h))
                cal, rest = idx[:k], idx[k:]
                ins = p_h[cal][y_h[cal] == 0]
                try:
                    t = budget_threshold(ins, b)
                except ConfigurationError:
                    t = 1.0  # too few answerable questions drawn for the budget: refuse nothing
                m = measure(p_h[rest], y_h[rest], t)
                frs.append(m["false_refusals"])
                cs.append(m["caught"])
            row[f"human-{k}"] = {"false_refusals": float(np.mean(frs)), "caught": float(np.mean(cs))}
        # how much the best threshold in hindsight at each row's false refusals catches beyond it
        for m in row.values():
            if isinstance(m, dict) and "false_refusals" in m and not np.isnan(m["false_refusals"]):
                m["short_of_hindsight"] = caught_at(p_h, y_h, m["false_refusals"]) - m["caught"]
        fr_gen = row.get("generated", {}).get("false_refusals")
        row["hindsight"] = {
            "caught_at_budget": caught_at(p_h, y_h, b),
            "caught_at_generated_fr": caught_at(p_h, y_h, fr_gen) if fr_gen is not None else None,
        }
        rows[n] = row

    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "budget": b,
        "shipped_threshold": shipped.threshold,
        "shifts_logit": shifts,
        "shifts_logit_all": shifts_all,
        "shifts_logit_extra": shifts_extra,
        "shifts_logit_extra_bt": shifts_extra_bt,
        "sets": {n: {k: v for k, v in per[n].items()} for n in names},
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")

    cols = (
        "shipped",
        "generated",
        "generated+shift",
        "generated-all",
        "generated-all+shift",
        *(c for lab in labels for c in (lab, f"{lab}+shift", f"{lab}+shift-bt", f"gen+{lab}")),
        "human-20",
        "human-50",
        "human-100",
    )
    print(f"budget {b}; cells: false refusals / caught on the human questions")
    print(
        f"{'set':<16} {'n (in) gen (in)':>18} " + " ".join(f"{c:>16}" for c in cols) + f" {'best@gen FR':>12}"
    )
    for n in names:
        d, row = per[n], rows[n]
        h, g = d["human"], d["generated"]
        size = f"{h['n']} ({h['in_scope']}) {g['n']} ({g['in_scope']})"
        cells = []
        for c in cols:
            m = row.get(c)
            cells.append(
                f"{m['false_refusals']:.2f} / {m['caught']:.2f}" if m and "false_refusals" in m else "-"
            )
        best = row["hindsight"]["caught_at_generated_fr"]
        print(
            f"{n:<16} {size:>18} "
            + " ".join(f"{c:>16}" for c in cells)
            + f" {best if best is None else round(best, 2)!s:>12}"
        )
    print("worst set per column: false refusals / caught short of the best in hindsight at that rate")
    for c in cols:
        ms = [rows[n].get(c) for n in names]
        ms = [m for m in ms if m and "short_of_hindsight" in m]
        if ms:
            print(
                f"  {c:<22} {max(m['false_refusals'] for m in ms):.2f} / "
                f"{max(m['short_of_hindsight'] for m in ms):.2f} ({len(ms)} sets)"
            )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
