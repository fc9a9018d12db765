"""Which logged questions should a person label? Chosen labels against random ones, replayed on
recorded scores, no reading.

A set's questions stand for a query log: their scores are known, their labels hidden. Each draw
labels ``n`` of them, chosen by ``scopeguard calibrate --select`` (two strata of the scores,
weighted: ``scopeguard.calibration.choose_to_label``) or at random (plain split-conformal), sets the
threshold for the budget from those labels (``weighted_point``), and is judged on the whole set:
false refusals, caught, and caught short of the best threshold in hindsight at the budget. A draw
whose labels cannot promise the budget (too few answerable ones) is counted, and judged at the
shipped threshold, as ``calibrate`` would leave the guard.

Two sources of recorded scores:

- ``--study FILE``: a ``calibration_study.py`` results JSON (the human questions of six sets, each
  read against its own document: ``p_h``, ``y_h``);
- ``--retrieved DIR``: ``retrieved_chunks.py``'s per-question files (each question read against its
  top ``--k`` chunks; in scope = answerable and its own document retrieved).

    python benchmarks/studies/label_selection.py \
        --study benchmarks/studies/results/calibration_study_answer_first.json
    python benchmarks/studies/label_selection.py --retrieved benchmarks/results/retrieved_chunks --k 3

Variants of the strata (``--shares``, ``--widths``) are printed beside the shipped ones; the
shipped ones are chosen by the worst set, not the mean.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _report import cpu_model

from scopeguard.calibration import (
    TEST_POINT,
    UPPER_SHARE,
    UPPER_WIDTH,
    LabelledScore,
    choose_to_label,
    weighted_point,
)
from scopeguard.detection.head.calibration import caught_at
from scopeguard.detection.head.default import DefaultHead, default_head_path
from scopeguard.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[2]
#: the share of one new answerable question counted at the top (1: split-conformal)
CORRECTION = TEST_POINT


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.asarray(np.log(p / (1 - p)))


def answerable_given_score(labelled: Sequence[LabelledScore], *, ridge: float = 1.0) -> tuple[float, float]:
    """``(a, b)`` of P(answerable | score) = sigmoid(a + b * logit(score)), fitted on the labels
    (Newton's method, a small ridge on both so that labels separated by a threshold still give a
    finite fit). Labels chosen by their scores leave this fit unbiased: it models the label given
    the score, and the choice depended on the score alone."""
    x = _logit(np.array([q.score for q in labelled], dtype=np.float64))
    y = np.array([q.label == "in_scope" for q in labelled], dtype=np.float64)
    X = np.column_stack([np.ones_like(x), x])
    beta = np.zeros(2)
    for _ in range(50):
        p = 1 / (1 + np.exp(-(X @ beta)))
        grad = X.T @ (y - p) - ridge * beta
        hess = (X * (p * (1 - p))[:, None]).T @ X + ridge * np.eye(2)
        step = np.linalg.solve(hess, grad)
        beta += step
        if float(np.abs(step).max()) < 1e-9:
            break
    return float(beta[0]), float(beta[1])


def fitted_threshold(scores: Mapping[str, float], labels: Mapping[str, str], budget: float) -> float:
    """Tried, not shipped: the threshold for ``budget`` on the whole log, each labelled question
    counted as its label says and every other one as answerable with the probability
    :func:`answerable_given_score` fits on the labels (plus one answerable question at the top)."""
    ids = sorted(scores)
    s = np.array([scores[i] for i in ids], dtype=np.float64)
    known = [LabelledScore(scores[i], labels[i]) for i in ids if i in labels]
    if sum(q.label == "in_scope" for q in known) < 2 or sum(q.label == "out_of_scope" for q in known) < 1:
        raise ConfigurationError("too few labels")
    a, b = answerable_given_score(known)
    q = np.where(
        [i in labels for i in ids],
        [labels.get(i) == "in_scope" for i in ids],
        1 / (1 + np.exp(-(a + b * _logit(s)))),
    )
    total, tail = float(q.sum()) + 1.0, 1.0
    for j in np.argsort(-s, kind="stable"):
        if (tail + q[j]) / total > budget:
            return min(1.0, math.nextafter(float(s[j]), math.inf))
        tail += float(q[j])
    raise ConfigurationError("no threshold")


def from_study(path: Path) -> dict[str, tuple[list[float], list[int]]]:
    sets = json.loads(path.read_text())["sets"]
    return {name: (list(s["p_h"]), [int(y) for y in s["y_h"]]) for name, s in sets.items()}


def from_retrieved(folder: Path, k: int) -> dict[str, tuple[list[float], list[int]]]:
    out = {}
    for file in sorted(folder.glob("*.json")):
        rows = json.loads(file.read_text())["rows"]
        scores, truth = [], []
        for r in rows:
            chunk = r["scores"][:k]
            if any(s is None for s in chunk):
                continue
            scores.append(min(chunk))
            answered = r["label"] == "in_scope" and r["doc_id"] in r["retrieved"][:k]
            truth.append(0 if answered else 1)
        out[file.stem] = (scores, truth)
    return out


def judge(scores: list[float], truth: list[int], threshold: float) -> tuple[float, float]:
    ins = [s for s, y in zip(scores, truth, strict=True) if y == 0]
    oos = [s for s, y in zip(scores, truth, strict=True) if y == 1]
    return sum(s >= threshold for s in ins) / len(ins), sum(s >= threshold for s in oos) / len(oos)


def pick(
    scores: list[float], n: int, budget: float, seed: int, how: str, share: float, width: float
) -> dict[int, float]:
    """The questions labelled (index -> weight): ``random``; ``spread``: one at random from each of
    ``n`` runs of the scores in order (every question equally likely); ``select``: calibrate's strata."""
    if how == "random":
        return {i: 1.0 for i in random.Random(seed).sample(range(len(scores)), n)}
    if how == "spread":
        rng = random.Random(seed)
        order = sorted(range(len(scores)), key=lambda i: scores[i])
        cuts = [round(j * len(order) / n) for j in range(n + 1)]
        return {rng.choice(order[a:b]): 1.0 for a, b in itertools.pairwise(cuts) if b > a}
    ids = {f"q{i}": s for i, s in enumerate(scores)}
    chosen = choose_to_label(ids, n, budget, seed=seed, upper_share=share, width=width)
    return {int(c.id[1:]): c.weight for c in chosen}


