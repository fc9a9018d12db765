"""Corpus input: folders, JSONL, Python and duck-typed LangChain / LlamaIndex documents; the length rule."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from scopeguard.errors import ConfigurationError, InputError
from scopeguard.generation.corpus import LengthRule, load_generation_corpus, truncate_words
from scopeguard.types import Document


def _sentences(n: int, words_each: int = 10) -> str:
    return " ".join(f"Sentence {i} " + " ".join(["word"] * (words_each - 3)) + " end." for i in range(n))


def test_truncate_keeps_whole_sentences_until_the_count_exceeds_the_limit() -> None:
    text = _sentences(40)  # 400 words, 10 per sentence
    cut = truncate_words(text, 300)
    assert len(cut.split()) == 310  # the sentence that crosses 300 is kept
    assert cut.endswith("end.")
    assert text.startswith(cut)
    assert truncate_words("short text.", 300) == "short text."


def test_truncate_never_cuts_after_an_abbreviation_or_an_initial() -> None:
    text = "Nine words fill this opening sentence of the story. " + (
        "The grant was signed by Dr. Ada Fenwick of the U.S. Forest Service and J. Ortiz in May. Then more."
    )
    # the limit is crossed inside the second sentence: the cut lands at its real end
    assert truncate_words(text, 12) == text[: text.index(" Then")]


def test_length_rule_skips_short_documents_and_can_be_changed() -> None:
    assert LengthRule().apply("too short")[0] is None
    assert "too short" in LengthRule().apply("too short")[1]
    text, _ = LengthRule(min_words=None, max_words=None).apply("too short")
    assert text == "too short"
    with pytest.raises(ConfigurationError):
        LengthRule(min_words=0)


def test_folder_of_text_and_markdown_files(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(_sentences(20), encoding="utf-8")
    (tmp_path / "b.md").write_text(_sentences(40), encoding="utf-8")
    (tmp_path / "c.txt").write_text("Too short.", encoding="utf-8")
    (tmp_path / "ignored.csv").write_text("x,y", encoding="utf-8")
    corpus = load_generation_corpus(tmp_path)
    assert [d.id for d in corpus.documents] == ["a", "b"]
    assert len(corpus.documents[1].text.split()) == 310
    assert [s.id for s in corpus.skipped] == ["c"]


def test_jsonl_with_ids_metadata_and_max_docs(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    rows = [{"doc_id": f"d{i}", "text": _sentences(20), "topic": "harbour"} for i in range(3)]
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    corpus = load_generation_corpus(path, max_docs=2)
    assert [d.id for d in corpus.documents] == ["d0", "d1"]
    assert corpus.documents[0].metadata == {"topic": "harbour"}


def test_duplicate_ids_and_missing_paths_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="duplicate document id 'x'"):
        load_generation_corpus([Document(text=_sentences(20), id="x"), Document(text=_sentences(20), id="x")])
    with pytest.raises(InputError, match="corpus not found"):
        load_generation_corpus(tmp_path / "nope")
    with pytest.raises(InputError, match="cannot find its text"):
        load_generation_corpus([42])


@dataclass
class FakeLangChainDocument:
    page_content: str
    metadata: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


class FakeLlamaIndexDocument:
    def __init__(self, text: str, id_: str) -> None:
        self._text, self.id_, self.metadata = text, id_, {"file_name": "x.txt"}

    def get_content(self) -> str:
        return self._text


def test_python_objects_langchain_and_llamaindex_duck_typed() -> None:
    text = _sentences(20)
    corpus = load_generation_corpus(
        [
            text,
            Document(text=text, id="mine"),
            {"id": "dict-doc", "page_content": text, "metadata": {"source": "s"}},
            FakeLangChainDocument(page_content=text, metadata={"doc_id": "lc-1"}),
            FakeLlamaIndexDocument(text, "li-1"),
        ]
    )
    assert [d.id for d in corpus.documents] == ["doc-0", "mine", "dict-doc", "lc-1", "li-1"]
    assert corpus.documents[2].metadata == {"source": "s"}
    assert corpus.documents[4].metadata == {"file_name": "x.txt"}
