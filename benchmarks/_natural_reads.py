"""The run folders, hand labels and model-read steps of ``generation_natural.py``: ``signals`` (can
the reading model tell the natural out-of-scope questions?) and ``in-scope`` (the filter's reading of
the in-scope candidates against their hand labels)."""

from __future__ import annotations

import json
import logging
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from generation_offline import question_sha

from scopeguard.data import read_jsonl
from scopeguard.detection.head.calibration import auroc
from scopeguard.generation.checkpoint import CheckpointStore, DocumentRecord

logger = logging.getLogger("generation_natural")


def run_records(work: Path, run: str) -> list[DocumentRecord]:
    """The checkpoints of ``work/RUN`` in the order their documents were given."""
    return sorted(CheckpointStore(work / run).load_all().values(), key=lambda r: r.order)


def labels_by_sha(path: Path) -> dict[str, dict[str, Any]]:
    """The hand labels of ``path`` by question hash, and by document and hash (the same question
    asked of two documents, "What is the name of the hotel?", has a label for each)."""
    labels: dict[str, dict[str, Any]] = {}
    for lab in json.loads(path.read_text(encoding="utf-8")):
        labels.setdefault(lab["question_sha"], lab)
        labels[f"{lab['doc_id']}:{lab['question_sha']}"] = lab
    return labels


def label_of(labels: dict[str, dict[str, Any]], doc_id: str, question: str) -> dict[str, Any] | None:
    sha = question_sha(question)
    return labels.get(f"{doc_id}:{sha}", labels.get(sha))


def share(items: list[bool]) -> float | None:
    """The share of true items (3 decimals), ``None`` for none."""
    return round(sum(items) / len(items), 3) if items else None


# the reading model asked whether a question is natural (the two wordings tried)
_VERDICT = {
    "alone": 'Someone asked this question about a product review or a short text:\n\n"{q}"\n\n'
    "Is it a clear, sensible question that a real person would ask? Answer Yes or No.",
    "with_document": 'Text:\n"""{d}"""\n\nQuestion: "{q}"\n\nIs the question a clear, sensible question '
    "that a reader of this text could really ask (even if the text does not answer it)? Answer Yes or No.",
}


def _mean_logprob(llm: Any, text: str) -> float:
    """Mean log-probability of ``text``'s tokens read alone after "Question: " (not scored)."""
    from scopeguard.llamacpp import decode, logits_row

    head = len(llm.tokenize(b"Question: ", add_bos=True, special=False))
    ids = list(llm.tokenize(f"Question: {text}".encode(), add_bos=True, special=False))
    llm._ctx.kv_cache_clear()
    decode(llm, ids, 0, all_logits=True)
    total = 0.0
    for row in range(head - 1, len(ids) - 1):
        logits = logits_row(llm, row)
        top = float(logits.max())
        total += float(logits[ids[row + 1]]) - top - math.log(float(np.exp(logits - top).sum()))
    return total / (len(ids) - head)


def signals(work: Path, labels: dict[str, dict[str, Any]], threads: int, model: str) -> dict[str, Any]:
    """Can the reading model tell natural questions from the rest? AUROC over the labelled
    out-of-scope questions of every run of: its fluency (the mean token log-prob of the question
    read alone, and the same minus the median of its document's in-scope questions: the screen
    issue #39 proposed) and its own log P(Yes) - log P(No) asked whether the question is natural."""
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts
    from scopeguard.llamacpp import load_llama
    from scopeguard.llm.base import ChatMessage
    from scopeguard.models import local_gguf

    llm = load_llama(local_gguf(model), purpose="fluency", n_ctx=256, n_batch=256, n_threads=threads)
    verdicts = LlamaCppVerdicts(model, n_threads=threads)
    scores: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    for run in sorted(p.name for p in work.iterdir() if (p / "half.txt").is_file()):
        half = (work / run / "half.txt").read_text(encoding="utf-8")
        docs = {d["doc_id"]: d["text"] for d in read_jsonl(work / half / "documents.jsonl")}
        for r in run_records(work, run):
            ins = [q.question for q in r.questions if q.label == "in_scope"]
            base = statistics.median(_mean_logprob(llm, q) for q in ins) if ins else None
            for q in r.questions:
                lab = label_of(labels, r.doc_id, q.question)
                if q.label != "out_of_scope" or lab is None:
                    continue
                natural = bool(lab["natural"])
                fluency = _mean_logprob(llm, q.question)
                scores["fluency"].append((fluency, natural))
                if base is not None:
                    scores["fluency_minus_in_scope_median"].append((fluency - base, natural))
                for name, template in _VERDICT.items():
                    text = template.format(q=q.question, d=docs.get(r.doc_id, "")[:1500])
                    said = verdicts.score([ChatMessage(role="user", content=text)])
                    scores[f"verdict_{name}"].append((said.logp_yes - said.logp_no, natural))
    return {
        name: {
            "n": len(pairs),
            "natural": sum(n for _, n in pairs),
            "auroc": round(auroc([x for x, _ in pairs], [int(n) for _, n in pairs]), 3),
        }
        for name, pairs in scores.items()
    }


