"""The offline generator per domain (issue #59): hand-labelled shares, coverage, seconds, question forms.

    # each domain's sample (benchmarks/data/generation_domains.json: its data set and document ids)
    python benchmarks/generation_domains.py documents --work /tmp/domains
    scopeguard generate /tmp/domains/news.jsonl --out /tmp/domains/news     # and so for each domain

    # each kept question beside its document, to read (text stays in --work, never in the repo);
    # a question without a label gets an empty one in the review file; two runs of one domain (the
    # arms of an A/B) give one sheet, their questions shuffled together, the run not named
    python benchmarks/generation_domains.py review --run news=/tmp/domains/news \\
        --run reviews=/tmp/domains/reviews --work /tmp/domains
    # fill "natural" and "answerable" in benchmarks/results/generation_domains_review.json, then
    python benchmarks/generation_domains.py report --run news=/tmp/domains/news --run ...

A run folder is ``scopeguard generate``'s ``--out``: its checkpoints (``.checkpoints/*.json``, one
record per document with its kept questions and seconds) and its settings (``run.json``).

Hand labels (``benchmarks/results/generation_domains_review.json``) are keyed ``DOC_ID:SHA``, SHA the
first 12 hex digits of the question's sha256 (``generation_offline.question_sha``), and hold
``domain``, ``label`` (``in_scope`` or ``out_of_scope``), ``kind`` (the question's edit kind),
``natural`` (an out-of-scope question a person reading the document could send: grammatical, a
premise that makes sense; ``null`` for an in-scope one) and ``answerable`` (the document answers
it); ``null`` where not read yet, and an optional ``note``. No question or document text.

Per domain the report gives: kept out-of-scope questions, the share labelled natural and unanswerable
with its Wilson 95% interval; kept in-scope questions and the share answerable (interval); documents
with at least 2 out-of-scope and 3 in-scope questions (of the sample, or of the run's documents when
the manifest lists none); seconds per document (median, max: as recorded where the run was made);
and the most common question form's share of the kept out-of-scope questions. A question's form is
its opening: the question lower-cased, each run of content words its document contains (the subject,
anything the document names) written ``_``, up to its third word that is neither ``_`` nor an article
("What is the price of the Fairmont?" -> "what is the price"; "How far is the hotel from the
airport?" -> "how far is"; "When was the hotel built?" -> "when was the _ built"). A detail its
document names is removed with the subject. The targets of #59 are checked on the point estimates.
Writes ``benchmarks/results/generation_domains.json`` with the machine, the date and each run's
settings (writer model, screens, ...).
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import random
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from _report import cpu_model, report, wilson
from generation_offline import question_sha

from scopeguard.data import read_jsonl
from scopeguard.detection.read.text import STOPWORDS, content_stem_set, stem, tokenize
from scopeguard.generation.checkpoint import CheckpointStore, DocumentRecord, GeneratedQuestion

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED = ROOT.parent / "shared" / "data"
MANIFEST = HERE / "data" / "generation_domains.json"
REVIEW = HERE / "results" / "generation_domains_review.json"
RESULT = HERE / "results" / "generation_domains.json"
MIN_OOS, MIN_IN = 2, 3  # a document meets the counts with at least these kept questions
TARGETS = {  # issue #59's, each domain
    "oos_labelled": 30,  # at least (hand-read)
    "natural_unanswerable": 0.75,  # at least
    "answerable": 0.85,  # at least
    "docs_meeting_share": 0.9,  # at least
    "seconds_per_doc_median": 180.0,  # at most (2 cores)
    "top_form_share": 0.15,  # at most
}
AT_MOST = {"seconds_per_doc_median", "top_form_share"}
ARTICLES = frozenset({"a", "an", "the"})
SUBJECT = "_"
DOCUMENT_CHARS = 3000  # of a document shown beside its questions
logger = logging.getLogger("generation_domains")


def domains(path: Path = MANIFEST) -> dict[str, dict[str, Any]]:
    """The manifest: per domain ``dataset``, ``source`` (``shared``: a folder of ../shared/data;
    ``repo``: a folder of this repository), ``doc_ids`` (the sample; empty until drawn), ``drawn_by``."""
    return json.loads(path.read_text(encoding="utf-8"))


def parse_runs(pairs: list[str], known: dict[str, Any]) -> dict[str, list[Path]]:
    """``DOMAIN=DIR`` pairs as {domain: [folder, ...]} (a domain may have several runs: the arms of
    one draw); a domain not in the manifest stops the script."""
    runs: dict[str, list[Path]] = {}
    for pair in pairs:
        domain, _, folder = pair.partition("=")
        if domain not in known or not folder:
            raise SystemExit(f"--run takes DOMAIN=DIR with DOMAIN one of {', '.join(known)}; got {pair!r}")
        runs.setdefault(domain, []).append(Path(folder))
    return runs


def records(folder: Path) -> list[DocumentRecord]:
    """The run's per-document records, in the order the documents were given."""
    if not (folder / ".checkpoints").is_dir():
        raise SystemExit(f"{folder} is not a generation run folder (no .checkpoints/)")
    return sorted(CheckpointStore(folder).load_all().values(), key=lambda r: r.order)


