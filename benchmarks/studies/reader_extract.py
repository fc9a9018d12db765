"""Extract the reading stage's signals for every shared dataset: cached, resumable, one read each.

For each question: the verdict margin of ``answerability_verdict``, the hidden states of the
chosen layers at the verdict position from the same decode (llama.cpp's eval callback), the
margin of ``answerability_inference`` read against the same document state (its last line only),
and the fast stage's word coverage and MiniLM alignment. Everything goes to the feature cache
(``$SCOPEGUARD_CACHE/features``) keyed by model, prompt wording, layers, question and document,
so a killed run continues where it stopped and ``benchmarks/studies/reader_generalisation.py`` reads
the same cache. Documents are sampled with ``sample_documents`` (seeded), all their questions kept.

    python benchmarks/studies/reader_extract.py [--model qwen2.5-coder-1.5b] [--sets eloq-gold-dev:0,...]

``--sets NAME:MAX_DOCS,...`` (0 = all documents; names are folders of ../shared/data or of
benchmarks/data). Writes nothing else; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
OWN = ROOT / "benchmarks" / "data"  # sets written for scopeguard (near-miss)
#: the sets and document samples of the committed results (0: every document)
DEFAULT_SETS = "eloq-gold-dev:0,squad2-train:80,squad2-train-extra:30,subjqa:400,near-miss:0"
#: transformers-style layer numbers of the 28-layer Qwen2.5 1.5B: every few blocks, the top denser
DEFAULT_LAYERS = "10,14,18,21,24,26,28"
PROBES = ("answerability_inference",)


def parse_sets(raw: str) -> list[tuple[str, int | None]]:
    out: list[tuple[str, int | None]] = []
    for item in raw.split(","):
        name, _, n = item.partition(":")
        out.append((name.strip(), int(n) or None if n else None))
    return out


def dataset_path(name: str) -> Path:
    """A set by name: a folder of ../shared/data, or of benchmarks/data (sets written here)."""
    return OWN / name if (OWN / name / "questions.jsonl").is_file() else DATA / name


def reader(model: str, layers: tuple[int, ...], threads: int | None) -> object:
    from scopeguard.detection.detectors.logprob import LogProbDetector
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts

    scorer = LlamaCppVerdicts(model, layers=layers, n_threads=threads)
    return LogProbDetector(reader=scorer)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--sets", default=DEFAULT_SETS)
    ap.add_argument("--layers", default=DEFAULT_LAYERS)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--no-fast", action="store_true", help="skip the fast stage's features")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    from scopeguard.data import load_dataset
    from scopeguard.detection.signals import extract_signals, sample_documents

    layers = tuple(int(x) for x in args.layers.split(","))
    rd = reader(args.model, layers, args.threads)
    for name, max_docs in parse_sets(args.sets):
        ds = sample_documents(load_dataset(dataset_path(name)), max_docs)
        t0 = time.perf_counter()
        sig = extract_signals(ds, name=name, fast=not args.no_fast, reader=rd, probes=PROBES, progress=True)
        logging.info(
            "%s: %d questions, %d documents, %.0f s",
            name,
            len(sig),
            len(ds.documents),
            time.perf_counter() - t0,
        )


if __name__ == "__main__":
    main()
