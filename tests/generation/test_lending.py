"""Lending a query log's questions to the documents next to their own: the control flow, with a
scripted filter and an in-memory retriever (words shared with the question rank the documents)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from scopeguard.data import load_dataset, read_jsonl
from scopeguard.errors import ConfigurationError, InputError, LLMError, MissingDependencyError
from scopeguard.generation import GenerationConfig, Generator
from scopeguard.generation.lending import Lender, LendingConfig, Similarity, plan_pairs
from scopeguard.querylog import LoggedQuestion
from scopeguard.testing import InMemoryRetriever, ScriptedChatModel, ScriptedDetector
from scopeguard.types import Document

# words shared with "alpha bravo charlie delta": a1 4, b2 3, c3 2, d4 1, e5 1 (f6 none)
DOCS = {
    "a1": "alpha bravo charlie delta about the first thing",
    "b2": "alpha bravo charlie and the second thing",
    "c3": "alpha bravo and a third thing",
    "d4": "alpha and a fourth thing",
    "e5": "alpha and a fifth item",
    "f6": "nothing in common here",
}
QUESTION = "alpha bravo charlie delta?"
KEPT, DOUBTED, ANSWERED = 0.9, 0.6, 0.2  # the scripted filter: threshold 0.5, floor 0.75


def _corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    rows = [{"doc_id": k, "text": v, "topic": "t"} for k, v in DOCS.items()]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _log(tmp_path: Path, rows: list[dict[str, object]], name: str = "log.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _all_alike(questions: Sequence[str], texts: Sequence[str]) -> list[float]:
    return [1.0] * len(questions)


def _shared_words(firsts: Sequence[str], seconds: Sequence[str]) -> list[float]:
    """A stand-in for embedding cosines: the share of the first text's words in the second."""
    out = []
    for a, b in zip(firsts, seconds, strict=True):
        words = set(a.split())
        out.append(len(words & set(b.split())) / len(words))
    return out


def _lender(
    detector: ScriptedDetector,
    neighbours: int = 3,
    *,
    similarity: Similarity = _all_alike,
    min_similarity: float = 0.4,
) -> Lender:
    generator = Generator(ScriptedChatModel([]), config=GenerationConfig(), judge=detector, progress=False)
    config = LendingConfig(neighbours=neighbours, min_similarity=min_similarity)
    return Lender(
        generator, config=config, retriever=InMemoryRetriever(), similarity=similarity, progress=False
    )


def test_neighbours_are_the_documents_ranked_below_the_own_one() -> None:
    docs = [Document(id=k, text=v) for k, v in DOCS.items()]
    ranking = ["a1", "b2", "c3", "d4", "e5"]
    questions = [
        LoggedQuestion(id="top", question="q one?", line=1),  # own: the top-ranked
        LoggedQuestion(id="named", question="q two?", line=2, doc_ids=("zz", "b2", "a1")),
        LoggedQuestion(id="oos", question="q three?", line=3, label="out_of_scope"),
        LoggedQuestion(id="gone", question="q four?", line=4, doc_ids=("zz",)),
        LoggedQuestion(id="far", question="q five?", line=5, doc_ids=("f6",)),
        LoggedQuestion(id="unsure", question="Q  ONE?", line=6, label="unsure"),  # top's question again
    ]
    pairs, skipped = plan_pairs(questions, [ranking] * len(questions), docs, 2)
    got = [(p.log_id, p.source_doc, p.doc_id, p.rank) for p in pairs]
    assert got == [
        ("top", "a1", "b2", 2),
        ("top", "a1", "c3", 3),
        # the first logged id the corpus holds is its own; a1, ranked above it, is never asked
        ("named", "b2", "c3", 3),
        ("named", "b2", "d4", 4),
    ]
    assert set(skipped) == {"gone", "far"}  # "oos" is not lent, and not a skip
    assert "no document of the corpus" in skipped["gone"]
    assert "not among the retriever's first 5" in skipped["far"]


def test_a_neighbour_with_the_own_documents_text_is_passed_over() -> None:
    docs = [
        Document(id="a", text="same text"),
        Document(id="b", text=" same text "),
        Document(id="c", text="x"),
    ]
    pairs, _ = plan_pairs([LoggedQuestion(id="q", question="q?", line=1)], [["a", "b", "c"]], docs, 3)
    assert [(p.doc_id, p.rank) for p in pairs] == [("c", 3)]


