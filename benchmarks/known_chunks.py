"""What a check costs when its chunks are known: 1, 4 and 8 pre-read chunks against a cold read (#60).

    python benchmarks/known_chunks.py [--questions 8] [--cold 3] [--threads N] [--modes passages,set]

A RAG check reads its question against the retrieved chunks. With the chunks pre-read
(``Guard.preread``, the path the LangChain / LlamaIndex wrappers and ``serve --preread`` take) only
the question side is read; cold, every chunk is read whole. Back to back in one process, with the
packaged ``default`` detector through ``Guard.check``:

* **known k** (k = 1, 4, 8): the first k chunks pre-read, then each question checked against them;
* **cold 4**: each question against 4 chunks no reader has seen (the same chunks, each opened by a
  tag no other copy has, so that no kept state shares more than the instruction with them).

Each row is read in each of ``--modes``, back to back, the same questions: ``passages`` (the
shipped detector: the question read against each chunk in turn) and ``set``
(``DefaultDetector(read="set")``: the question read once against the chunks' kept states joined).

Chunks are 250-word windows of the shared ELOQ news documents (8 documents of at least 250 words);
questions are ELOQ's questions on them, a different set for each row: a question read before against
the same chunk finds its whole prompt's state kept and costs almost nothing (0.05 s a chunk), which
is not what a new question costs. The states live in a fresh ``$SCOPEGUARD_CACHE`` (a
temporary folder), so nothing kept by an earlier run helps. Prints the table (median seconds a
question, the ratio to the cold read) and writes ``benchmarks/results/known_chunks.json`` (figures
and ids only, never text), with the CPU named. #60's bar: 4 known chunks <= 0.7 s a question and
<= 0.08x the cold read, on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import eloq_windows, report, run_header

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "eloq-gold-dev"
RESULT = ROOT / "benchmarks" / "results" / "known_chunks.json"
WORDS = 250


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=8, help="questions timed per known row")
    ap.add_argument("--cold", type=int, default=3, help="questions timed cold (each about 10 s)")
    ap.add_argument("--threads", type=int, default=None, help="$SCOPEGUARD_N_THREADS (default: all cores)")
    ap.add_argument("--modes", default="passages", help="read modes, comma-separated: passages, set")
    ap.add_argument("--out", type=Path, default=RESULT)
    args = ap.parse_args()
    if not (DATA / "documents.jsonl").is_file():
        raise SystemExit(f"needs the shared ELOQ dev set at {DATA}")
    os.environ["SCOPEGUARD_CACHE"] = tempfile.mkdtemp(prefix="scopeguard-known-chunks-")
    if args.threads:
        os.environ["SCOPEGUARD_N_THREADS"] = str(args.threads)

    from scopeguard import Guard
    from scopeguard.detection.detectors.default import DefaultDetector
    from scopeguard.types import Document

    windows = eloq_windows(DATA, WORDS)
    if len(windows) < 8:
        raise SystemExit(f"needs 8 documents of at least {WORDS} words in {DATA}")
    chunks = [Document(text=text, id=doc_id) for doc_id, text in windows]
    ids = {doc_id for doc_id, _ in windows}
    questions = [json.loads(line) for line in (DATA / "questions.jsonl").open(encoding="utf-8")]
    asked = [q["question"] for q in questions if q["doc_id"] in ids]
    need = 3 * args.questions + args.cold
    if len(asked) < need:
        raise SystemExit(f"{len(asked)} questions on the 8 documents, {need} needed: lower --questions")
    rows_of = {k: asked[i * args.questions : (i + 1) * args.questions] for i, k in enumerate((1, 4, 8))}
    cold_asked = asked[3 * args.questions : need]

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    guards = {m: Guard(detector=DefaultDetector(read=m)) for m in modes}
    for guard in guards.values():
        guard.check("What is this about?", chunks[:1])  # loads the model; not timed

    def timed(guard: Guard, question: str, passages: list[Document]) -> float:
        start = time.perf_counter()
        guard.check(question, passages)
        return time.perf_counter() - start

    def label(run: str, mode: str) -> str:
        return run if mode == "passages" else f"{run}, {mode}"

    seconds: dict[str, list[float]] = {}
    for k in (1, 4, 8):
        for mode, guard in guards.items():
            guard.preread(chunks[:k], progress=False)
            seconds[label(f"known {k}", mode)] = [timed(guard, q, chunks[:k]) for q in rows_of[k]]
    for mode, guard in guards.items():
        cold: list[float] = []
        for i, question in enumerate(cold_asked):
            tagged = [
                Document(text=f"(copy {mode} {i}.{j}) {c.text}", id=f"{c.id}-{i}")
                for j, c in enumerate(chunks[:4])
            ]
            cold.append(timed(guard, question, tagged))
        seconds[label("cold 4", mode)] = cold
    cold = seconds[label("cold 4", modes[0])]

    cold_median = statistics.median(cold)
    rows = [
        {
            "run": run,
            "chunks": int(run.split(",")[0].split()[-1]),
            "questions": len(times),
            "median_s": round(statistics.median(times), 3),
            "min_s": round(min(times), 3),
            "max_s": round(max(times), 3),
            f"x_cold_4_{modes[0]}": round(statistics.median(times) / cold_median, 3),
        }
        for run, times in seconds.items()
    ]
    result = {
        **run_header("known_chunks"),
        "threads": os.environ.get("SCOPEGUARD_N_THREADS", "all"),
        "detector": "default",
        "modes": modes,
        "chunk_words": WORDS,
        "documents": sorted(ids),
        "bar": {"known_4_median_s": 0.7, "known_4_x_cold": 0.08},
        "seconds": seconds,
    }
    report(rows, result, args.out)


if __name__ == "__main__":
    main()