def label_key(doc_id: str, question: str) -> str:
    """A hand label's key: the same question kept for two documents has a label for each."""
    return f"{doc_id}:{question_sha(question)}"


def read_labels(path: Path) -> dict[str, dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def write_labels(path: Path, labels: dict[str, dict[str, Any]]) -> None:
    """One label a line, so that a person can fill them in by hand and a diff shows each."""
    lines = [f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in labels.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")


def is_labelled(lab: dict[str, Any] | None) -> bool:
    if lab is None or lab.get("answerable") is None:
        return False
    return lab["label"] == "in_scope" or lab.get("natural") is not None


def question_form(question: str, document: str) -> str:
    """The question's opening with its subject removed (the module docstring has the rule)."""
    named = content_stem_set(document)
    words: list[str] = []
    for word in tokenize(question):
        if word not in STOPWORDS and len(word) > 1 and stem(word) in named:
            if words and words[-1] == SUBJECT:
                continue
            word = SUBJECT
        words.append(word)
        if sum(w not in ARTICLES and w != SUBJECT for w in words) == 3:
            break
    return " ".join(words)


def _share(k: int, n: int) -> tuple[float | None, list[float] | None]:
    interval = wilson(k, n)
    return (round(k / n, 3), [round(x, 3) for x in interval]) if interval else (None, None)


def domain_row(
    domain: str, recs: list[DocumentRecord], labels: dict[str, dict[str, Any]], sample: list[str]
) -> dict[str, Any]:
    """The figures of one domain's run (``sample``: the manifest's document ids, may be empty)."""
    done = [r for r in recs if r.status == "done"]
    kept = [(r, q) for r in done for q in r.questions]
    oos = [(r, q) for r, q in kept if q.label == "out_of_scope"]
    ins = [(r, q) for r, q in kept if q.label == "in_scope"]
    oos_labs = [lab for r, q in oos if is_labelled(lab := labels.get(label_key(r.doc_id, q.question)))]
    ins_labs = [lab for r, q in ins if is_labelled(lab := labels.get(label_key(r.doc_id, q.question)))]
    good = sum(bool(lab["natural"]) and not lab["answerable"] for lab in oos_labs)
    natural_unanswerable, natural_ci = _share(good, len(oos_labs))
    answerable, answerable_ci = _share(sum(bool(lab["answerable"]) for lab in ins_labs), len(ins_labs))
    docs = set(sample) | {r.doc_id for r in recs}
    meeting = sum(r.count("out_of_scope") >= MIN_OOS and r.count("in_scope") >= MIN_IN for r in done)
    seconds = [r.seconds for r in done]
    forms = Counter(question_form(q.question, r.text) for r, q in oos)
    top_form, top_n = forms.most_common(1)[0] if forms else (None, 0)
    row: dict[str, Any] = {
        "domain": domain,
        "docs": len(docs),
        "docs_done": len(done),
        "docs_meeting": meeting,
        "docs_meeting_share": round(meeting / len(docs), 3) if docs else None,
        "oos_kept": len(oos),
        "oos_labelled": len(oos_labs),
        "natural_unanswerable": natural_unanswerable,
        "natural_unanswerable_ci": natural_ci,
        "in_scope_kept": len(ins),
        "in_scope_labelled": len(ins_labs),
        "answerable": answerable,
        "answerable_ci": answerable_ci,
        "seconds_per_doc_median": round(statistics.median(seconds), 1) if seconds else None,
        "seconds_per_doc_max": round(max(seconds), 1) if seconds else None,
        "top_form": top_form,
        "top_form_share": round(top_n / len(oos), 3) if oos else None,
    }
    row["missed"] = ", ".join(k for k in TARGETS if not _meets(k, row.get(k))) or "-"
    return row


def _meets(key: str, value: float | None) -> bool:
    if value is None:
        return False
    return value <= TARGETS[key] if key in AT_MOST else value >= TARGETS[key]


def _check_sample(domain: str, recs: list[DocumentRecord], sample: list[str]) -> None:
    outside = sorted({r.doc_id for r in recs} - set(sample)) if sample else []
    if outside:
        logger.warning("%s: %d document(s) of the run are not in the manifest's sample", domain, len(outside))


def documents(manifest: dict[str, dict[str, Any]], work: Path) -> None:
    """Write ``work/DOMAIN.jsonl``: each domain's sample read from its data set (for `generate`)."""
    for domain, spec in manifest.items():
        if not spec["doc_ids"]:
            logger.warning("%s: no sample in %s yet (%s)", domain, MANIFEST.name, spec["drawn_by"])
            continue
        folder = (SHARED if spec["source"] == "shared" else ROOT) / spec["dataset"]
        by_id = {d["doc_id"]: d for d in read_jsonl(folder / "documents.jsonl")}
        missing = [i for i in spec["doc_ids"] if i not in by_id]
        if missing:
            raise SystemExit(f"{domain}: {len(missing)} id(s) not in {folder}: {missing[:3]}")
        work.mkdir(parents=True, exist_ok=True)
        out = work / f"{domain}.jsonl"
        rows = [{"doc_id": i, "text": by_id[i]["text"]} for i in spec["doc_ids"]]
        out.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        logger.info("wrote %d documents to %s", len(rows), out)


def _kept(folders: list[Path]) -> list[tuple[DocumentRecord, list[GeneratedQuestion]]]:
    """Each document done in any of ``folders`` with the questions any of them kept, each once, out
    of scope first; of several runs (arms), shuffled within each label (seeded by the document), so
    that a sheet does not tell which run kept which."""
    docs: dict[str, tuple[DocumentRecord, dict[str, GeneratedQuestion]]] = {}
    for folder in folders:
        for r in records(folder):
            if r.status == "done":
                kept = docs.setdefault(r.doc_id, (r, {}))[1]
                for q in r.questions:
                    kept.setdefault(label_key(r.doc_id, q.question), q)
    out = []
    for r, kept in docs.values():
        qs = list(kept.values())
        if len(folders) > 1:
            random.Random(r.doc_id).shuffle(qs)
        out.append((r, sorted(qs, key=lambda q: q.label, reverse=True)))  # out of scope first
    return out


def review(
    runs: dict[str, list[Path]], manifest: dict[str, dict[str, Any]], work: Path, review_file: Path
) -> dict[str, int]:
    """Write ``work/to_label_DOMAIN.md`` (each document, then its kept questions with their keys;
    several runs of a domain are read blind, :func:`_kept`) and add an empty label to
    ``review_file`` for each kept question without one; returns the questions still unlabelled per
    domain."""
    labels = read_labels(review_file)
    unlabelled: dict[str, int] = {}
    work.mkdir(parents=True, exist_ok=True)
    for domain, folders in runs.items():
        docs = _kept(folders)
        _check_sample(domain, [r for r, _ in docs], manifest[domain]["doc_ids"])
        lines = [f"# {domain}: {', '.join(map(str, folders))}", ""]
        for r, kept in docs:
            lines += [f"## {r.doc_id}", "", r.text[:DOCUMENT_CHARS], ""]
            for q in kept:
                key = label_key(r.doc_id, q.question)
                lines.append(f"- `{key}` {q.label} ({q.edit_kind}): {q.question}")
                labels.setdefault(
                    key,
                    {
                        "domain": domain,
                        "label": q.label,
                        "kind": q.edit_kind,
                        "natural": None,
                        "answerable": None,
                    },
                )
            lines.append("")
        path = work / f"to_label_{domain}.md"
        path.write_text("\n".join(lines), encoding="utf-8")
        keys = {label_key(r.doc_id, q.question) for r, kept in docs for q in kept}
        unlabelled[domain] = sum(not is_labelled(labels[k]) for k in keys)
        print(
            f"{domain}: {len(keys)} kept questions in {path}; {unlabelled[domain]} unlabelled in "
            f"{review_file}"
        )
    write_labels(review_file, labels)
    return unlabelled


def run_settings(folder: Path) -> dict[str, Any] | None:
    """The run's settings as ``run.json`` holds them (writer model, filter, screens, ...)."""
    from scopeguard.generation.pipeline import run_folder

    saved = run_folder(folder)
    return saved.read_config().model_dump(mode="json") if saved.exists() else None


def build_report(
    runs: dict[str, list[Path]], manifest: dict[str, dict[str, Any]], labels: dict[str, dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows (one per domain: one run each) and what the result file records beside them."""
    rows, settings = [], {}
    for domain, folders in runs.items():
        if len(folders) != 1:
            raise SystemExit(f"report takes one --run a domain; {domain} has {len(folders)}")
        folder = folders[0]
        recs = records(folder)
        _check_sample(domain, recs, manifest[domain]["doc_ids"])
        rows.append(domain_row(domain, recs, labels, manifest[domain]["doc_ids"]))
        settings[domain] = {"folder": str(folder), "settings": run_settings(folder)}
    meta = {
        "benchmark": "generation_domains",
        "date": datetime.date.today().isoformat(),
        "data": {d: {k: manifest[d][k] for k in ("dataset", "source")} for d in runs},
        "targets": TARGETS,
        "runs": settings,
    }
    return rows, meta


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["documents", "review", "report"])
    ap.add_argument("--run", action="append", default=[], help="DOMAIN=DIR: a generation run folder")
    ap.add_argument("--work", type=Path, default=Path("/tmp/scopeguard-generation-domains"))
    ap.add_argument("--review-file", type=Path, default=REVIEW)
    ap.add_argument("--note", default="", help="recorded with the figures (e.g. a shared machine)")
    ap.add_argument("--out", type=Path, default=RESULT)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    manifest = domains()
    runs = parse_runs(args.run, manifest)
    if args.step == "documents":
        documents(manifest, args.work)
    elif not runs:
        raise SystemExit("give at least one --run DOMAIN=DIR")
    elif args.step == "review":
        review(runs, manifest, args.work, args.review_file)
    else:
        rows, meta = build_report(runs, manifest, read_labels(args.review_file))
        meta["machine"] = {"cpu": cpu_model(), "cores": os.cpu_count(), "note": args.note}
        report(rows, meta, args.out)


if __name__ == "__main__":
    main()
