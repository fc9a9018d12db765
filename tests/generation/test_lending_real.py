"""Lending a query log with the packaged models: MiniLM ranks an invented corpus, the packaged
Qwen2.5-Coder-1.5B's ``logprob`` reader (the generator's offline filter) reads each question
against the documents ranked below its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scopeguard.data import load_dataset, read_jsonl

# four invented pages about one fictional harbour town, each on its own subject
DOCS = {
    "ferry": "The ferry Kestrel crosses Saltmere Bay six times a day. It carries up to 180 passengers and "
    "twelve cars, and the crossing takes 35 minutes. Tickets are sold on board.",
    "harbour": "Saltmere harbour shelters forty fishing boats. Its stone breakwater was built in 1874, and a "
    "ramp for the ferry was added beside the lifeboat station in 1990.",
    "market": "The Saltmere fish market opens at five in the morning from Tuesday to Saturday. Traders sell "
    "the night's catch of mackerel and crab from stalls beside the old pier.",
    "museum": "The Saltmere maritime museum shows ship models, old charts and a lighthouse lens. It is open "
    "from April to October and entry is free for children.",
}
LOG = [
    {"id": "q1", "question": "How many passengers can the Kestrel carry?", "doc_ids": ["ferry"]},
    {"id": "q2", "question": "What time does the fish market open?"},
    {"id": "q3", "question": "Is the museum open in winter?", "label": "out_of_scope"},
]


@pytest.mark.slow
@pytest.mark.integration
def test_the_packaged_reader_lends_logged_questions_to_the_neighbours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("llama_cpp", reason="needs scopeguard[local]")
    from scopeguard.errors import ModelError
    from scopeguard.generation.lending import Lender, LendingConfig
    from scopeguard.models import local_gguf
    from scopeguard.retrieval import get_retriever

    try:
        local_gguf("qwen2.5-coder-1.5b")
    except ModelError as exc:
        pytest.skip(str(exc))
    monkeypatch.setenv("SCOPEGUARD_N_THREADS", "1")  # robust on a shared, oversubscribed CPU
    corpus, log, out = tmp_path / "corpus.jsonl", tmp_path / "log.jsonl", tmp_path / "out"
    corpus.write_text("".join(json.dumps({"doc_id": k, "text": v}) + "\n" for k, v in DOCS.items()))
    log.write_text("".join(json.dumps(row) + "\n" for row in LOG))
    retriever = get_retriever("minilm", cache_dir=tmp_path / "embeddings", show_progress=False)
    # every neighbour read: this test is about the reads (the one below is about the similarity floor)
    config = LendingConfig(neighbours=2, min_similarity=0.0)
    lender = Lender(config=config, retriever=retriever, progress=False)
    summary = lender.run(corpus, log, out)

    assert lender.generator.filter_name == "logprob"  # the generator's offline filter
    assert summary.floor == pytest.approx(min(lender.generator.judge.threshold + 0.25, 0.999))  # type: ignore[union-attr]
    # two lent questions, two neighbours each, every read recorded; the labelled one never asked
    assert (summary.pairs, summary.read_run, summary.failed_run, summary.not_lent) == (4, 4, 0, 1)
    reads = list(read_jsonl(out / ".lending" / "reads.jsonl"))
    assert len(reads) == 4
    assert {r["source_doc"] for r in reads if r["log_id"] == "q1"} == {"ferry"}
    for r in reads:
        assert (
            r["doc_id"] != r["source_doc"] and r["rank"] >= 2 and r["label"] in ("in_scope", "out_of_scope")
        )
        assert r["kept"] == (r["label"] == "out_of_scope" and r["score"] >= summary.floor)
    # no other page says how many passengers the Kestrel carries or when the market opens
    assert summary.kept >= 2
    data = load_dataset(out)
    assert all(q.label == "out_of_scope" and q.doc_id != q.metadata["source_doc"] for q in data.questions)
    assert set(data.documents) == {q.doc_id for q in data.questions}
    again = lender.run(corpus, log, out)
    assert (again.read_run, again.resumed, again.kept) == (0, 4, summary.kept)


@pytest.mark.slow
@pytest.mark.integration
def test_minilm_passes_over_a_neighbour_on_another_subject(tmp_path: Path) -> None:
    """The default floor with the packaged MiniLM: a question about the town's fish market is asked
    of the town's other pages, not of a baking how-to that landed in the same corpus."""
    from scopeguard.generation import GenerationConfig, Generator
    from scopeguard.generation.lending import Lender, LendingConfig
    from scopeguard.testing import InMemoryRetriever, ScriptedChatModel, ScriptedDetector

    docs = {
        **DOCS,
        "sourdough": "To start a rye sourdough, stir 50 g of wholemeal rye flour into 50 g of water in a "
        "clean jar, cover it loosely and keep it warm. Feed it the same again every day for a week.",
    }
    corpus, log = tmp_path / "corpus.jsonl", tmp_path / "log.jsonl"
    corpus.write_text("".join(json.dumps({"doc_id": k, "text": v}) + "\n" for k, v in docs.items()))
    question = "What time does the fish market open?"
    log.write_text(json.dumps({"id": "q2", "question": question, "doc_ids": ["market"]}) + "\n")
    judge = ScriptedDetector({question: 0.9})
    generator = Generator(ScriptedChatModel([]), config=GenerationConfig(), judge=judge, progress=False)
    lender = Lender(
        generator, config=LendingConfig(neighbours=4), retriever=InMemoryRetriever(), progress=False
    )
    summary = lender.run(corpus, log, tmp_path / "out")
    assert (summary.pairs, summary.unlike) == (3, 1)
    assert {q.doc_id for q in load_dataset(tmp_path / "out").questions} == {"ferry", "harbour", "museum"}
