"""A round trip for generated in-scope questions, tried on hand-labelled ones (#59; not shipped).

The offline writer copies a detail of a sentence as the answer, then writes the question it answers
(``gen_offline_in_scope``). A known check on synthetic questions is the round trip: answer the
question again from the whole document and keep it only when the two answers agree. This asks the
writer (the packaged 1.5B) for that answer for every kept in-scope question of the given run folders
that has a hand label in ``benchmarks/results/generation_domains_review.json``, and counts, per
domain, the answerable share before and after dropping the questions whose answers disagree (no
content word of the copied answer in the new one):

    python benchmarks/studies/roundtrip_probe.py --run news=DIR --run wikipedia=DIR ...

The copied answer is read back from the run's reply cache. Prints the table and writes
``benchmarks/studies/results/roundtrip_probe.json`` (figures and label keys only, no text).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _report import cpu_model
from generation_domains import REVIEW, label_key, read_labels, records

from scopeguard.detection.read.text import content_stem_set

RESULT = Path(__file__).resolve().parent / "results" / "roundtrip_probe.json"
PROMPT = (
    'Text: """{document}"""\n\nAnswer the question with a short phrase copied from the text above.\n\n'
    'Question: {question}\n\nReply in JSON: {{"answer": "..."}}'
)


def copied_answers(folder: Path) -> dict[str, str]:
    """Reply id -> the answer the writer copied, from the run's reply cache."""
    out = {}
    for line in (folder / ".cache" / "replies.jsonl").open(encoding="utf-8"):
        reply = json.loads(line)
        try:
            out[reply["id"]] = json.loads(reply["texts"][0])["answer"]
        except (ValueError, KeyError, TypeError):
            continue
    return out


def agree(copied: str, again: str) -> bool:
    """The second answer shares a content word with the copied one ("50 g" with "50 g rye flour")."""
    return bool(content_stem_set(copied) & content_stem_set(again))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="append", required=True, help="DOMAIN=RUN_FOLDER (in-scope mode runs)")
    ap.add_argument("--llm", default="local:qwen2.5-coder-1.5b")
    ap.add_argument("--out", type=Path, default=RESULT)
    args = ap.parse_args()

    from scopeguard.llm.registry import from_spec

    labels = read_labels(REVIEW)
    llm = from_spec(args.llm)
    rows: list[dict[str, Any]] = []
    for domain, _, root in (r.partition("=") for r in args.run):
        folder = Path(root)
        copied = copied_answers(folder)
        for rec in records(folder):
            for q in rec.questions:
                key = label_key(rec.doc_id, q.question)
                lab = labels.get(key)
                if q.label != "in_scope" or not lab or lab.get("answerable") is None:
                    continue
                answer = next((copied[r] for r in q.reply_ids.get("question", ()) if r in copied), "")
                start = time.perf_counter()
                text = llm.complete(PROMPT.format(document=rec.text, question=q.question), max_tokens=40).text
                try:
                    again = str(json.loads(text[text.index("{") : text.rindex("}") + 1])["answer"])
                except (ValueError, KeyError):
                    again = text
                rows.append(
                    {
                        "domain": domain,
                        "key": key,
                        "answerable": bool(lab["answerable"]),
                        "agree": agree(answer, again),
                        "seconds": round(time.perf_counter() - start, 2),
                    }
                )
    table: dict[str, Any] = {}
    head = ("labelled", "answerable", "dropped", "of them answerable", "after")
    print(f"{'domain':<10}", *(f"{h:>10}" for h in head))
    for domain in dict.fromkeys(r["domain"] for r in rows):
        rs = [r for r in rows if r["domain"] == domain]
        kept = [r for r in rs if r["agree"]]
        dropped = [r for r in rs if not r["agree"]]
        table[domain] = {
            "labelled": len(rs),
            "answerable": sum(r["answerable"] for r in rs) / len(rs),
            "dropped": len(dropped),
            "dropped_answerable": sum(r["answerable"] for r in dropped),
            "answerable_after": sum(r["answerable"] for r in kept) / max(len(kept), 1),
        }
        t = table[domain]
        print(
            f"{domain:<10} {len(rs):8} {t['answerable']:10.2f} {len(dropped):8} "
            f"{t['dropped_answerable']:18} {t['answerable_after']:6.2f}"
        )
    out = {"machine": cpu_model(), "llm": args.llm, "runs": args.run, "domains": table, "questions": rows}
    args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
