"""Train the fast detector's logistic head and report document-grouped cross-validated accuracy.

    python benchmarks/studies/train_fast_head.py [DATASET_DIR] [--encoder minilm] [--out HEAD.json]

1. computes the fast features (``scopeguard.detection.detectors.fast.FEATURES``) for every question of the
   dataset against its own document (cached in ``benchmarks/studies/results/fast_features_<encoder>.json``,
   keyed by question id, so a re-run or a killed run resumes);
2. 5-fold cross-validation grouped by document (the folds shuffle the documents with ``--seed``;
   repeated for seeds 0..``--repeats``-1), logistic regression on standardised features;
   prints the CV accuracy and AUROC (these are the figures to quote, never training accuracy);
3. fits the head on all questions and writes it (the CV figures go into the head's ``info``).

Seeded and deterministic. Needs scikit-learn (``scopeguard[probe]``) for training only; the
shipped head is plain JSON and inference uses numpy.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from scopeguard.data import load_dataset
from scopeguard.detection.head.calibration import grouped_oof
from scopeguard.detection.head.fast import FastHead, default_head_path
from scopeguard.detection.read.fast import FEATURES, FastFeaturizer
from scopeguard.evaluation.detection import auroc

DEFAULT_DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "eloq-gold-dev"
RESULTS = Path(__file__).resolve().parent / "results"


def compute_features(data_dir: Path, encoder: str) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
    """Feature matrix, labels (1 = out of scope), groups (doc ids) and question ids; cached."""
    from tqdm import tqdm

    ds = load_dataset(data_dir)
    cache_path = RESULTS / f"fast_features_{encoder.replace('/', '_')}.json"
    cache: dict[str, dict[str, float]] = {}
    if cache_path.is_file():
        cache = json.loads(cache_path.read_text())
    feat: FastFeaturizer | None = None
    todo = [q for q in ds.questions if q.id not in cache or set(FEATURES) - set(cache[q.id])]
    for i, q in enumerate(tqdm(todo, desc="features", disable=not todo)):
        if feat is None:
            feat = FastFeaturizer(encoder)
        cache[q.id] = feat.features(q.question, [ds.documents[q.doc_id]])
        if i % 10 == 9 or i == len(todo) - 1:
            RESULTS.mkdir(parents=True, exist_ok=True)
            tmp = cache_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(cache, indent=0))
            tmp.replace(cache_path)
    x = np.array([[cache[q.id][f] for f in FEATURES] for q in ds.questions])
    y = np.array([int(q.label == "out_of_scope") for q in ds.questions])
    return x, y, [q.doc_id for q in ds.questions], [q.id for q in ds.questions]


def fit(x: np.ndarray, y: np.ndarray, c: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    from sklearn.linear_model import LogisticRegression

    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    clf = LogisticRegression(C=c, max_iter=1000).fit((x - mean) / scale, y)
    return mean, scale, clf.coef_[0], float(clf.intercept_[0])


def predict(model: tuple[np.ndarray, np.ndarray, np.ndarray, float], x: np.ndarray) -> np.ndarray:
    mean, scale, coef, b = model
    return 1.0 / (1.0 + np.exp(-(((x - mean) / scale) @ coef + b)))


def cross_validate(
    x: np.ndarray, y: np.ndarray, groups: list[str], *, c: float, folds: int, seed: int
) -> np.ndarray:
    """Out-of-fold P(out of scope) for every item, on the project's document-grouped folds."""

    def fit_predict(train: np.ndarray, test: np.ndarray) -> np.ndarray:
        return predict(fit(x[train], y[train], c), x[test])

    return grouped_oof(len(y), groups, fit_predict, folds=folds, seed=seed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--encoder", default="minilm")
    ap.add_argument("--out", type=Path, default=default_head_path())
    ap.add_argument("--C", type=float, default=1.0, dest="c")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    x, y, groups, _ = compute_features(args.data, args.encoder)
    labels = ["out_of_scope" if v else "in_scope" for v in y]
    print(f"{len(y)} questions, {len(set(groups))} documents, features {FEATURES}")
    for j, f in enumerate(FEATURES):
        print(f"  feature {f:10s} AUROC (low = out of scope) {auroc(labels, list(-x[:, j])):.3f}")
    accs, aucs = [], []
    for r in range(args.repeats):
        p = cross_validate(x, y, groups, c=args.c, folds=args.folds, seed=args.seed + r)
        accs.append(float(((p >= 0.5) == y).mean()))
        aucs.append(auroc(labels, list(p)))
    print(
        f"{args.folds}-fold document-grouped CV over {args.repeats} shuffles: accuracy "
        f"{np.mean(accs):.3f} (min {min(accs):.3f}, max {max(accs):.3f}), AUROC {np.mean(aucs):.3f}"
    )
    mean, scale, coef, b = fit(x, y, args.c)
    head = FastHead(
        features=FEATURES,
        mean=tuple(float(v) for v in mean),
        scale=tuple(float(v) for v in scale),
        coef=tuple(float(v) for v in coef),
        intercept=b,
        threshold=0.5,
        encoder=args.encoder,
        info={
            "trained_on": args.data.name,
            "n": len(y),
            "C": args.c,
            "cv": f"{args.folds}-fold grouped by document, seeds {args.seed}..{args.seed + args.repeats - 1}",
            "cv_accuracy_mean": round(float(np.mean(accs)), 4),
            "cv_auroc_mean": round(float(np.mean(aucs)), 4),
        },
    )
    print(f"wrote {head.save(args.out)}")


if __name__ == "__main__":
    main()
