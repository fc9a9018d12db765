"""More evidence from the one document state: a quoted answer and a premise check, measured across datasets.

Issue #26, item 3: besides the verdict ("does the document contain the answer?"), read further
question-side prompts against the same document state and keep what generalises. Two are measured
here, each costing only its own tokens after the verdict prompt:

- ``answer``: the verdict prompt's reply is forced to start with ``Yes. Quoted from the document,
  the answer is: "`` and the model writes the quoted span greedily (at most ``MAX_NEW`` tokens,
  up to the closing quote). Features: the mean and the first token's log-probability of the span,
  and how much of it is found in the document (share of its words; the whole span verbatim).
  A question the document does not answer should leave the model unsure what to quote, or quote
  something that is not there.
- ``premise``: the margin of ``answerability_premise`` (does the document state what the question
  takes for granted?), the last line only, like the inference probe.

The quoted answer reaches into ``LlamaCppVerdicts``' context (greedy continuation is no part of the
scorer protocol, and nothing shipped generates during a check). Everything is cached in the
feature cache (keyed by model, wording, question, document), so a killed run continues. Then the
same comparison as ``benchmarks/studies/reader_generalisation.py``:
document-grouped CV inside each set and leave-one-dataset-out, each configuration ranked by its
worst left-out accuracy, against the shipped recipe's features (margin + a hidden state).

    python benchmarks/studies/answer_probe.py [--sets eloq-gold-dev:0,...] [--extract-only] [--out FILE]

Writes benchmarks/studies/results/answer_probe.json.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _report
sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/studies/: the other studies

from _report import report
from reader_extract import dataset_path, parse_sets
from reader_generalisation import GROUP, grid, header

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "benchmarks" / "studies" / "results" / "answer_probe.json"
PREMISE = "answerability_premise"
FORCED = 'Yes. Quoted from the document, the answer is: "'
MAX_NEW = 16
#: half the document samples of reader_extract.py (a seeded prefix of them, so its cache serves)
SETS = "eloq-gold-dev:0,near-miss:0,squad2-train:40,squad2-train-extra:15,subjqa:200"
#: the answer features, in the cached vector's order
ANSWER_FEATURES = ("ans_mean_lp", "ans_first_lp", "ans_found", "ans_verbatim", "ans_words")
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def quoted_answer(scorer: Any, messages: Any) -> tuple[str, list[float]]:
    """Greedy continuation of the verdict prompt after ``FORCED``: the quoted span and its tokens'
    log-probs. Reads through the scorer's own context (the document's state is reused)."""
    llm = scorer._load()
    ids = scorer._ids(messages) + list(llm.tokenize(FORCED.encode(), add_bos=False, special=False))
    stop = {int(llm.token_eos()), *llm.tokenize(b"<|im_end|>", add_bos=False, special=True)}
    n_vocab = int(llm.n_vocab())
    pieces: list[str] = []
    lps: list[float] = []
    with scorer._lock:
        row = scorer._read(ids, logits=True)
        decoded: list[int] = []
        try:
            for _ in range(MAX_NEW):
                ptr = scorer._lib.llama_get_logits_ith(llm._ctx.ctx, row)
                logits = np.ctypeslib.as_array(ptr, shape=(n_vocab,)).astype(np.float64, copy=True)
                tok = int(logits.argmax())
                top = float(logits[tok])
                lps.append(-math.log(float(np.exp(logits - top).sum())))
                if tok in stop:
                    break
                piece = llm.detokenize([tok]).decode("utf-8", errors="ignore")
                if '"' in piece:
                    pieces.append(piece.split('"', 1)[0])
                    break
                pieces.append(piece)
                row = scorer._decode([tok], len(ids) + len(decoded))
                decoded.append(tok)
        finally:
            scorer._past = ids + decoded
    return "".join(pieces).strip(), lps


def answer_features(text: str, lps: list[float], document: str) -> np.ndarray:
    span = words(text)
    doc_words = set(words(document))
    found = sum(w in doc_words for w in span) / len(span) if span else 0.0
    verbatim = float(bool(span) and " ".join(span) in " ".join(words(document)))
    return np.array(
        [float(np.mean(lps)) if lps else 0.0, lps[0] if lps else 0.0, found, verbatim, math.log1p(len(span))],
        dtype=np.float32,
    )


def caches(rd: Any) -> tuple[Any, Any]:
    """The feature caches of the quoted answer's features and of the premise check's log-probs."""
    from scopeguard.detection.read.features import FeatureCache
    from scopeguard.detection.signals import read_identity

    ident = read_identity(rd, rd.template) | {"kind": "quoted_answer", "forced": FORCED, "max_new": MAX_NEW}
    return FeatureCache(ident), FeatureCache(read_identity(rd, PREMISE))


def extract(rd: Any, sets: str) -> None:
    """Read the quoted answer and the premise check of every question not cached yet."""
    from scopeguard.data import load_dataset
    from scopeguard.detection.read.features import stable_hash
    from scopeguard.detection.read.reader import verdict_messages
    from scopeguard.detection.signals import sample_documents

    rd.prime()
    answers, premise = caches(rd)
    for name, max_docs in parse_sets(sets):
        ds = sample_documents(load_dataset(dataset_path(name)), max_docs)
        t0, done = time.perf_counter(), 0
        for q in sorted(ds.questions, key=lambda q: q.doc_id):
            doc = ds.documents[q.doc_id]
            key = stable_hash(q.question, doc.content_hash)
            if answers.get(key) is not None and premise.get(key) is not None:
                continue
            passages = rd.passages([doc])
            if len(passages) != 1:  # one passage per document in these sets; skip the rare long one
                logging.warning("%s/%s: %d passages, skipped", name, q.doc_id, len(passages))
                continue
            rd._lookup(passages[0])
            text, lps = quoted_answer(rd.scorer, verdict_messages(q.question, passages[0]))
            answers.put(key, answer_features(text, lps, doc.text))
            best, _ = rd.read(q.question, [doc], template=PREMISE)
            premise.put(key, np.array([best.logp_yes, best.logp_no], dtype=np.float32))
            done += 1
            if done % 25 == 0:
                logging.info("%s: %d read, %.1f s a question", name, done, (time.perf_counter() - t0) / done)
        logging.info("%s: %d read in %.0f s", name, done, time.perf_counter() - t0)


def load(rd: Any, sets: str) -> Any:
    """The shipped recipe's signals (cached by reader_extract.py) with the new ones as probes:
    ``answer`` (a block of the :data:`ANSWER_FEATURES`) and ``premise`` (a margin)."""
    from scopeguard.data import load_dataset
    from scopeguard.detection.read.features import stable_hash
    from scopeguard.detection.signals import Signals, extract_signals, sample_documents

    answers, premise = caches(rd)
    parts = []
    for name, max_docs in parse_sets(sets):
        ds = sample_documents(load_dataset(dataset_path(name)), max_docs)
        sig = extract_signals(ds, name=name, reader=rd, fast=False, progress=False)
        by_id = {q.id: q for q in ds.questions}
        extra = {
            "answer": np.full((len(sig), len(ANSWER_FEATURES)), np.nan),
            "premise": np.full(len(sig), np.nan),
        }
        for i, qid in enumerate(sig.ids):
            q = by_id[qid]
            key = stable_hash(q.question, ds.documents[q.doc_id].content_hash)
            a, p = answers.get(key), premise.get(key)
            if a is not None and p is not None:
                extra["answer"][i] = a
                extra["premise"][i] = float(p[1] - p[0])
        keep = np.flatnonzero(~np.isnan(extra["premise"]))
        logging.info("%s: %d of %d questions have the new signals", name, len(keep), len(sig))
        parts.append(Signals(**{**sig.__dict__, "probes": extra}).take(keep))
    return Signals.concat(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--sets", default=SETS)
    ap.add_argument(
        "--layers", default="21", help="the hidden-state layers compared (cached by reader_extract.py)"
    )
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--extract-only", action="store_true")
    ap.add_argument("--l2", default="300,1000")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts
    from scopeguard.detection.read.reader import Reader

    # one model for both steps: the layers' states are only read (from the cache) by load()
    layers = tuple(int(v) for v in args.layers.split(","))
    rd = Reader(LlamaCppVerdicts(args.model, layers=layers, n_threads=args.threads))
    extract(rd, args.sets)
    if args.extract_only:
        return
    sig = load(rd, args.sets)
    datasets = np.array([GROUP.get(d, d) for d in sig.datasets])
    specs = [
        "margin",
        "margin+premise",
        "margin+answer",
        "margin+premise+answer",
        "margin+h21",
        "margin+premise+h21",
        "margin+answer+h21",
        "margin+premise+answer+h21",
    ]
    from scopeguard.detection.head.calibration import auroc

    sets = sorted(set(datasets.tolist()))
    columns = dict(zip(ANSWER_FEATURES, sig.probes["answer"].T, strict=True))
    columns |= {"premise": sig.probes["premise"], "margin": sig.margin}
    univariate = {
        f: {d: round(auroc(v[datasets == d], sig.labels[datasets == d]), 3) for d in sets}
        for f, v in columns.items()
    }
    print("AUROC of each signal alone (higher = more out of scope):", univariate, flush=True)
    rows = grid(sig, datasets, specs, [float(v) for v in args.l2.split(",")])
    result = {
        **header(args.model, args.sets, datasets),
        "forced_prefix": FORCED,
        "univariate_auroc": univariate,
        "scoring": "accuracy at P = 0.5, each dataset and class weighing the same in every fit",
    }
    report(rows, result, args.out)


if __name__ == "__main__":
    main()
