"""The retrieval study end to end: groups, missing documents, checkpoints, report files, CLI."""

from __future__ import annotations

import importlib
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scopeguard.data import Dataset, LabeledQuestion, save_dataset
from scopeguard.errors import ConfigurationError, InputError
from scopeguard.retrieval import Hit
from scopeguard.retrieval._ranking import hits_from_scores
from scopeguard.retrieval.report import write_study_report
from scopeguard.retrieval.study import StudyConfig, run_study, study
from scopeguard.types import Document

CORPUS = [
    Document(id=i, text=f"text of {i}", metadata={"topic": t})
    for i, t in [("d1", "x"), ("d2", "y"), ("d3", "y")]
]
QUESTIONS = [
    LabeledQuestion(id="q1", doc_id="d1", question="q1?", label="in_scope"),
    LabeledQuestion(id="q2", doc_id="d2", question="q2?", label="out_of_scope"),
    LabeledQuestion(id="q3", doc_id="d3", question="q3?", label="out_of_scope"),
    LabeledQuestion(id="q4", doc_id="gone", question="q4?", label="in_scope"),
]
# scores per query over (d1, d2, d3): q1 finds d1 first; q2 finds d2 second; q3 ties d2 and d3 -> d3 is 2nd
SCORES = {"q1?": [0.9, 0.1, 0.2], "q2?": [0.8, 0.5, 0.1], "q3?": [0.1, 0.7, 0.7], "q4?": [0.3, 0.2, 0.1]}


