"""Short passages: the shared sets' questions read against a snippet of 5-30 words, not the whole document.

A retriever that returns sentences or review snippets hands the guard passages far shorter than
the documents the packaged ``default`` head was fitted on. This study derives such a corpus from
the shared sets at run time (nothing of their text enters the repository) and measures what the
shipped threshold refuses there:

- each question drawn (seeded; ``--per-label`` of each label a set) gets one snippet of its own
  document: the sentence that shares the most content words with an anchor, widened by its
  neighbours while the snippet stays within ``MAX_WORDS`` words (a longer best sentence is cut to
  the ``MAX_WORDS``-word window sharing the most). The anchor is the question, or for an
  answerable ELOQ question its reference answer (where the answer sits); an unanswerable question's
  snippet is the one a lexical retriever would hand the guard;
- questions are drawn from documents outside the packaged head's training draw
  (``default_budget.py``'s sample) where the set has them (SQuAD 2.0, SubjQA); ELOQ's are all in
  it, so its row reads a distribution the head saw, with new passages;
- an answerable question whose snippet misses its answer becomes unanswerable here and counts as
  a false refusal when refused: the false refusals are an upper bound. ``--show N`` prints N
  answerable snippets a set to read by hand (to the terminal only).

    python benchmarks/studies/short_passages.py [--work /tmp/scopeguard-short-passages] [--per-label 60]
    python benchmarks/studies/short_passages.py --show 10      # read some by hand
    python benchmarks/studies/short_passages.py --ship 0.10    # write the head's short-passage shift

``--ship B`` chooses the packaged head's short-passage shift the way its threshold was chosen: the
smallest shift (logit scale, steps of ``STEP``) under which the shipped threshold refuses at most B
of the answerable questions on every short set, and writes it into the head
(:class:`~scopeguard.detection.head.default.ShortPassages`, documents of fewer than
``SHORT_WORDS`` words). The JSON gives, for each set left out, the shift chosen on the others and
what it refuses and catches there (what a new corpus of snippets gets).

Writes the derived sets under ``--work`` (``<set>-short/documents.jsonl`` and ``questions.jsonl``,
the canonical format) and ``benchmarks/studies/results/short_passages.json``: per set the
questions, snippet words (median, range), false refusals with the exact 95% interval and caught
at the shipped threshold, AUROC, and what the best threshold in hindsight catches at <= 10% false
refusals. The reads go through the reader's feature cache, so a rerun costs seconds.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _report import cpu_model
from default_budget import DEFAULT_SETS, dataset_path, parse_sets, read_sets

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "benchmarks" / "studies" / "results" / "short_passages.json"
SETS = ("eloq-gold-dev", "squad2-train", "subjqa")
MIN_WORDS, MAX_WORDS = 5, 30
SHORT_WORDS = 40  # a document shorter than this gets the shift (the snippets here have at most 30)
STEP = 0.05
_WORD = re.compile(r"[a-z0-9]+")
#: words too common to say where an answer sits (a snippet is chosen by the others it shares)
_COMMON = frozenset(
    """the a an and or of to in on at for with by from is are was were be been it its this that these
    those what which who whom whose when where why how do does did has have had not no as about into
    than then there their they them he she his her you your i we our my me""".split()  # noqa: SIM905
)


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _COMMON and len(w) > 2}


def snippet(document: str, anchor: str) -> str:
    """The ``MIN_WORDS``-``MAX_WORDS``-word passage of ``document`` that shares the most with ``anchor``."""
    from scopeguard.verification import split_sentences

    sentences = [s for s in split_sentences(document) if s.strip()] or [document]
    wanted = content_words(anchor)
    shared = [len(content_words(s) & wanted) for s in sentences]
    best = max(range(len(sentences)), key=lambda i: (shared[i], -i))
    words = sentences[best].split()
    if len(words) > MAX_WORDS:  # the densest window of the sentence
        starts = range(len(words) - MAX_WORDS + 1)

        def density(s: int) -> tuple[int, int]:
            return (len(content_words(" ".join(words[s : s + MAX_WORDS])) & wanted), -s)

        start = max(starts, key=density)
        return " ".join(words[start : start + MAX_WORDS])
    lo = hi = best
    while True:  # widen by the next sentence, then the previous, while it fits
        grown = False
        for j in (hi + 1, lo - 1):
            if 0 <= j < len(sentences):
                n = sum(len(sentences[k].split()) for k in range(min(lo, j), max(hi, j) + 1))
                if n <= MAX_WORDS:
                    lo, hi, grown = min(lo, j), max(hi, j), True
        if not grown:
            break
    return " ".join(sentences[lo : hi + 1])


def derive(name: str, work: Path, per_label: int, seed: int, skip: int = 0) -> Path:
    """Write ``work/<name>-short``: one snippet document per drawn question."""
    from scopeguard.data import Dataset, Document, LabeledQuestion, load_dataset, read_jsonl, save_dataset
    from scopeguard.detection.signals import sample_documents

    path = dataset_path(name)
    data = load_dataset(path)
    trained_docs = dict(parse_sets(DEFAULT_SETS)).get(name)
    seen = set(sample_documents(data, trained_docs, seed=0).documents) if trained_docs else set()
    references = {
        row["id"]: row.get("reference_response") or ""
        for row in read_jsonl(path / "questions.jsonl")
        if row.get("label") == "in_scope"
    }
    rng = random.Random(seed)
    chosen: list[LabeledQuestion] = []
    for label in ("in_scope", "out_of_scope"):
        pool = [q for q in data.questions if q.label == label and q.doc_id not in seen]
        rng.shuffle(pool)
        chosen += pool[skip : skip + per_label]
    documents: dict[str, Document] = {}
    questions: list[LabeledQuestion] = []
    for q in chosen:
        text = snippet(data.documents[q.doc_id].text, references.get(q.id) or q.question)
        if len(text.split()) < MIN_WORDS:
            continue
        doc_id = f"{q.doc_id}-{q.id[-8:]}"
        documents[doc_id] = Document(id=doc_id, text=text)
        questions.append(q.model_copy(update={"doc_id": doc_id}))
    out = work / f"{name}-short"
    save_dataset(Dataset(documents=documents, questions=tuple(questions)), out)
    return out


@dataclass(frozen=True)
class Scores:
    """Every question's P(out of scope) from the head, its label (1: out of scope) and its set."""

    p: np.ndarray
    y: np.ndarray
    names: np.ndarray


