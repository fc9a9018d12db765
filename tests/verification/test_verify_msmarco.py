"""MS MARCO-format readers on tiny files written in the exact layout (invented passages)."""

from __future__ import annotations

import gzip
import inspect
from pathlib import Path

import pytest

from scopeguard.errors import DatasetError
from scopeguard.verification import iter_collection, iter_queries, read_qrels, sample_collection

COLLECTION = "".join(
    f"{pid}\t{text}\n"
    for pid, text in [
        ("0", "The Zorbian lighthouse was painted green in 1931."),
        ("1", "Marlow pies are baked with quince."),
        ("7", "Harbour guild meetings happen on Tuesdays."),
        ("12", "Rope houses store coils of hemp rope."),
        ("13", "Quince trees flower in late spring."),
        ("20", "The spring fair opens at dawn."),
    ]
)


@pytest.fixture
def msmarco(tmp_path: Path) -> Path:
    (tmp_path / "collection.tsv").write_text(COLLECTION, encoding="utf-8")
    (tmp_path / "queries.tsv").write_text(
        "1048585\twhat color is the zorbian lighthouse\n2\twhat are marlow pies made of\n", encoding="utf-8"
    )
    (tmp_path / "qrels.dev.small.tsv").write_text("1048585\t0\t0\t1\n2\t0\t1\t1\n", encoding="utf-8")
    return tmp_path


def test_collection_is_streamed(msmarco: Path) -> None:
    it = iter_collection(msmarco / "collection.tsv")
    assert inspect.isgenerator(it)
    first = next(it)
    assert (first.id, first.text) == ("0", "The Zorbian lighthouse was painted green in 1931.")
    assert [d.id for d in it] == ["1", "7", "12", "13", "20"]


def test_collection_filter_and_limit(msmarco: Path) -> None:
    path = msmarco / "collection.tsv"
    assert [d.id for d in iter_collection(path, pids={"7", "20"})] == ["7", "20"]
    assert [d.id for d in iter_collection(path, limit=2)] == ["0", "1"]


def test_gzipped_collection(msmarco: Path) -> None:
    gz = msmarco / "collection.tsv.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as fh:
        fh.write(COLLECTION)
    assert [d.id for d in iter_collection(gz)] == ["0", "1", "7", "12", "13", "20"]


def test_queries(msmarco: Path) -> None:
    qs = list(iter_queries(msmarco / "queries.tsv"))
    assert [(q.id, q.text) for q in qs] == [
        ("1048585", "what color is the zorbian lighthouse"),
        ("2", "what are marlow pies made of"),
    ]
    assert [q.id for q in iter_queries(msmarco / "queries.tsv", qids={"2"})] == ["2"]


@pytest.mark.parametrize(
    "content",
    [
        "1048585 0 0 1\n2 0 1 1\n2 0 13 0\n",  # TREC, spaces
        "1048585\t0\t0\t1\n2\t0\t1\t1\n2\t0\t13\t0\n",  # TREC, tabs (qrels.dev.small.tsv)
        "query-id\tcorpus-id\tscore\n1048585\t0\t1\n2\t1\t1\n2\t13\t0\n",  # 3 columns with a header
    ],
)
def test_qrels_variants(tmp_path: Path, content: str) -> None:
    path = tmp_path / "qrels"
    path.write_text(content, encoding="utf-8")
    assert read_qrels(path) == {"1048585": {"0": 1}, "2": {"1": 1, "13": 0}}


def test_two_column_qrels_mean_relevant(tmp_path: Path) -> None:
    path = tmp_path / "qrels.tsv"
    path.write_text("1048585\t0\n2\t1\n", encoding="utf-8")
    assert read_qrels(path) == {"1048585": {"0": 1}, "2": {"1": 1}}


def test_sample_keeps_judged_passages_and_n_negatives(msmarco: Path) -> None:
    qrels = read_qrels(msmarco / "qrels.dev.small.tsv")
    docs = sample_collection(msmarco / "collection.tsv", qrels, negatives=2, seed=3)
    ids = [d.id for d in docs]
    assert {"0", "1"} <= set(ids)
    assert len(ids) == 4 and len(set(ids)) == 4
    assert ids == sorted(ids, key=["0", "1", "7", "12", "13", "20"].index)  # collection order
    assert docs == sample_collection(msmarco / "collection.tsv", qrels, negatives=2, seed=3)
    everything = sample_collection(msmarco / "collection.tsv", qrels, negatives=100)
    assert len(everything) == 6


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("0\tfine passage\n1 no tab here\n", r"collection.tsv:2: expected .passage_id<TAB>text"),
        ("0\tfine passage\n5\t   \n", "empty text"),
    ],
)
def test_malformed_collection_names_the_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "collection.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DatasetError, match=message):
        list(iter_collection(path))


def test_malformed_qrels_and_missing_files(tmp_path: Path) -> None:
    bad = tmp_path / "qrels"
    bad.write_text("1 0 5 1\n1 0 6 relevant\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"qrels:2: relevance must be an integer"):
        read_qrels(bad)
    five = tmp_path / "qrels5"
    five.write_text("1 0 5 1 extra\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="5 columns"):
        read_qrels(five)
    with pytest.raises(DatasetError, match="file not found"):
        list(iter_queries(tmp_path / "nope.tsv"))