def _source_sentence(question: str, text: str) -> str:
    """The sentence an in-scope candidate was most likely written from, for a record that does not
    name it (a dropped one, before the generator recorded it): of the sentences the generator asks
    about, the one sharing most content words with it (read by hand on half H: right every time)."""
    from scopeguard.detection.read.text import content_stem_set
    from scopeguard.generation.offline import informative_sentences

    stems = content_stem_set(question)
    sentences = informative_sentences(text, 8)
    return max(sentences, key=lambda s: len(stems & content_stem_set(s))) if sentences else text


def _detector(spec: str) -> Any:
    """``NAME`` or ``NAME@LLM``: a registered detector, with ``@LLM`` its reading model (e.g.
    ``logprob@local:/path/to/tuned-reader``, a tuned reader's folder read by llama.cpp)."""
    from scopeguard.detection.detectors import get_detector

    name, _, reader = spec.partition("@")
    return get_detector(name, reader=reader) if reader else get_detector(name)


def detector_label(spec: str) -> str:
    """The short name of ``--detector``'s columns: ``NAME``, or ``NAME@FOLDER`` for a reading model
    given by path (its last part)."""
    name, _, llm = spec.partition("@")
    return f"{name}@{Path(llm.partition(':')[2] or llm).name}" if llm else name


def in_scope(
    work: Path, runs: list[str], labels: dict[str, dict[str, Any]], sentence: bool, other: str | None
) -> dict[str, Any]:
    """Every in-scope candidate the filter read (kept, and dropped as not answerable) with its hand
    label (answerable or not) and the filter's P(out of scope); with ``sentence``, each dropped one
    read again by the same detector against only its source sentence; with ``other`` (a detector
    name), every one read by that detector too, as a filter in its place."""
    from scopeguard.detection.detectors import get_detector
    from scopeguard.types import Document

    detector = get_detector("logprob") if sentence else None
    second = _detector(other) if other else None
    tag = detector_label(other) if other else ""
    out: dict[str, Any] = {}
    for run in runs:
        items: list[dict[str, Any]] = []
        records = [r for r in run_records(work, run) if r.status == "done"]
        for r in records:
            read = [(q.question, q.filter, True) for q in r.questions if q.label == "in_scope"]
            dropped_here = [q for q in r.dropped if q.label == "in_scope" and q.reason.startswith("filter")]
            read += [(q.question, q.filter, False) for q in dropped_here]
            sentences = {q.question: q.true_claim for q in [*r.questions, *r.dropped] if q.true_claim}
            for question, filt, kept in read:
                lab = label_of(labels, r.doc_id, question)
                item: dict[str, Any] = {
                    "doc_id": r.doc_id,
                    "question_sha": question_sha(question),
                    "kept": kept,
                    "answerable": None if lab is None else bool(lab["answerable"]),
                    "p_out": None if filt is None else filt.score,
                }
                if detector is not None and not kept:
                    source = sentences.get(question) or _source_sentence(question, r.text)
                    v = detector.detect(question, [Document(id="sentence", text=source)])
                    item["sentence_p_out"], item["sentence_label"] = v.score, v.label
                if second is not None:
                    v = second.detect(question, [Document(id=r.doc_id, text=r.text)])
                    item[f"{tag}_p_out"], item[f"{tag}_label"] = v.score, v.label
                items.append(item)
        labelled = [i for i in items if i["answerable"] is not None]
        kept = [i for i in labelled if i["kept"]]
        dropped = [i for i in labelled if not i["kept"]]
        answerable = [i for i in labelled if i["answerable"]]
        scored = [i for i in labelled if i["p_out"] is not None]
        summary: dict[str, Any] = {
            "docs": len(records),
            "read": len(items),
            "labelled": len(labelled),
            "answerable": len(answerable),
            "kept": len(kept),
            "kept_answerable": sum(i["answerable"] for i in kept),
            "kept_answerable_share": share([i["answerable"] for i in kept]),
            "dropped": len(dropped),
            "dropped_answerable": sum(i["answerable"] for i in dropped),
            "kept_share_of_answerable": share([i["kept"] for i in answerable]),
            "kept_share_of_unanswerable": share([i["kept"] for i in labelled if not i["answerable"]]),
            "auroc_p_out_unanswerable": round(
                auroc([i["p_out"] for i in scored], [int(not i["answerable"]) for i in scored]), 3
            )
            if scored and 0 < sum(i["answerable"] for i in scored) < len(scored)
            else None,
            "docs_with_3_in": sum(r.count("in_scope") >= 3 for r in records),
        }
        if sentence:
            back = [i for i in dropped if i.get("sentence_label") == "in_scope"]
            summary["sentence_recovers"] = len(back)
            summary["sentence_recovers_answerable"] = sum(i["answerable"] for i in back)
        if second is not None:
            kept_other = [i for i in labelled if i[f"{tag}_label"] == "in_scope"]
            summary[f"{tag}_kept"] = len(kept_other)
            summary[f"{tag}_kept_answerable"] = sum(i["answerable"] for i in kept_other)
            summary[f"{tag}_docs_with_3_in"] = sum(
                sum(i["doc_id"] == r.doc_id for i in items if i[f"{tag}_label"] == "in_scope") >= 3
                for r in records
            )
            summary[f"{tag}_auroc_p_out_unanswerable"] = round(
                auroc([i[f"{tag}_p_out"] for i in labelled], [int(not i["answerable"]) for i in labelled]), 3
            )
        out[run] = {"summary": summary, "questions": items}
        logger.info("%s: %s", run, summary)
    return out