def measure(paths: list[Path]) -> tuple[dict[str, Any], Scores]:
    """The figures of each set at the shipped threshold (the JSON's ``threshold``, ``read_seconds``
    and ``sets``), and the scores they come from."""
    from scopeguard.detection.head.calibration import auroc, caught_at
    from scopeguard.detection.head.default import DefaultHead, default_head_path
    from scopeguard.detection.profile import rate
    from scopeguard.detection.signals import signal_matrix

    head = DefaultHead.load(default_head_path())
    t0 = time.perf_counter()
    signals = read_sets([(str(p), 0) for p in paths], head)
    seconds = time.perf_counter() - t0
    x, _ = signal_matrix(signals, head.signals, head.layer)
    p_all = np.asarray(head.head.predict(x))
    y_all = np.asarray(signals.labels, dtype=int)
    names = np.asarray(signals.datasets)
    rows: dict[str, Any] = {}
    for path in paths:
        m = names == path.name
        p, y = p_all[m], y_all[m]
        refused = p >= head.threshold
        lengths = [len(json.loads(line)["text"].split()) for line in (path / "documents.jsonl").open()]
        rows[path.name] = {
            "n": int(m.sum()),
            "answerable": int((y == 0).sum()),
            "words_median": statistics.median(lengths),
            "words_range": [min(lengths), max(lengths)],
            "false_refusals": rate(int(refused[y == 0].sum()), int((y == 0).sum())).model_dump(),
            "caught": rate(int(refused[y == 1].sum()), int((y == 1).sum())).model_dump(),
            "auroc": auroc(p, y),
            "caught_at_10": caught_at(p, y, 0.10),
        }
    summary = {"threshold": head.threshold, "read_seconds": round(seconds, 1), "sets": rows}
    return summary, Scores(p_all, y_all, names)


def shifted(p: np.ndarray, shift: float) -> np.ndarray:
    """``p`` lowered by ``shift`` as the detector lowers a short document's passage
    (:meth:`~scopeguard.detection.head.default.ShortPassages.lowered`)."""
    from scopeguard.detection.head.default import ShortPassages

    rule = ShortPassages(SHORT_WORDS, shift)
    return np.array([rule.lowered(float(x)) for x in p], dtype=np.float64)


def smallest_shift(p: np.ndarray, y: np.ndarray, names: np.ndarray, threshold: float, bound: float) -> float:
    """The smallest shift under which ``threshold`` refuses at most ``bound`` on every set."""
    shift = 0.0
    while shift < 20:
        refused = shifted(p, shift) >= threshold
        if all(refused[(names == n) & (y == 0)].mean() <= bound for n in set(names.tolist())):
            return round(shift, 4)
        shift += STEP
    return round(shift, 4)