def test_lending_keeps_what_the_filter_finds_out_of_scope_past_the_floor(tmp_path: Path) -> None:
    log = _log(
        tmp_path,
        [
            {"id": "q1", "question": QUESTION, "doc_ids": ["a1"]},
            {"id": "q2", "question": "alpha bravo charlie?", "label": "in_scope"},
            {"id": "q3", "question": "alpha charlie delta?", "label": "out_of_scope"},
        ],
    )
    scores = {QUESTION: KEPT, "alpha bravo charlie?": DOUBTED}
    detector = ScriptedDetector(scores)
    summary = _lender(detector).run(_corpus(tmp_path), log, tmp_path / "out")
    # q1 is asked of b2, c3, d4 (ranked 2-4 below a1); q2's own is a1 too (top-ranked); q3 never
    assert sorted(detector.questions) == sorted([QUESTION] * 3 + ["alpha bravo charlie?"] * 3)
    data = load_dataset(tmp_path / "out")
    assert [(q.id, q.doc_id, q.label) for q in data.questions] == [
        ("q1@b2", "b2", "out_of_scope"),
        ("q1@c3", "c3", "out_of_scope"),
        ("q1@d4", "d4", "out_of_scope"),
    ]
    assert data.questions[0].metadata == {"lent_from": "q1", "source_doc": "a1", "rank": 2, "score": KEPT}
    assert sorted(data.documents) == ["b2", "c3", "d4"]
    assert data.documents["b2"].metadata == {"topic": "t"}
    assert (summary.not_lent, summary.pairs, summary.read_run, summary.kept) == (1, 6, 6, 3)
    assert (summary.documents_asked, summary.documents, summary.documents_with_2) == (3, 3, 0)
    assert summary.floor == pytest.approx(0.75)
    assert "0 of 3 neighbours asked have >= 2 lent questions" in summary.table()


def test_a_neighbour_on_another_subject_is_passed_over_unread(tmp_path: Path) -> None:
    log = _log(tmp_path, [{"id": "q1", "question": QUESTION, "doc_ids": ["a1"]}])
    detector = ScriptedDetector({QUESTION: KEPT})
    # a1's neighbours b2, c3, d4 hold 5, 3 and 2 of a1's 8 words
    alike = _lender(detector, similarity=_shared_words, min_similarity=0.3)
    summary = alike.run(_corpus(tmp_path), log, tmp_path / "alike")
    assert (summary.pairs, summary.unlike, summary.read_run) == (2, 1, 2)
    assert {q.doc_id for q in load_dataset(tmp_path / "alike").questions} == {"b2", "c3"}
    assert "1 passed over, on another subject (similarity < 0.3)" in summary.table()

    def never(firsts: Sequence[str], seconds: Sequence[str]) -> list[float]:
        raise AssertionError("no similarity is needed at 0")

    every = _lender(detector, similarity=never, min_similarity=0.0).run(
        _corpus(tmp_path), log, tmp_path / "all"
    )
    assert (every.pairs, every.unlike) == (3, 0)

    # the floor lowered on a resume: only the pair it adds is read
    lower = _lender(detector, similarity=_shared_words, min_similarity=0.2)
    again = lower.run(_corpus(tmp_path), log, tmp_path / "alike")
    assert (again.pairs, again.read_run, again.resumed, again.kept) == (3, 1, 2, 3)