class TableRetriever:
    """A retriever with fixed scores, so ranks are known by hand."""

    name = "table"

    def __init__(self, fail_on_index: bool = False) -> None:
        self.fail_on_index = fail_on_index
        self.docs: list[Document] = []

    def index(self, documents: Sequence[Document]) -> None:
        if self.fail_on_index:
            raise AssertionError("index() called although the rankings were checkpointed")
        self.docs = list(documents)

    def search(self, query: str, k: int = 10) -> list[Hit]:
        return hits_from_scores(self.docs, SCORES[query], k)

    def search_batch(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        return [self.search(q, k) for q in queries]


def test_study_by_hand(tmp_path: Path) -> None:
    res = run_study(QUESTIONS, [TableRetriever()], corpus=CORPUS, ks=(1, 2, 5), depth=5, n_bootstrap=200)
    assert res.missing_doc_ids == ("gone",)
    r = res.retrievers["table"]
    assert [q.rank for q in r.rankings] == [1, 2, 2, None]
    assert r.rankings[3].missing
    ins, oos = r.groups["in_scope"].values(), r.groups["out_of_scope"].values()
    assert r.groups["in_scope"].n_missing == 1
    assert ins["recall@1"] == 0.5 and ins["mrr"] == 0.5
    assert oos["recall@1"] == 0.0 and oos["recall@2"] == 1.0 and oos["mrr"] == 0.5
    # k = 5 is larger than the 3-document corpus
    assert r.groups["all"].values()["recall@5"] == 0.75
    assert r.groups["topic:y/out_of_scope"].n == 2 and r.groups["topic:x"].n == 1
    assert r.groups["topic:unknown"].n == 1  # its document is not in the corpus
    assert r.curves["out_of_scope"] == [0.0, 1.0, 1.0, 1.0, 1.0]
    summary = res.summary()["table"]
    assert summary["out_of_scope"]["recall@2"] == 1.0 and "ci" in summary["in_scope"]
    assert set(summary["topics"]["y"]) == {"all", "out_of_scope"}


def test_checkpoint_resumes_without_searching_again(tmp_path: Path) -> None:
    first = run_study(QUESTIONS, [TableRetriever()], corpus=CORPUS, depth=10, checkpoint_dir=tmp_path)
    again = run_study(
        QUESTIONS, [TableRetriever(fail_on_index=True)], corpus=CORPUS, depth=10, checkpoint_dir=tmp_path
    )
    assert again.retrievers["table"].rankings == first.retrievers["table"].rankings
    assert again.summary()["table"]["all"]["mrr"] == first.summary()["table"]["all"]["mrr"]
    # another corpus is another fingerprint: the checkpoint is not reused
    with pytest.raises(AssertionError, match="checkpointed"):
        run_study(
            QUESTIONS,
            [TableRetriever(fail_on_index=True)],
            corpus=CORPUS[:2],
            depth=10,
            checkpoint_dir=tmp_path,
        )


def test_study_folder_keeps_and_checks_its_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    for folder in (data, tmp_path / "other"):
        save_dataset(Dataset(documents={d.id: d for d in CORPUS}, questions=QUESTIONS[:3]), folder)
    out = tmp_path / "study"
    config = StudyConfig(dataset=str(data), retrievers=("bm25",), ks=(1, 2), depth=3, n_bootstrap=20)
    first = study(config, out, plot=False)
    assert json.loads((out / "config.json").read_text())["depth"] == 3

    # another depth (and dataset) is another study: refused, naming both fields and values
    with pytest.raises(ConfigurationError, match=r"depth: 3 -> 10") as err:
        study(config.model_copy(update={"depth": 10, "dataset": str(tmp_path / "other")}), out, plot=False)
    assert "dataset:" in str(err.value) and "resume with the same settings" in str(err.value)
    assert json.loads((out / "config.json").read_text())["depth"] == 3  # the saved config is untouched

    # the same settings resume without ranking again; other metric settings are free
    def no_ranking(*args: object, **kwargs: object) -> None:
        raise AssertionError("ranked again although the rankings were checkpointed")

    # (the module, not the function scopeguard.retrieval.study that shadows it on the package)
    monkeypatch.setattr(importlib.import_module("scopeguard.retrieval.study"), "_rank_questions", no_ranking)
    again = study(config.model_copy(update={"ks": (1, 3), "seed": 3}), out, plot=False)
    assert again.result.retrievers["bm25"].rankings == first.result.retrievers["bm25"].rankings
    # an added retriever is ranked (and joins the saved list); the done one is not
    with pytest.raises(AssertionError, match="ranked again"):
        study(config.model_copy(update={"retrievers": ("bm25s", "bm25")}), out, plot=False)
    monkeypatch.undo()
    study(config.model_copy(update={"retrievers": ("bm25s",)}), out, plot=False)
    assert json.loads((out / "config.json").read_text())["retrievers"] == ["bm25", "bm25s"]


def test_study_input_errors() -> None:
    with pytest.raises(InputError, match="depth"):
        run_study(QUESTIONS, [TableRetriever()], corpus=CORPUS, ks=(1, 10), depth=5)
    with pytest.raises(InputError, match="positive integers"):
        run_study(QUESTIONS, [TableRetriever()], corpus=CORPUS, ks=(0,))
    with pytest.raises(InputError, match="duplicate document id"):
        run_study(QUESTIONS, [TableRetriever()], corpus=[*CORPUS, CORPUS[0]])
    with pytest.raises(InputError, match="corpus="):
        run_study(QUESTIONS, [TableRetriever()])


def test_report_files(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    res = run_study(QUESTIONS, [TableRetriever(), "bm25"], corpus=CORPUS, depth=10, n_bootstrap=50)
    paths = write_study_report(res, tmp_path)
    md = paths["markdown"].read_text()
    assert "| Model | n | Recall@1 | Recall@5 | Recall@10 | MRR | nDCG@10 |" in md
    assert "| table | 2 | 0.0000 [0.00, 0.00] | 1.0000" in md
    assert "gone" in md  # missing documents are reported
    rows = paths["csv"].read_text().splitlines()
    assert rows[0].startswith("retriever,group,n,n_missing,recall@1")
    assert any(r.startswith("table,out_of_scope,2,0,0.000000,1.000000") for r in rows)
    data = json.loads(paths["json"].read_text())
    assert data["retrievers"]["table"]["out_of_scope"]["recall@1"] == 0.0
    png = paths["plot"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_cli_rejects_unknown_retriever(dev_data_dir: Path, tmp_path: Path) -> None:
    from scopeguard.cli._app import app

    out = CliRunner().invoke(
        app, ["retrieval-study", str(dev_data_dir), "-r", "bm25,nope", "-o", str(tmp_path)]
    )
    assert out.exit_code == 2
    assert "unknown retriever 'nope'" in out.output and "bm25s" in out.output


@pytest.mark.slow
@pytest.mark.integration
def test_cli_on_the_dev_set(dev_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bm25 and the real MiniLM on the dev set: the JSON shape and the report files."""
    pytest.importorskip("sentence_transformers")
    monkeypatch.setenv("SCOPEGUARD_CACHE", str(tmp_path / "cache"))  # embed for real, not from a cache
    from scopeguard.cli._app import app

    out_dir = tmp_path / "report"
    result = CliRunner().invoke(
        app,
        [
            "retrieval-study",
            str(dev_data_dir),
            "--retrievers",
            "bm25,minilm",
            "--json",
            "--out",
            str(out_dir),
            "--bootstrap",
            "200",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {"bm25", "minilm"}
    for name in data:
        for label in ("in_scope", "out_of_scope"):
            group = data[name][label]
            assert {"recall@1", "recall@5", "recall@10", "mrr"} <= set(group)
            assert 0.0 <= group["recall@1"] <= group["recall@5"] <= group["recall@10"] <= 1.0
            assert group["n"] > 0
        # each question retrieves its own document far more often than chance (1 in 30 documents)
        assert data[name]["out_of_scope"]["recall@1"] > 0.3
    for f in ("retrieval_study.md", "retrieval_study.csv", "retrieval_study.json", "recall_at_k.png"):
        assert (out_dir / f).stat().st_size > 0
    assert list((tmp_path / "cache" / "embeddings").glob("*/shard-*.npz"))