def shift_study(scores: Scores, threshold: float, bound: float) -> dict[str, Any]:
    """The shift chosen on all sets, and for each set left out the shift chosen on the others."""
    from scopeguard.detection.profile import rate

    p, y, names = scores.p, scores.y, scores.names
    chosen = smallest_shift(p, y, names, threshold, bound)

    def point(m: np.ndarray, shift: float) -> dict[str, Any]:
        refused = shifted(p[m], shift) >= threshold
        ym = y[m]
        return {
            "shift": shift,
            "false_refusals": rate(int(refused[ym == 0].sum()), int((ym == 0).sum())).model_dump(),
            "caught": rate(int(refused[ym == 1].sum()), int((ym == 1).sum())).model_dump(),
        }

    left_out = {}
    for name in sorted(set(names.tolist())):
        others = names != name
        shift = smallest_shift(p[others], y[others], names[others], threshold, bound)
        left_out[name] = point(names == name, shift)
    return {
        "bound": bound,
        "words": SHORT_WORDS,
        "shift": chosen,
        "at_shift": {n: point(names == n, chosen) for n in sorted(set(names.tolist()))},
        "left_out": left_out,
    }


def ship(study: dict[str, Any]) -> None:
    """Write the shift into the packaged head (its weights and threshold unchanged)."""
    import dataclasses

    from scopeguard.detection.head.default import DefaultHead, ShortPassages, default_head_path

    head = DefaultHead.load(default_head_path())
    info = dict(head.info)
    info["short_passages"] = {
        "selection": (
            f"documents of fewer than {study['words']} words: P(out of scope) lowered by {study['shift']:g} "
            f"on the logit scale, the smallest shift under which the threshold refuses at most "
            f"{study['bound']:g} of the answerable questions on every set of 5-30-word snippets of the "
            "shared sets (benchmarks/studies/short_passages.py --ship)"
        ),
        "at_shift": study["at_shift"],
        "left_out": study["left_out"],
    }
    new = dataclasses.replace(head, short_passages=ShortPassages(study["words"], study["shift"]), info=info)
    new.save(default_head_path().parent)
    print(f"wrote {default_head_path()}: short passages (< {study['words']} words) shift {study['shift']:g}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/scopeguard-short-passages"))
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--per-label", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--show", type=int, default=0, help="print N answerable snippets a set, then stop")
    ap.add_argument(
        "--skip", type=int, default=0, help="skip the first N of each label (a fresh sample beside the first)"
    )
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--bound", type=float, default=0.10, help="false refusals allowed on each short set")
    ap.add_argument("--ship", action="store_true", help="write the chosen shift into the packaged head")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    names = [s.strip() for s in args.sets.split(",") if s.strip()]
    paths = [derive(name, args.work, args.per_label, args.seed, args.skip) for name in names]
    if args.show:
        from scopeguard.data import load_dataset

        for path in paths:
            data = load_dataset(path)
            shown = [q for q in data.questions if q.label == "in_scope"][: args.show]
            for q in shown:
                print(f"[{path.name}] {q.question}\n    {data.documents[q.doc_id].text}\n")
        return
    measured, scores = measure(paths)
    result = {
        "machine": cpu_model(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "per_label": args.per_label,
        "seed": args.seed,
        "skip": args.skip,
        **measured,
        "shift": shift_study(scores, measured["threshold"], args.bound),
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"shipped threshold {result['threshold']:.3f}; {result['machine']}")
    print(f"{'set':<22} {'n':>4} {'words':>6} {'false refusals':>22} {'caught':>7} {'AUROC':>6} {'C@10':>5}")
    for name, r in result["sets"].items():
        fr = r["false_refusals"]
        print(
            f"{name:<22} {r['n']:>4} {r['words_median']:>6} "
            f"{fr['value']:>6.3f} [{fr['low']:.2f}, {fr['high']:.2f}] ({fr['k']}/{fr['n']}) "
            f"{r['caught']['value']:>7.3f} {r['auroc']:>6.3f} {r['caught_at_10']:>5.2f}"
        )
    study = result["shift"]
    print(f"\nshift under {study['words']} words: {study['shift']:g} (<= {study['bound']:g} refused a set)")
    for name, r in study["at_shift"].items():
        lo, fr = study["left_out"][name], study["left_out"][name]["false_refusals"]
        print(
            f"{name:<22} FR {r['false_refusals']['value']:.3f} caught {r['caught']['value']:.3f} | left out "
            f"(shift {lo['shift']:g}): FR {fr['value']:.3f} [{fr['low']:.2f}, {fr['high']:.2f}] "
            f"caught {lo['caught']['value']:.3f}"
        )
    print(f"wrote {args.out}")
    if args.ship:
        ship(study)


if __name__ == "__main__":
    main()
