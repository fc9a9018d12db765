"""Reply cache, usage accounting, checkpoints and the ELOQ layout round trip."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from scopeguard.data import Dataset, LabeledQuestion, load_dataset
from scopeguard.errors import DatasetError
from scopeguard.generation import PRICES_PER_1M, Usage, estimate_cost, export_eloq, import_eloq
from scopeguard.generation.cache import RecordingChatModel, ReplyCache, UsageLedger
from scopeguard.generation.checkpoint import CheckpointStore, DocumentRecord, GeneratedQuestion
from scopeguard.testing import ScriptedChatModel
from scopeguard.types import Document


def test_cache_replays_by_occurrence_and_survives_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "replies.jsonl"
    llm = ScriptedChatModel(["first", "second"])
    rec = RecordingChatModel(llm, ReplyCache(path), UsageLedger(), step="s")
    a, b = rec.call("same prompt", temperature=0.7), rec.call("same prompt", temperature=0.7)
    assert (a.text, b.text, a.cached) == ("first", "second", False)
    assert a.id != b.id and a.id.startswith("r-")
    with path.open("a") as fh:
        fh.write('{"key": "torn')  # a kill in the middle of an append
    replay = RecordingChatModel(ScriptedChatModel([]), ReplyCache(path), UsageLedger(), step="s")
    c, d = replay.call("same prompt", temperature=0.7), replay.call("same prompt", temperature=0.7)
    assert (c.text, d.text, c.id, c.cached) == ("first", "second", a.id, True)
    assert replay.ledger.by_step["s"].cached == 2 and replay.ledger.by_step["s"].billed_prompt_tokens == 0
    # other sampling settings are another key
    with pytest.raises(Exception, match="ran out"):
        replay.call("same prompt", temperature=0.0)
    # a reply written after the torn line is not glued to it: a later run still finds it
    more = RecordingChatModel(ScriptedChatModel(["third"]), ReplyCache(path), UsageLedger(), step="s")
    assert more.call("another prompt").text == "third"
    cache = ReplyCache(path)
    assert len(cache) == 3
    again = RecordingChatModel(ScriptedChatModel([]), cache, UsageLedger(), step="s")
    assert again.call("another prompt").text == "third" and again.call("same prompt", temperature=0.7).cached
    cache.close()


def test_cache_keeps_offsets_not_replies_in_memory(tmp_path: Path) -> None:
    cache = ReplyCache(tmp_path / "replies.jsonl")
    for i in range(50):
        cache.put(f"k{i}", {"texts": [f"reply {i} " + "x" * 200]})
    assert cache.get("k7") == {"key": "k7", "texts": ["reply 7 " + "x" * 200]}
    assert cache.get("missing") is None and not cache._entries and len(cache) == 50
    memory = ReplyCache()  # no path: in memory only
    memory.put("a", {"texts": ["A"]})
    assert memory.get("a") == {"key": "a", "texts": ["A"]} and len(memory) == 1


def test_usage_and_cost_estimate() -> None:
    u = Usage(
        calls=2,
        prompt_tokens=1_000_000,
        completion_tokens=1_000_000,
        billed_prompt_tokens=1_000_000,
        billed_completion_tokens=1_000_000,
    )
    inp, out = PRICES_PER_1M["gpt-4o-mini"]
    assert estimate_cost("gpt-4o-mini", u) == pytest.approx(inp + out)
    assert estimate_cost("gpt-4o-mini-2024-07-18", u) == pytest.approx(inp + out)
    assert estimate_cost("qwen2.5-coder-0.5b", u) is None
    assert (u + u).calls == 4


def _record(doc_id: str, order: int) -> DocumentRecord:
    q = GeneratedQuestion(
        id=f"{doc_id}_ins_0", doc_id=doc_id, question="What is it?", label="in_scope", words=3
    )
    return DocumentRecord(
        doc_id=doc_id,
        order=order,
        text="Some text.",
        status="done",
        mode="faithful",
        model="m",
        questions=(q,),
        claims=("c",),
    )


def test_checkpoints_are_atomic_and_rebuild_the_dataset(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    store.save(_record("b/2", 1))
    store.save(_record("a 1", 0))
    store.save(_record("a 1", 0))  # saving twice never duplicates
    assert not list(store.dir.glob("*.tmp"))
    assert store.rebuild() == (2, 2)
    ds = load_dataset(tmp_path)
    assert [q.id for q in ds.questions] == ["a 1_ins_0", "b/2_ins_0"]
    (store.dir / "bad.json").write_text("{", encoding="utf-8")
    with pytest.raises(DatasetError, match="corrupt checkpoint"):
        store.load_all()


def test_eloq_layout_round_trip(tmp_path: Path) -> None:
    ds = Dataset(
        documents={"d1": Document(id="d1", text="The Alderby council met.", metadata={"topic": "news"})},
        questions=(
            LabeledQuestion(id="d1_ins_0", doc_id="d1", question="Who met?", label="in_scope"),
            LabeledQuestion(
                id="d1_oos_0",
                doc_id="d1",
                question="Why did the mayor resign?",
                label="out_of_scope",
                metadata={"provenance": {"round": 3}},
            ),
        ),
    )
    out = export_eloq(ds, tmp_path / "eloq")
    news = json.loads((out / "news.json").read_text())
    assert news["d1"]["text"] == "The Alderby council met." and news["d1"]["topic"] == "news"
    with (out / "silver.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert rows[1] == {
        "doc_id": "d1",
        "question_id": "d1_oos_0",
        "label": "out_of_scope",
        "question": "Why did the mayor resign?",
    }
    back = import_eloq(out)
    assert [(q.id, q.label) for q in back.questions] == [(q.id, q.label) for q in ds.questions]
    assert back.questions[1].metadata["provenance"] == {"round": 3}
    # silver.csv labels win, and bad labels are named
    (out / "silver.csv").write_text("doc_id,question_id,label\nd1,d1_ins_0,1\nd1,d1_oos_0,maybe\n")
    with pytest.raises(DatasetError, match="unknown label 'maybe'"):
        import_eloq(out)
