"""Splitting documents into passages with ids ``{doc_id}#p{i}``."""

from __future__ import annotations

from pathlib import Path

import pytest

from scopeguard.data import load_dataset
from scopeguard.errors import ConfigurationError
from scopeguard.types import Document
from scopeguard.verification import dataset_passages, split_passages, split_sentences

TEXT = (
    "Dr. Vale opened the Zorbian lighthouse at 5 p.m. on Monday. The U.S. envoy came too! "
    'Was it green? "Yes," said the guild.\n\nThe fair lasted 3.5 days. It rained once.'
)


def test_sentences() -> None:
    assert split_sentences(TEXT) == [
        "Dr. Vale opened the Zorbian lighthouse at 5 p.m. on Monday.",
        "The U.S. envoy came too!",
        "Was it green?",
        '"Yes," said the guild.',
        "The fair lasted 3.5 days.",
        "It rained once.",
    ]


def test_passages_have_ids_and_cover_the_text() -> None:
    doc = Document(id="d7", text=TEXT, metadata={"topic": "harbours", "claims": ["x"]})
    ps = split_passages(doc, sentences=4)
    assert [p.id for p in ps] == ["d7#p0", "d7#p1"]
    assert ps[1].text == "The fair lasted 3.5 days. It rained once."
    assert ps[0].metadata == {"topic": "harbours", "doc_id": "d7", "passage_index": 0, "sentences": 4}
    overlapping = split_passages(doc, sentences=3, stride=1)
    assert [p.id for p in overlapping] == ["d7#p0", "d7#p1", "d7#p2", "d7#p3"]
    assert overlapping[-1].text.endswith("It rained once.")
    with pytest.raises(ConfigurationError, match="sentences per passage"):
        split_passages(doc, sentences=0)


def test_dev_documents_split(dev_data_dir: Path) -> None:
    ds = load_dataset(dev_data_dir)
    ps = dataset_passages(ds, sentences=3)
    assert len(ps) > len(ds.documents)
    assert len({p.id for p in ps}) == len(ps)
    for doc_id, doc in ds.documents.items():
        mine = [p for p in ps if p.metadata["doc_id"] == doc_id]
        assert [p.id for p in mine] == [f"{doc_id}#p{i}" for i in range(len(mine))]
        assert " ".join(p.text for p in mine).split() == " ".join(doc.text.split("\n")).split()