def test_weight(chosen: dict[int, float], scores: list[float]) -> float:
    """The weight of the highest-scored question chosen: the stratum the threshold falls in."""
    return chosen[max(chosen, key=lambda i: scores[i])]


def one_draw(
    scores: list[float],
    truth: list[int],
    n: int,
    budget: float,
    seed: int,
    method: str,
    share: float,
    width: float,
) -> float | None:
    """The threshold ``n`` labels give (``None``: they cannot promise the budget). ``method`` is
    ``HOW+RULE``: HOW as :func:`pick`, RULE ``conformal`` (weighted) or ``fitted``."""
    how, rule = method.split("+")
    chosen = pick(scores, n, budget, seed, how, share, width)
    label = {i: "in_scope" if truth[i] == 0 else "out_of_scope" for i in chosen}
    try:
        if rule == "conformal":
            labelled = [LabelledScore(scores[i], label[i], w) for i, w in chosen.items()]
            return weighted_point(labelled, budget, CORRECTION * test_weight(chosen, scores)).threshold
        ids = {f"q{i}": s for i, s in enumerate(scores)}
        return fitted_threshold(ids, {f"q{i}": lab for i, lab in label.items()}, budget)
    except ConfigurationError:
        return None


def replay(
    data: dict[str, tuple[list[float], list[int]]],
    *,
    ns: list[int],
    draws: int,
    budget: float,
    shares: list[float],
    widths: list[float],
    base: list[str],
    rules: list[str],
) -> list[dict[str, Any]]:
    shipped = DefaultHead.load(default_head_path()).threshold
    rows = []
    methods = [(m, 0.0, 0.0) for m in base] + [
        (f"select+{r}", s, w) for r in rules for s in shares for w in widths
    ]
    for name, (scores, truth) in data.items():
        best = caught_at(scores, truth, budget)
        for n in ns:
            if 2 * n > len(scores):  # a log at most twice the labels says little about choosing
                continue
            for how, share, width in methods:
                frs, caught, same, failed = [], [], [], 0
                for seed in range(draws):
                    t = one_draw(scores, truth, n, budget, seed, how, share, width)
                    if t is None:
                        failed += 1
                        t = shipped
                    fr, c = judge(scores, truth, t)
                    frs.append(fr)
                    caught.append(c)
                    same.append(caught_at(scores, truth, fr) - c)
                rows.append(
                    {
                        "set": name,
                        "questions": len(scores),
                        "answerable": truth.count(0),
                        "labels": n,
                        "method": how if not how.startswith("select") else f"{how} {share:g}/{width:g}",
                        "false_refusals_mean": statistics.fmean(frs),
                        "false_refusals_p90": sorted(frs)[int(0.9 * (len(frs) - 1))],
                        "caught_mean": statistics.fmean(caught),
                        "best_caught": best,
                        "short_mean": best - statistics.fmean(caught),
                        "short_same_fr_mean": statistics.fmean(same),
                        "no_threshold": failed,
                    }
                )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--study", type=Path)
    src.add_argument("--retrieved", type=Path)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--labels", default="20,50")
    ap.add_argument("--draws", type=int, default=40)
    ap.add_argument("--budget", type=float, default=0.10)
    ap.add_argument("--shares", default=str(UPPER_SHARE))
    ap.add_argument("--widths", default=str(UPPER_WIDTH))
    ap.add_argument("--base", default="random+conformal,random+fitted,spread+fitted,spread+conformal")
    ap.add_argument("--rules", default="conformal,fitted", help="rules tried with calibrate's strata")
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--correction",
        type=float,
        default=TEST_POINT,
        help="scale of the conformal test point (1: none dropped)",
    )
    args = ap.parse_args()
    global CORRECTION
    CORRECTION = args.correction
    data = from_study(args.study) if args.study else from_retrieved(args.retrieved, args.k)
    rows = replay(
        data,
        ns=[int(x) for x in args.labels.split(",")],
        draws=args.draws,
        budget=args.budget,
        shares=[float(x) for x in args.shares.split(",")],
        widths=[float(x) for x in args.widths.split(",")],
        base=[x for x in args.base.split(",") if x],
        rules=[x for x in args.rules.split(",") if x],
    )
    print(
        f"{'set':<15} {'n':>3} {'method':<28} {'FR mean':>7} {'FR p90':>6} {'caught':>6} {'best':>5} "
        f"{'short':>6} {'same':>6} {'none':>4}"
    )
    for r in rows:
        print(
            f"{r['set']:<15} {r['labels']:>3} {r['method']:<28} {r['false_refusals_mean']:>7.3f} "
            f"{r['false_refusals_p90']:>6.3f} {r['caught_mean']:>6.3f} {r['best_caught']:>5.3f} "
            f"{r['short_mean']:>6.3f} {r['short_same_fr_mean']:>6.3f} {r['no_threshold']:>4}"
        )
    print("\nworst set per method and labels (highest mean false refusals; largest shortfall):")
    keys = sorted({(r["labels"], r["method"]) for r in rows})
    for n, method in keys:
        mine = [r for r in rows if (r["labels"], r["method"]) == (n, method)]
        fr = max(mine, key=lambda r: r["false_refusals_mean"])
        short = max(mine, key=lambda r: r["short_mean"])
        same = max(mine, key=lambda r: r["short_same_fr_mean"])
        print(
            f"  {n:>3} {method:<28} FR {fr['false_refusals_mean']:.3f} ({fr['set']}); "
            f"short {short['short_mean']:.3f} ({short['set']}); "
            f"at the same rate {same['short_same_fr_mean']:.3f} ({same['set']})"
        )
    if args.out:
        source = str(args.study or args.retrieved)
        result = {
            "machine": cpu_model(),
            "source": source,
            "k": args.k if args.retrieved else None,
            "budget": args.budget,
            "draws": args.draws,
            "rows": rows,
        }
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
