"""Are generated out-of-scope questions ones a person would ask? Hand labels by edit kind (issue #39).

    # 1. the sample: SubjQA reviews (../shared, read at run time) and the invented stories and news
    #    paragraphs of benchmarks/data/implied and near-miss, none used to tune the generator; split
    #    in two halves: A (labelled before a change, may guide it) and B (fresh, labelled after it)
    python benchmarks/generation_natural.py corpus --work /tmp/natural

    # 2. generate on a half with the packaged 1.5B (scopeguard generate's pipeline, offline mode)
    python benchmarks/generation_natural.py generate --half B --run after --work /tmp/natural

    # 3. write the questions to label (text stays in --work, never in the repo), label them by hand
    #    in benchmarks/results/generation_natural_review.json, then summarise
    python benchmarks/generation_natural.py review --run after --work /tmp/natural
    python benchmarks/generation_natural.py report --work /tmp/natural
    # can the reading model itself tell the natural ones? (fluency, its own Yes/No; AUROC)
    python benchmarks/generation_natural.py signals --work /tmp/natural
    # the in-scope side: how often the filter keeps an unanswerable candidate and drops an
    # answerable one (hand labels in generation_natural_in_scope_review.json), and what reading a
    # dropped one again against only its source sentence would recover
    python benchmarks/generation_natural.py in-scope --run after-H-off --work /tmp/natural --sentence \\
        --detector default
    # a tuned reader's folder (train-reader's --out) as the filter: NAME@LLM
    python benchmarks/generation_natural.py in-scope --run after-H-off --work /tmp/natural \\
        --detector logprob@local:/tmp/lodo15k/n1000-without-squad2-train

A hand label is keyed by the question's sha256 (first 12 hex digits, as in generation_offline.py):
``natural`` (a person reading or writing about the document could send it: grammatical, no phrase
of a prompt's example, a premise that makes sense) and ``answerable`` (the document answers it).
The report gives, per run and edit kind, the kept out-of-scope questions labelled, the shares
natural, unanswerable and both, the in-scope and out-of-scope questions per document, seconds per
document and the machine; ``report`` writes ``benchmarks/results/generation_natural.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from _report import cpu_model, earlier_rows, report, settings
from generation_offline import question_sha

from scopeguard.data import read_jsonl
from scopeguard.detection.head.calibration import auroc
from scopeguard.generation.checkpoint import CheckpointStore, DocumentRecord

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[1] / "shared" / "data"
INVENTED = (HERE / "data" / "implied", HERE / "data" / "near-miss")
REVIEW = HERE / "results" / "generation_natural_review.json"
RESULT = HERE / "results" / "generation_natural.json"
SIGNALS = HERE / "results" / "generation_natural_signals.json"
IN_SCOPE_REVIEW = HERE / "results" / "generation_natural_in_scope_review.json"
IN_SCOPE = HERE / "results" / "generation_natural_in_scope.json"
# the runs whose in-scope candidates are labelled (issue #39)
IN_SCOPE_RUNS = {
    "after-H-off": "the shipped offline generator on half H (its in-scope side is after-H's too)",
    "after-I": "the offline generator of commit 8c52aa0 (glued stops split, more in-scope sentences) on "
    "the fresh half I",
    "after-J": "the offline generator after I's labels (a question naming 'this sentence' unusable) on "
    "the fresh half J",
    "after-I-off": "commit d9e27cd's offline generator on half I (the same documents, back to back)",
    "insc-H-dev": "commit 52a9639's in_scope_answer, taken out in the next (each candidate written "
    "after its answer, copied from the sentence; kept only when that answer is the sentence's "
    "words and not in the question), on half H, no filter: Generator(llm, GenerationConfig(mode='followup', "
    "followups=1, min_oos=0, filter=False, in_scope_answer=True)).run(H's documents, OUT); labelled "
    "after after-H-off's in-scope candidates (a development run, not a fresh half)",
}
REVIEWS_PER_HALF, INVENTED_PER_HALF = 6, 2  # per half: SubjQA reviews; documents of each invented set
REVIEW_WORDS = (100, 300)
# drawn after the halves, for B only: ELOQ's length rule (scopeguard generate's default) skips
# documents under 150 words, the near-miss paragraphs among them, and B needs about 60 kept
# out-of-scope questions
EXTRA_REVIEWS_B, EXTRA_INVENTED_B, MIN_WORDS = 8, 2, 150
# C: a third sample, drawn after the screens and the filter margin were changed on B's labels
REVIEWS_C, INVENTED_C = 10, 3
# D: a fourth, drawn after C's labels led to the subject-anchored unstated prompt
REVIEWS_D, INVENTED_D = 10, 3
# E: a fifth, drawn after D's labels led to the enumeration screen
REVIEWS_E, INVENTED_E = 10, 3
# F: a sixth, drawn after D's and E's labels led to follow-ups only as a top-up (reviews alone: E
# took the last invented documents of at least MIN_WORDS words)
REVIEWS_F, INVENTED_F = 13, 0
# G: a seventh, drawn after F's labels led to hints fitted to the subject's kind (reviews alone)
REVIEWS_G = 13
# H: an eighth, drawn after G's labels led to the hints in turn and the follow-ups last (reviews
# alone; measured against the shipped prompts on it and not kept)
REVIEWS_H = 13
# I: a ninth, drawn after H's labels led to more sentences per document (stops glued to the next
# sentence split, the unstated questions moored to the subject, top-ups on new sentences, more
# in-scope sentences; reviews alone)
REVIEWS_I = 13
# J: a tenth, drawn after I's labels (the screen for a question naming "this sentence"; reviews alone)
REVIEWS_J = 13
# K: an eleventh, drawn after J's labels led to filling a short document from within the filter's
# margin (reviews alone)
REVIEWS_K = 13
# L: a twelfth, drawn with K (before K was read; generated after K's labels changed the overlap
# rule for unstated questions, four-word questions that name something, and two mended slips)
REVIEWS_L = 13
# M: a thirteenth, drawn after K's labels, generated after L's labels led to the copy rule
REVIEWS_M = 13
# N: a fourteenth, drawn after M's labels, for the same generator as M (nothing changed on M's
# labels but a screen for "the sentence is describing")
REVIEWS_N = 13
# O: a fifteenth, drawn after N's labels, generated after the filter's misses on N and M led to
# absent_details (a price, an address or a year a review states none of)
REVIEWS_O = 13
# P: a sixteenth, drawn after O's labels, generated after them (a named street states an address,
# long sentences cut at their clause breaks, a detail's synonyms one word to the copy rule)
REVIEWS_P = 13
# Q: a seventeenth, drawn after P's labels, generated after them (the subject's words count as the
# document's for unstated questions, a review written without capitals cut into sentences, a word's
# forms one to the copy rule)
REVIEWS_Q = 13
# R: an eighteenth, drawn after Q's labels, for the same generator as Q (97d5201: nothing changed
# on Q's labels)
REVIEWS_R = 13
# S: a nineteenth, drawn after R's labels, generated after the year a place opened joined its hints
# (place_year_hint: Q's and R's documents left short were hotel reviews)
REVIEWS_S = 13
# T: a twentieth, drawn after S's labels, generated after them (a street named without its number
# or stop, "Market St", states an address; "How long has it been open?" asks a year)
REVIEWS_T = 13
# U: a twenty-first, drawn after T's labels, generated after them (where to buy it is absent from a
# review naming no shop: absent_stores)
REVIEWS_U = 13
# V: a twenty-second, drawn after U's labels, generated after them (questions about the review's
# writer as "the person" and unstated questions about two things joined by "and" dropped:
# writer_screen, one_thing_screen)
REVIEWS_V = 13
# W: a twenty-third, drawn after V's labels, generated after them (a subject the model capitalised
# from a description named as the review writes it: subject_as_written)
REVIEWS_W = 13
# X: a twenty-fourth, drawn while W was read, generated after a change made on V's and W's short
# book reviews (an agent noun, "publisher", no copy of its verb, "published": agent_nouns_apart)
REVIEWS_X = 13
# Y: a twenty-fifth, drawn after X's labels, generated with nothing changed since X (commit c3b87f8)
REVIEWS_Y = 13
# Z: a twenty-sixth, drawn after Y's labels, generated after the changes made on V-Y's labels (a
# subject the document never writes is not asked about: subject_in_document; who wrote a book of a
# review naming no writer is out of scope: absent_authors)
REVIEWS_Z = 13
# AA: a twenty-seventh, drawn after Z's labels, generated after the change made on them (sampled
# top-up rounds shown the questions already written: top_up_shows_asked)
REVIEWS_AA = 13
# AB: a twenty-eighth, drawn after AA's labels, generated after the changes made on them (a short
# document's follow-ups last: followups_after_top_ups; a title joined by "and" is one thing)
REVIEWS_AB = 13
# AC: a twenty-ninth, drawn after AB's labels, generated after the change made on AA's and AB's
# (an unstated question about another thing the document names: other_thing_screen)
REVIEWS_AC = 13
# AD: a thirtieth, drawn after AC's labels, generated after the change made on them (what a
# subject's kind is called counts as the subject's words: kind_words_count)
REVIEWS_AD = 13
# AE: a thirty-first, drawn after AD's labels, generated after the change made on them (when it is
# available or open: odd_details_screen)
REVIEWS_AE = 13
# AF: a thirty-second, drawn after AE's labels, generated with nothing changed since AE (the shipped
# defaults again: is AE's 85% what a fresh sample gets?)
REVIEWS_AF = 13
# AG, AH: a thirty-third and a thirty-fourth, drawn together after AF's labels, generated after the
# changes made on Z-AF's (an unstated question not about the subject: about_subject_screen; at
# most three out-of-scope questions a document: max_oos)
REVIEWS_AG = 13
REVIEWS_AH = 13
# AI, AJ: a thirty-fifth and a thirty-sixth, drawn together after AG's and AH's labels, generated
# after the change made on them (a subject first named late: subject_named_late)
REVIEWS_AI = 13
REVIEWS_AJ = 13
# AK, AL: a thirty-seventh and a thirty-eighth, drawn together after AI's and AJ's labels, generated
# with nothing changed since AI (the shipped defaults again: is AI's and AJ's 79% what a fresh
# sample gets?)
REVIEWS_AK = 13
REVIEWS_AL = 13
# AM, AN: a thirty-ninth and a fortieth, drawn together after AK's and AL's labels, generated after
# the change made on AI-AL's (a subject named in lower case gets its article: subject_article)
REVIEWS_AM = 13
REVIEWS_AN = 13
# AO, AP: a forty-first and a forty-second, drawn together after AM's and AN's labels, generated
# with nothing changed since AM (the shipped defaults again, before #39 is closed)
REVIEWS_AO = 13
REVIEWS_AP = 13
# every half, in the order drawn (the last is the default of --half)
HALVES = (*"ABCDEFGHIJKLMNOPQRSTUVWXYZ", *(f"A{c}" for c in "ABCDEFGHIJKLMNOP"))
MODEL = "qwen2.5-coder-1.5b"
logger = logging.getLogger("generation_natural")
# what each run recorded here was generated with (issue #39), in order
RUNS = {
    "before": "commit 06b1331: offline = perturb (6 SQuAD kinds, one fixed prompt example) + follow-ups",
    "after-A": "offline = one unstated question per sentence + follow-ups; example-phrase, 'you' and "
    "double-question screens (half A again, labelled while the change was made)",
    "after": "as after-A with two unstated questions per sentence and min_oos 2 (first fresh half)",
    "after-C": "as after with filter margin 0.25, the name-of-a-named-thing screen, no 'a name' in the "
    "unstated prompt and in-scope top-up sentences (changed on B's labels; C is fresh)",
    "after-D": "as after-C with the unstated questions asked about the document's subject, named by "
    "the model first (unstated_subject; changed on C's labels; D is fresh)",
    "after-E": "as after-D with a reply's enumerations dropped (the same question with one count or "
    "ordinal changed; changed on D's labels; E is fresh)",
    "after-F": "as after-E with follow-ups asked only for a document the unstated questions leave "
    "short of min_oos (followups_to_top_up; changed on D's and E's labels; F is fresh)",
    "after-G": "as after-F with the subject's kind named with it and the unstated questions' hints "
    "fitted to that kind (unstated_hints; changed on F's labels; G is fresh)",
    "after-G-off": "as after-F (unstated_hints=false), on half G: the same documents as after-G, "
    "generated after after-G and before its labels changed anything",
    "after-H": "commit 3b51518 (reverted in the next): as after-G with each sentence hinted at two of "
    "the kind's details in turn and the follow-ups asked only after the sampled top-up rounds "
    "(unstated_hints_in_turn, followups_last; changed on G's labels; H is fresh)",
    "after-H-off": "as after-G (in 3b51518: unstated_hints_in_turn=false followups_last=false; the "
    "default since), on half H: the same documents as after-H, generated back to back with it, "
    "before either was read",
    "after-I": "as after-G with stops glued to the next sentence split ('it.For'), unstated questions "
    "kept when they share a word with the subject (subject_moored), top-up rounds on sentences not "
    "asked yet (top_up_new_sentences) and up to 6 more in-scope sentences (more_in_scope; changed "
    "on H's dropped questions; I is fresh)",
    "after-I-off": "commit d9e27cd (as after-G; no glued split, subject_moored, top_up_new_sentences, "
    "more_in_scope 3), on half I: the same documents as after-I, generated back to back with it "
    "from a checkout of that commit, before either was read",
    "after-J": "as after-I with a question that names 'this sentence' or 'the sentence about' unusable "
    "(changed on I's labels; J is fresh)",
    "after-K": "as after-J with a document short of min_oos out-of-scope or n_in_scope in-scope "
    "questions filled from the candidates within the filter's margin (fill_from_margin; changed on "
    "J's per-document counts; K is fresh)",
    "after-L": "as after-K with the overlap rule not counting the details an unstated question asks "
    "for (overlap_skips_details), four-word questions that name something long enough, and 'What is "
    "the director of' / 'Where is the location of' mended (changed on K's labels; L is fresh)",
    "after-M": "as after-L with a question asking the same detail of the same thing as one kept a "
    "copy (copies_by_detail; changed on L's labels; M is fresh)",
    "after-N": "as after-M with a question naming 'the sentence is describing' unusable (changed on "
    "M's labels; N is fresh)",
    "after-O": "as after-N with absent_details (a question asking a price, an address or a year its "
    "review states none of is out of scope whatever the filter says; changed on the filter's misses "
    "on H-N), 'What is the owner of' mended and \"the sentence '...' mean\" unusable; O is fresh",
    "after-P": "as after-O with a named street stating an address (absent_details), sentences over "
    "45 words cut at their clause breaks (split_long_sentences) and a detail's synonyms one word to "
    "the copy rule (detail_synonyms), each changed on O's labels; P is fresh",
    "after-Q": "as after-P with the subject's words counted as the document's for unstated questions "
    "(overlap_counts_subject), a review without capitals cut into sentences (split_long_sentences), "
    "and a word's forms ('drive', 'drives') one to the copy rule, each changed on P's labels; Q is "
    "fresh",
    "after-R": "as after-Q (commit 97d5201, nothing changed on Q's labels); R is fresh",
    "after-S": "as after-R with the year a place opened among its hints (place_year_hint) and 'When "
    "did the hotel open?' read as asking a year by the absent-detail rule, changed on Q's and R's "
    "short documents; S is fresh",
    "after-T": "as after-S with a street named without its number or stop ('Market St') read as an "
    "address and 'How long has the hotel been open?' as asking a year, changed on S's labels; T is "
    "fresh",
    "after-U": "as after-T with where to buy it read as absent from a review naming no shop, chain or "
    "website (absent_stores), changed on T's short documents; U is fresh",
    "after-V": "as after-U with questions about the writer as 'the person' or 'the speaker' dropped, "
    "and in scope those asking 'the name of the person' (writer_screen), and unstated questions about "
    "two things joined by 'and' (one_thing_screen), changed on the labels of H-U; V is fresh",
    "after-W": "as after-V with a subject the model capitalised from a description its review writes "
    "in lower case named as written (subject_as_written), changed on T's and V's labels; W is fresh",
    "after-X": "as after-W with 'publisher', 'founder' and 'owner' no copy of their verbs "
    "(agent_nouns_apart), changed on V's and W's short book reviews; X is fresh",
    "after-Y": "as after-X (commit c3b87f8, nothing changed on X's labels); Y is fresh",
    "after-Z": "as after-Y with a subject holding a word its review never writes asked about by its "
    "kind's name, 'the product' (subject_in_document), and who wrote a book of a review naming no "
    "writer out of scope whatever the filter says (absent_authors), changed on V-Y's labels; Z is fresh",
    "after-AA": "as after-Z with each sampled top-up round of unstated questions shown the last 8 "
    "questions written and asked for other details (top_up_shows_asked), and 'the sentence ... answer' "
    "and 'the sentence is based on' unusable, changed on Z's labels; AA is fresh",
    "after-AB": "as after-AA with a short document's follow-ups asked only after its sampled unstated "
    "rounds and the margin's candidates (followups_after_top_ups), and a pair joined by 'and' its "
    "document writes so one thing to one_thing_screen (a title), changed on AA's labels; AB is fresh",
    "after-AC": "as after-AB with an unstated question about another thing the document names than its "
    "subject dropped (other_thing_screen), changed on AA's and AB's labels; AC is fresh",
    "after-AD": "as after-AC with what a subject's kind is called ('the film', 'the hotel') counted as "
    "the subject's words (kind_words_count) and 'the main point of the sentence' unusable, changed on "
    "AC's labels; AD is fresh",
    "after-AD-off": "as after-AD with top_up_shows_asked, followups_after_top_ups, other_thing_screen "
    "and kind_words_count off (as commit 54f19cf, with the small mends since), on half AD: the same "
    "documents, generated after after-AD was labelled; its 5 questions not in after-AD labelled then",
    "after-AE": "as after-AD with an unstated question asking when something is available or when a "
    "place opens dropped (odd_details_screen), changed on the labels of D-AD; AE is fresh",
    "after-AF": "as after-AE (commit 29421d7's defaults, nothing changed on AE's labels); AF is fresh",
    "after-AG": "as after-AF with an unstated question not about the subject dropped "
    "(about_subject_screen) and at most three out-of-scope questions kept of a document (max_oos), "
    "changed on the labels of Z-AF (commit 6a5e587); AG is fresh",
    "after-AH": "as after-AG (commit 6a5e587); AH is fresh, drawn with AG",
    "after-AI": "as after-AH with a subject its document first names late asked about by its kind's "
    "name (subject_named_late), changed on the labels of Z-AH (commit 961d3df); AI is fresh",
    "after-AJ": "as after-AI (commit 961d3df); AJ is fresh, drawn with AI",
    "after-AI-off": "as after-AI with about_subject_screen, max_oos and subject_named_late off (as "
    "commit 93090f0), on half AI: the same documents, generated after after-AI",
    "after-AK": "as after-AI (commit 961d3df's defaults, nothing changed on AI's and AJ's labels); AK "
    "is fresh",
    "after-AL": "as after-AK; AL is fresh, drawn with AK",
    "after-AM": "as after-AL with a subject named in lower case given its article (subject_article) "
    "and 'When is the hotel open?' an odd detail, changed on the labels of AI-AL (commit c00bfbc and "
    "the next); AM is fresh",
    "after-AN": "as after-AM; AN is fresh, drawn with AM",
    "after-AO": "as after-AM (commit caa955f's defaults, nothing changed on AM's and AN's labels); AO "
    "is fresh",
    "after-AP": "as after-AO; AP is fresh, drawn with AO",
    "after-AJ-off": "as after-AJ with about_subject_screen, max_oos and subject_named_late off (as "
    "commit 93090f0), on half AJ: the same documents, generated after after-AL",
}


def _corpus(work: Path, seed: int) -> None:
    """Write ``work/{A,...,Z,AA,...,AP}/documents.jsonl`` (disjoint samples; each later half is drawn after
    the earlier ones, so adding one leaves them as they were)."""
    rng = random.Random(seed)
    reviews = [
        d
        for d in read_jsonl(SHARED / "subjqa" / "documents.jsonl")
        if REVIEW_WORDS[0] <= len(d["text"].split()) <= REVIEW_WORDS[1]
    ]
    picked = {h: [] for h in HALVES}  # type: dict[str, list[dict[str, Any]]]
    chosen = rng.sample(reviews, 2 * REVIEWS_PER_HALF)
    for i, half in enumerate(("A", "B")):
        picked[half] += chosen[i * REVIEWS_PER_HALF : (i + 1) * REVIEWS_PER_HALF]
    for folder in INVENTED:
        docs = rng.sample(list(read_jsonl(folder / "documents.jsonl")), 2 * INVENTED_PER_HALF)
        picked["A"] += docs[:INVENTED_PER_HALF]
        picked["B"] += docs[INVENTED_PER_HALF:]
    taken = {d["doc_id"] for docs in picked.values() for d in docs}
    stories = list(read_jsonl(INVENTED[0] / "documents.jsonl"))
    for half, pool, n in (
        ("B", reviews, EXTRA_REVIEWS_B),
        ("B", stories, EXTRA_INVENTED_B),
        ("C", reviews, REVIEWS_C),
        ("C", stories, INVENTED_C),
        ("D", reviews, REVIEWS_D),
        ("D", stories, INVENTED_D),
        ("E", reviews, REVIEWS_E),
        ("E", stories, INVENTED_E),
        ("F", reviews, REVIEWS_F),
        ("F", stories, INVENTED_F),
        ("G", reviews, REVIEWS_G),
        ("H", reviews, REVIEWS_H),
        ("I", reviews, REVIEWS_I),
        ("J", reviews, REVIEWS_J),
        ("K", reviews, REVIEWS_K),
        ("L", reviews, REVIEWS_L),
        ("M", reviews, REVIEWS_M),
        ("N", reviews, REVIEWS_N),
        ("O", reviews, REVIEWS_O),
        ("P", reviews, REVIEWS_P),
        ("Q", reviews, REVIEWS_Q),
        ("R", reviews, REVIEWS_R),
        ("S", reviews, REVIEWS_S),
        ("T", reviews, REVIEWS_T),
        ("U", reviews, REVIEWS_U),
        ("V", reviews, REVIEWS_V),
        ("W", reviews, REVIEWS_W),
        ("X", reviews, REVIEWS_X),
        ("Y", reviews, REVIEWS_Y),
        ("Z", reviews, REVIEWS_Z),
        ("AA", reviews, REVIEWS_AA),
        ("AB", reviews, REVIEWS_AB),
        ("AC", reviews, REVIEWS_AC),
        ("AD", reviews, REVIEWS_AD),
        ("AE", reviews, REVIEWS_AE),
        ("AF", reviews, REVIEWS_AF),
        ("AG", reviews, REVIEWS_AG),
        ("AH", reviews, REVIEWS_AH),
        ("AI", reviews, REVIEWS_AI),
        ("AJ", reviews, REVIEWS_AJ),
        ("AK", reviews, REVIEWS_AK),
        ("AL", reviews, REVIEWS_AL),
        ("AM", reviews, REVIEWS_AM),
        ("AN", reviews, REVIEWS_AN),
        ("AO", reviews, REVIEWS_AO),
        ("AP", reviews, REVIEWS_AP),
    ):
        fresh = [d for d in pool if d["doc_id"] not in taken and len(d["text"].split()) >= MIN_WORDS]
        picked[half] += rng.sample(fresh, n)
        taken |= {d["doc_id"] for d in picked[half]}
    for half, docs in picked.items():
        out = work / half
        out.mkdir(parents=True, exist_ok=True)
        with (out / "documents.jsonl").open("w", encoding="utf-8") as f:
            for d in docs:
                f.write(json.dumps({"doc_id": d["doc_id"], "text": d["text"]}) + "\n")
        logger.info("wrote %d documents to %s", len(docs), out)


def _generate(work: Path, half: str, run: str, threads: int, changes: dict[str, Any]) -> None:
    from scopeguard.generation import GenerationConfig, Generator
    from scopeguard.llm.local import LlamaCppChatModel

    os.environ["SCOPEGUARD_N_THREADS"] = str(threads)  # the filter's model too
    docs = list(read_jsonl(work / half / "documents.jsonl"))
    llm = LlamaCppChatModel(MODEL, n_threads=threads)
    out = work / run
    config = GenerationConfig(mode="offline", **changes)
    Generator(llm, config=config, progress=True).run(docs, out)  # type: ignore[arg-type]
    (out / "half.txt").write_text(half, encoding="utf-8")


def _records(work: Path, run: str) -> list[DocumentRecord]:
    return sorted(CheckpointStore(work / run).load_all().values(), key=lambda r: r.order)


def _to_label(work: Path, run: str) -> None:
    """``work/RUN/to_label.jsonl``: each kept out-of-scope question beside its document, for a reader."""
    half = (work / run / "half.txt").read_text(encoding="utf-8")
    docs = {d["doc_id"]: d["text"] for d in read_jsonl(work / half / "documents.jsonl")}
    path = work / run / "to_label.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for r in _records(work, run):
            for q in r.questions:
                f.write(
                    json.dumps(
                        {
                            "question_sha": question_sha(q.question),
                            "doc_id": r.doc_id,
                            "label": q.label,
                            "edit_kind": q.edit_kind,
                            "source_question": q.source_question,
                            "question": q.question,
                            "document": docs.get(r.doc_id, "")[:2000],
                        }
                    )
                    + "\n"
                )
    logger.info("wrote %s", path)


def _labels(path: Path) -> dict[str, dict[str, Any]]:
    """The hand labels of ``path`` by question hash, and by document and hash (the same question
    asked of two documents, "What is the name of the hotel?", has a label for each)."""
    labels: dict[str, dict[str, Any]] = {}
    for lab in json.loads(path.read_text(encoding="utf-8")):
        labels.setdefault(lab["question_sha"], lab)
        labels[f"{lab['doc_id']}:{lab['question_sha']}"] = lab
    return labels


def _label(labels: dict[str, dict[str, Any]], doc_id: str, question: str) -> dict[str, Any] | None:
    sha = question_sha(question)
    return labels.get(f"{doc_id}:{sha}", labels.get(sha))


def _share(items: list[bool]) -> float | None:
    return round(sum(items) / len(items), 3) if items else None


def _rows(work: Path, labels: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for run in sorted(p.name for p in work.iterdir() if (p / "half.txt").is_file()):
        records = [r for r in _records(work, run) if r.status == "done"]
        by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
        missing = 0
        for r in records:
            for q in r.questions:
                if q.label != "out_of_scope":
                    continue
                lab = _label(labels, r.doc_id, q.question)
                if lab is None:
                    missing += 1
                    continue
                by_kind[str(q.edit_kind)].append(lab)
                if q.filled:  # kept from within the filter's margin (fill_from_margin)
                    by_kind["filled"].append(lab)
                by_kind["all"].append(lab)
        seconds = [r.seconds for r in records]
        for kind, labs in sorted(by_kind.items(), key=lambda kv: (kv[0] == "all", kv[0])):
            rows.append(
                {
                    "run": run,
                    "half": (work / run / "half.txt").read_text(encoding="utf-8"),
                    "edit_kind": kind,
                    "labelled": len(labs),
                    "unlabelled": missing if kind == "all" else None,
                    "natural": _share([lab["natural"] for lab in labs]),
                    "unanswerable": _share([not lab["answerable"] for lab in labs]),
                    "natural_and_unanswerable": _share(
                        [lab["natural"] and not lab["answerable"] for lab in labs]
                    ),
                    "docs": len(records) if kind == "all" else None,
                    "in_scope_per_doc": round(statistics.mean(r.count("in_scope") for r in records), 2)
                    if kind == "all" and records
                    else None,
                    "oos_per_doc": round(statistics.mean(r.count("out_of_scope") for r in records), 2)
                    if kind == "all" and records
                    else None,
                    "docs_with_3_in_2_out": sum(
                        r.count("in_scope") >= 3 and r.count("out_of_scope") >= 2 for r in records
                    )
                    if kind == "all"
                    else None,
                    "seconds_per_doc_median": round(statistics.median(seconds), 1)
                    if kind == "all" and seconds
                    else None,
                    "seconds_per_doc_max": round(max(seconds), 1) if kind == "all" and seconds else None,
                    **(_filled(records) if kind == "all" else {}),
                    # labelled a rewording of another kept question of its document (from half K)
                    "copies": sum(bool(lab.get("copy")) for lab in labs)
                    if any("copy" in lab for lab in labs)
                    else None,
                }
            )
    return rows


def _filled(records: list[DocumentRecord]) -> dict[str, int]:
    """How many questions a run kept from within the filter's margin, and how many documents meet
    the counts without them (what the same run gives with fill_from_margin off)."""

    def count(r: DocumentRecord, label: str, filled: bool) -> int:
        return sum(q.label == label and (filled or not q.filled) for q in r.questions)

    return {
        "filled_out_of_scope": sum(count(r, "out_of_scope", True) for r in records)
        - sum(count(r, "out_of_scope", False) for r in records),
        "filled_in_scope": sum(count(r, "in_scope", True) for r in records)
        - sum(count(r, "in_scope", False) for r in records),
        "docs_with_3_in_2_out_unfilled": sum(
            count(r, "in_scope", False) >= 3 and count(r, "out_of_scope", False) >= 2 for r in records
        ),
    }


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


def _signals(work: Path, labels: dict[str, dict[str, Any]], threads: int) -> dict[str, Any]:
    """Can the reading model tell natural questions from the rest? AUROC over the labelled
    out-of-scope questions of every run of: its fluency (the mean token log-prob of the question
    read alone, and the same minus the median of its document's in-scope questions: the screen
    issue #39 proposed) and its own log P(Yes) - log P(No) asked whether the question is natural."""
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts
    from scopeguard.llamacpp import load_llama
    from scopeguard.llm.base import ChatMessage
    from scopeguard.models import local_gguf

    llm = load_llama(local_gguf(MODEL), purpose="fluency", n_ctx=256, n_batch=256, n_threads=threads)
    verdicts = LlamaCppVerdicts(MODEL, n_threads=threads)
    scores: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    for run in sorted(p.name for p in work.iterdir() if (p / "half.txt").is_file()):
        half = (work / run / "half.txt").read_text(encoding="utf-8")
        docs = {d["doc_id"]: d["text"] for d in read_jsonl(work / half / "documents.jsonl")}
        for r in _records(work, run):
            ins = [q.question for q in r.questions if q.label == "in_scope"]
            base = statistics.median(_mean_logprob(llm, q) for q in ins) if ins else None
            for q in r.questions:
                lab = _label(labels, r.doc_id, q.question)
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
    from scopeguard.generation.steps._offline_in_scope import informative_sentences

    stems = content_stem_set(question)
    sentences = informative_sentences(text, 8)
    return max(sentences, key=lambda s: len(stems & content_stem_set(s))) if sentences else text


def _detector(spec: str) -> Any:
    """``NAME`` or ``NAME@LLM``: a registered detector, with ``@LLM`` its reading model (e.g.
    ``logprob@local:/path/to/tuned-reader``, a tuned reader's folder read by llama.cpp)."""
    from scopeguard.detection.detectors import get_detector

    name, _, reader = spec.partition("@")
    return get_detector(name, reader=reader) if reader else get_detector(name)


def _detector_label(spec: str) -> str:
    """The short name of ``--detector``'s columns: ``NAME``, or ``NAME@FOLDER`` for a reading model
    given by path (its last part)."""
    name, _, llm = spec.partition("@")
    return f"{name}@{Path(llm.partition(':')[2] or llm).name}" if llm else name


def _in_scope(
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
    tag = _detector_label(other) if other else ""
    out: dict[str, Any] = {}
    for run in runs:
        items: list[dict[str, Any]] = []
        records = [r for r in _records(work, run) if r.status == "done"]
        for r in records:
            read = [(q.question, q.filter, True) for q in r.questions if q.label == "in_scope"]
            dropped_here = [q for q in r.dropped if q.label == "in_scope" and q.reason.startswith("filter")]
            read += [(q.question, q.filter, False) for q in dropped_here]
            sentences = {q.question: q.true_claim for q in [*r.questions, *r.dropped] if q.true_claim}
            for question, filt, kept in read:
                lab = _label(labels, r.doc_id, question)
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
            "kept_answerable_share": _share([i["answerable"] for i in kept]),
            "dropped": len(dropped),
            "dropped_answerable": sum(i["answerable"] for i in dropped),
            "kept_share_of_answerable": _share([i["kept"] for i in answerable]),
            "kept_share_of_unanswerable": _share([i["kept"] for i in labelled if not i["answerable"]]),
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["corpus", "generate", "review", "report", "signals", "in-scope"])
    ap.add_argument("--work", type=Path, default=Path("/tmp/scopeguard-generation-natural"))
    ap.add_argument("--half", choices=list(HALVES), default=HALVES[-1])
    ap.add_argument("--run", default="after", help="in-scope: comma-separated runs")
    ap.add_argument(
        "--sentence",
        action="store_true",
        help="in-scope: read each dropped candidate again against its source sentence alone",
    )
    ap.add_argument(
        "--detector",
        default=None,
        help="in-scope: a detector read as the filter in its place: NAME or NAME@LLM (e.g. default, "
        "logprob@local:/path/to/tuned-reader)",
    )
    ap.add_argument("--seed", type=int, default=39)
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: all cores)")
    ap.add_argument("--note", default="", help="recorded with the figures (e.g. a shared machine)")
    ap.add_argument(
        "--set",
        nargs="*",
        default=[],
        help="generate: GenerationConfig fields, KEY=JSON (e.g. max_oos=null or "
        '\'screens=["degenerate", "moored", "natural"]\'; the settings of issue #39\'s runs '
        "named in RUNS are retired, docs/research/generation-history.md)",
    )
    ap.add_argument("--out", type=Path, default=RESULT)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    threads = args.threads or os.cpu_count() or 1
    if args.step == "corpus":
        _corpus(args.work, args.seed)
    elif args.step == "generate":
        from scopeguard.generation import GenerationConfig

        _generate(args.work, args.half, args.run, threads, settings(args.set, GenerationConfig.model_fields))
        _to_label(args.work, args.run)
    elif args.step == "review":
        _to_label(args.work, args.run)
    elif args.step == "signals":
        labels = _labels(REVIEW)
        found = _signals(args.work, labels, threads)
        rows = [{"signal": k, **v} for k, v in found.items()]
        report(rows, {"benchmark": "generation_natural signals", "machine": {"cpu": cpu_model()}}, SIGNALS)
    elif args.step == "in-scope":
        labels = _labels(IN_SCOPE_REVIEW)
        found = _in_scope(args.work, args.run.split(","), labels, args.sentence, args.detector)
        # a run not read this time (one written by a version of the generator since changed:
        # insc-H-dev) keeps its recorded row and questions; a run read again keeps what this read
        # did not measure (another --detector's columns, --sentence's)
        kept, earlier = earlier_rows(IN_SCOPE, set(found))
        before = {row["run"]: row for row in earlier.get("rows", [])}
        old = earlier.get("questions", {})
        rows = kept + [
            {"run": run, **before.get(run, {}), **found[run]["summary"], "cpu": cpu_model()} for run in found
        ]
        questions = {k: v for k, v in old.items() if k not in found}
        for run in found:
            was = {i["question_sha"]: i for i in old.get(run, [])}
            questions[run] = [{**was.get(i["question_sha"], {}), **i} for i in found[run]["questions"]]
        detectors = {**earlier.get("detectors", {"default": "default"})}
        if args.detector:
            detectors[_detector_label(args.detector)] = args.detector
        meta = {
            "benchmark": "generation_natural in-scope",
            "runs": {row["run"]: IN_SCOPE_RUNS.get(row["run"], "") for row in rows},
            "model": f"{MODEL} (writer), the auto filter (packaged logprob detector)",
            "detectors": detectors,
            "questions": questions,
        }
        report(rows, meta, IN_SCOPE)
    else:
        labels = _labels(REVIEW)
        rows = [{**row, "cpu": cpu_model()} for row in _rows(args.work, labels)]
        # a run not in --work keeps its recorded rows, and the CPU they were recorded on where noted
        kept, earlier = earlier_rows(args.out, {row["run"] for row in rows})
        cpu = earlier.get("machine", {}).get("cpu")
        unknown = f"not recorded with the run (the report that kept it ran on {cpu})"
        rows = [{**row, "cpu": row.get("cpu", unknown)} for row in kept] + rows
        report(
            rows,
            {
                "benchmark": "generation_natural",
                "data": f"SubjQA reviews of {REVIEW_WORDS[0]}-{REVIEW_WORDS[1]} words and the invented "
                f"implied / near-miss documents, seed {args.seed}: half A ({REVIEWS_PER_HALF} + "
                f"{2 * INVENTED_PER_HALF}) and half B (as many, disjoint, and {EXTRA_REVIEWS_B} + "
                f"{EXTRA_INVENTED_B} more of at least {MIN_WORDS} words), half C ({REVIEWS_C} + "
                f"{INVENTED_C} of at least {MIN_WORDS} words, drawn after B's labels changed the "
                f"screens), half D ({REVIEWS_D} + {INVENTED_D} likewise, drawn after C's labels "
                f"changed the unstated prompt), half E ({REVIEWS_E} + {INVENTED_E} likewise, drawn "
                f"after D's labels added the enumeration screen), half F ({REVIEWS_F} "
                f"reviews, drawn after E's labels made follow-ups a top-up), half G ({REVIEWS_G} "
                f"reviews, drawn after F's labels fitted the hints to the subject's kind), half H "
                f"({REVIEWS_H} reviews, drawn after G's labels put the hints in turn and the "
                f"follow-ups last), half I ({REVIEWS_I} reviews, drawn after H's dropped questions "
                f"led to more sentences per document), half J ({REVIEWS_J} reviews, drawn after I's "
                f"labels), half K ({REVIEWS_K} reviews, drawn after J's per-document counts led to "
                f"filling from within the filter's margin), half L ({REVIEWS_L} reviews, drawn with K, "
                f"generated after K's labels), half M ({REVIEWS_M} reviews, drawn after K's labels, "
                f"generated after L's), half N ({REVIEWS_N} reviews, drawn after M's labels), half O "
                f"({REVIEWS_O} reviews, drawn after N's labels), half P ({REVIEWS_P} reviews, drawn "
                f"after O's labels), half Q ({REVIEWS_Q} reviews, drawn after P's labels), half R "
                f"({REVIEWS_R} reviews, drawn after Q's labels), half S ({REVIEWS_S} reviews, drawn "
                f"after R's labels), half T ({REVIEWS_T} reviews, drawn after S's labels), "
                f"half U ({REVIEWS_U} reviews, drawn after T's labels), "
                f"half V ({REVIEWS_V} reviews, drawn after U's labels), "
                f"half W ({REVIEWS_W} reviews, drawn after V's labels), "
                f"half X ({REVIEWS_X} reviews, drawn while W was read), "
                f"half Y ({REVIEWS_Y} reviews, drawn after X's labels), "
                f"half Z ({REVIEWS_Z} reviews, drawn after Y's labels), "
                f"half AA ({REVIEWS_AA} reviews, drawn after Z's labels), "
                f"half AB ({REVIEWS_AB} reviews, drawn after AA's labels), "
                f"half AC ({REVIEWS_AC} reviews, drawn after AB's labels), "
                f"half AD ({REVIEWS_AD} reviews, drawn after AC's labels), "
                f"half AE ({REVIEWS_AE} reviews, drawn after AD's labels), "
                f"half AF ({REVIEWS_AF} reviews, drawn after AE's labels), "
                f"halves AG and AH ({REVIEWS_AG} and {REVIEWS_AH} reviews, drawn after AF's labels), "
                f"halves AI and AJ ({REVIEWS_AI} and {REVIEWS_AJ} reviews, drawn after AH's labels), "
                f"halves AK and AL ({REVIEWS_AK} and {REVIEWS_AL} reviews, drawn after AJ's labels), "
                f"halves AM and AN ({REVIEWS_AM} and {REVIEWS_AN} reviews, drawn after AL's labels), "
                f"halves AO and AP ({REVIEWS_AO} and {REVIEWS_AP} reviews, drawn after AN's labels); "
                f"ELOQ's "
                f"length rule skips "
                f"those under {MIN_WORDS} words",
                "model": f"{MODEL} (writer), the auto filter (packaged logprob detector)",
                "runs": RUNS,
                "machine": {
                    "cpu": cpu_model(),
                    "cores": os.cpu_count(),
                    "threads": threads,
                    "note": args.note,
                },
            },
            args.out,
        )


if __name__ == "__main__":
    main()
