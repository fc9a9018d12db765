"""The README's LangChain example with an LLM that takes 2 s: what the guard adds, speculating or not.

    python benchmarks/speculative_answer.py [--questions 10] [--llm-seconds 2]

``GuardedRAG(retriever, chain=rag_prompt() | LLM | StrOutputParser(), guard=Guard(detector="default",
policy="refuse"))`` as in the README, after ``rag.preread(chunks)``. The retriever returns 3 ELOQ news
windows of 250 words (the same 3 for every question: retrieval is not what is timed); the LLM is a
runnable that waits ``--llm-seconds`` and answers (an API model's wait costs no CPU here). Questions
are ELOQ's on those windows and on other documents (so both verdicts occur), alternating between
``speculative=False`` and ``speculative=True`` (a different question each time: a question read
once is kept and would cost nothing the second time).

Per mode: the median and p90 seconds an invoke takes, and for the questions answered the seconds
added to the LLM's own (invoke minus ``--llm-seconds``); for refused ones the invoke is the check
alone (no LLM call without speculation; a dropped one with it). Writes
``benchmarks/results/speculative_answer.json`` (figures and ids only) with the CPU named.
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import eloq_windows, p90, report, run_header

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "eloq-gold-dev"
RESULT = ROOT / "benchmarks" / "results" / "speculative_answer.json"
WORDS = 250
ANSWERING = ("answered", "hedged")  # the actions that call the LLM


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=10, help="questions a mode")
    ap.add_argument("--llm-seconds", type=float, default=2.0)
    ap.add_argument("--out", type=Path, default=RESULT)
    args = ap.parse_args()
    if not (DATA / "documents.jsonl").is_file():
        raise SystemExit(f"needs the shared ELOQ dev set at {DATA}")
    os.environ["SCOPEGUARD_CACHE"] = tempfile.mkdtemp(prefix="scopeguard-speculative-")

    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document as LCDocument
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableLambda
    from langchain_scopeguard import GuardedRAG, rag_prompt

    from scopeguard import Guard

    windows = eloq_windows(DATA, WORDS)[:3]
    chunks = [LCDocument(page_content=text, metadata={"id": doc_id}) for doc_id, text in windows]
    ids = {doc_id for doc_id, _ in windows}

    class Fixed(BaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[LCDocument]:
            return chunks

    def llm(prompt: Any) -> str:
        time.sleep(args.llm_seconds)
        return "An answer from the documents."

    rows_q = [json.loads(line) for line in (DATA / "questions.jsonl").open(encoding="utf-8")]
    on = [q for q in rows_q if q["doc_id"] in ids]
    off = [q for q in rows_q if q["doc_id"] not in ids]
    asked = [q for pair in zip(on, off, strict=False) for q in pair][: 2 * args.questions]
    if len(asked) < 2 * args.questions:
        raise SystemExit(f"{len(asked)} questions, {2 * args.questions} needed: lower --questions")

    guard = Guard(detector="default", policy="refuse")
    chain = rag_prompt() | RunnableLambda(llm) | StrOutputParser()
    rags = {
        mode: GuardedRAG(retriever=Fixed(), chain=chain, guard=guard, speculative=mode)
        for mode in (False, True)
    }
    rags[False].preread(chunks)  # loads the model and reads the chunks; not timed

    runs: dict[str, list[dict[str, Any]]] = {"not speculative": [], "speculative": []}
    for i, q in enumerate(asked):
        mode = (i // 2) % 2 == 1  # questions come in pairs (on the chunks, elsewhere): a pair a mode
        t0 = time.perf_counter()
        out = rags[mode].invoke(q["question"])
        seconds = time.perf_counter() - t0
        action = str(getattr(out["action"], "value", out["action"]))
        runs["speculative" if mode else "not speculative"].append(
            {"id": q["id"], "action": action, "seconds": round(seconds, 3)}
        )

    rows = []
    for run, items in runs.items():
        answered = [r["seconds"] - args.llm_seconds for r in items if r["action"] in ANSWERING]
        refused = [r["seconds"] for r in items if r["action"] not in ANSWERING]
        rows.append(
            {
                "run": run,
                "questions": len(items),
                "median_s": round(statistics.median(r["seconds"] for r in items), 3),
                "p90_s": round(p90([r["seconds"] for r in items]), 3),
                "answered": len(answered),
                "added_median_s": round(statistics.median(answered), 3) if answered else None,
                "added_p90_s": round(p90(answered), 3) if answered else None,
                "refused_median_s": round(statistics.median(refused), 3) if refused else None,
            }
        )
    result = {
        **run_header("speculative_answer"),
        "detector": "default",
        "llm_seconds": args.llm_seconds,
        "chunks": sorted(ids),
        "runs": runs,
    }
    report(rows, result, args.out)


if __name__ == "__main__":
    main()