def test_the_floor_without_sentence_embeddings_names_the_install_and_the_way_around(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as where it is not installed
    generator = Generator(
        ScriptedChatModel([]), config=GenerationConfig(), judge=ScriptedDetector({}), progress=False
    )
    lender = Lender(generator, retriever=InMemoryRetriever(), progress=False)
    log = _log(tmp_path, [{"id": "q1", "question": QUESTION, "doc_ids": ["a1"]}])
    with pytest.raises(
        MissingDependencyError, match=r"--min-similarity 0.*pip install 'scopeguard\[embeddings\]'"
    ):
        lender.run(_corpus(tmp_path), log, tmp_path / "out")


def test_a_rerun_reads_nothing_again_and_duplicates_nothing(tmp_path: Path) -> None:
    corpus, out = _corpus(tmp_path), tmp_path / "out"
    log = _log(tmp_path, [{"id": "q1", "question": QUESTION}])
    first = _lender(ScriptedDetector({QUESTION: KEPT})).run(corpus, log, out)
    before = (out / "questions.jsonl").read_text()
    again = ScriptedDetector({})
    second = _lender(again).run(corpus, log, out)
    assert again.questions == [] and (second.read_run, second.resumed) == (0, first.pairs)
    assert (out / "questions.jsonl").read_text() == before
    # a grown log: only its new question is read, and the files hold both
    log = _log(tmp_path, [{"id": "q1", "question": QUESTION}, {"id": "q9", "question": "alpha delta?"}])
    grown = ScriptedDetector({"alpha delta?": KEPT})
    third = _lender(grown).run(corpus, log, out)
    assert len(grown.questions) == 3 and third.resumed == 3
    ids = [q["id"] for q in read_jsonl(out / "questions.jsonl")]
    assert len(ids) == len(set(ids)) == 6


def test_a_failed_read_is_reported_and_read_again_on_the_next_run(tmp_path: Path) -> None:
    corpus, out = _corpus(tmp_path), tmp_path / "out"
    log = _log(tmp_path, [{"id": "q1", "question": QUESTION}])
    flaky = ScriptedDetector([KEPT, LLMError("the server went away"), KEPT])
    first = _lender(flaky).run(corpus, log, out)
    assert (first.read_run, first.failed_run, first.kept) == (2, 1, 2)
    retry = ScriptedDetector([KEPT])
    second = _lender(retry).run(corpus, log, out)
    assert retry.calls == 1 and (second.read_run, second.failed_run, second.kept) == (1, 0, 3)


def test_a_resume_with_other_settings_or_into_a_generation_folder_is_refused(tmp_path: Path) -> None:
    corpus, out = _corpus(tmp_path), tmp_path / "out"
    log = _log(tmp_path, [{"id": "q1", "question": QUESTION}])
    _lender(ScriptedDetector({QUESTION: KEPT})).run(corpus, log, out)
    with pytest.raises(ConfigurationError, match="neighbours: 3 -> 2"):
        _lender(ScriptedDetector({}), neighbours=2).run(corpus, log, out)
    (tmp_path / "gen").mkdir()
    (tmp_path / "gen" / "run.json").write_text("{}")
    with pytest.raises(ConfigurationError, match="holds a generation run"):
        _lender(ScriptedDetector({})).run(corpus, log, tmp_path / "gen")


def test_the_log_is_read_as_csv_with_doc_ids_separated_by_bars(tmp_path: Path) -> None:
    log = tmp_path / "log.csv"
    log.write_text(
        f"id,question,doc_ids,label\nc1,{QUESTION},b2|a1,\nc2,alpha?,,out_of_scope\n", encoding="utf-8"
    )
    summary = _lender(ScriptedDetector({QUESTION: KEPT})).run(_corpus(tmp_path), log, tmp_path / "out")
    data = load_dataset(tmp_path / "out")
    # own: b2 (the first logged id); its neighbours c3, d4, e5
    assert [(q.doc_id, q.metadata["source_doc"], q.metadata["rank"]) for q in data.questions] == [
        ("c3", "b2", 3),
        ("d4", "b2", 4),
        ("e5", "b2", 5),
    ]
    assert summary.not_lent == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # the file and the line, as the shared log reader (scopeguard.querylog) writes them
        ('{"question": "alpha?"}\n{"question": \n', r"log\.jsonl(:| line )2: .*JSON"),
        ('{"question": "alpha?"}\n\n{"id": "x"}\n', r"log\.jsonl(:| line )3: no question"),
        ("\n", "has no questions"),
    ],
)
def test_a_malformed_or_empty_log_is_an_error_naming_the_line(
    tmp_path: Path, text: str, message: str
) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=message):
        _lender(ScriptedDetector({})).run(_corpus(tmp_path), log, tmp_path / "out")


def test_a_log_whose_doc_ids_name_no_document_of_the_corpus_is_an_error(tmp_path: Path) -> None:
    log = _log(tmp_path, [{"question": QUESTION, "doc_ids": ["chunk-7"]}])
    with pytest.raises(InputError, match=r"none of its doc_ids is a document of .*'chunk-7'"):
        _lender(ScriptedDetector({})).run(_corpus(tmp_path), log, tmp_path / "out")


def test_lending_needs_the_filter() -> None:
    generator = Generator(ScriptedChatModel([]), config=GenerationConfig(filter=False), progress=False)
    with pytest.raises(ConfigurationError, match="needs the generator's filter"):
        Lender(generator, retriever=InMemoryRetriever())
