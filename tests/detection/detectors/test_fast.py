"""The fast first stage: head I/O (no model) and real MiniLM behaviour on an invented document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scopeguard.detection.head.fast import FastHead, default_head_path
from scopeguard.detection.read.fast import FEATURES
from scopeguard.errors import ModelError
from scopeguard.types import Document

# An invented document (written for these tests; no dataset text).
DOC = (
    "The town of Brindlewick opened a new public library on Saturday after three years of construction. "
    "Mayor Elena Torvik said the building cost 12 million dollars and was paid for by a regional grant. "
    "The library holds forty thousand books and a maker space with two laser cutters. "
    "Head librarian Marcus Ode said opening hours will run from eight in the morning until nine at night. "
    "Children under twelve can borrow up to ten books at a time."
)
OTHER_DOC = "A storm closed the harbour of Kessling for two days and delayed the ferry to the islands."
IN_SCOPE = "How much did the new Brindlewick library building cost?"
OUT_OF_SCOPE = "Which architecture firm designed the Brindlewick library's solar roof panels?"


def test_shipped_head_loads_and_documents_its_cv() -> None:
    head = FastHead.load(default_head_path())
    assert head.features == FEATURES
    assert head.encoder == "minilm"
    assert "cv_accuracy_mean" in head.info
    # lower coverage / alignment must mean more likely out of scope
    assert all(c < 0 for c in head.coef)
    low = head.predict({"coverage": 0.1, "alignment": 0.4})
    high = head.predict({"coverage": 1.0, "alignment": 0.9})
    assert 0.0 <= high < 0.5 < low <= 1.0


def test_head_round_trip(tmp_path: Path) -> None:
    head = FastHead(
        features=("coverage",), mean=(0.5,), scale=(0.2,), coef=(-1.0,), intercept=0.0, info={"x": 1}
    )
    path = head.save(tmp_path)
    assert path.name == "fast_head.json"
    again = FastHead.load(tmp_path)
    assert again == head
    assert again.predict({"coverage": 0.5}) == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("not json", "not a valid fast head"),
        ('{"features": ["coverage"]}', "not a valid fast head"),
        (
            '{"features": ["nope"], "mean": [0], "scale": [1], "coef": [1], "intercept": 0}',
            "unknown feature",
        ),
        (
            '{"features": ["coverage"], "mean": [0], "scale": [0], "coef": [1], "intercept": 0}',
            "scale values must be positive",
        ),
    ],
)
def test_bad_head_files_name_the_file(tmp_path: Path, body: str, match: str) -> None:
    path = tmp_path / "head.json"
    path.write_text(body)
    with pytest.raises(ModelError, match=match) as info:
        FastHead.load(path)
    assert str(path) in str(info.value)


def test_missing_head_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="fast head not found"):
        FastHead.load(tmp_path / "none.json")


@pytest.fixture(scope="module")
def fast():  # type: ignore[no-untyped-def]
    pytest.importorskip("sentence_transformers", reason="needs scopeguard[embeddings]")
    from scopeguard.detection.detectors.fast import FastDetector

    return FastDetector()


@pytest.mark.slow
@pytest.mark.integration
def test_real_minilm_separates_in_and_out_of_scope(fast) -> None:  # type: ignore[no-untyped-def]
    ins = fast.detect(IN_SCOPE, DOC)
    oos = fast.detect(OUT_OF_SCOPE, DOC)
    assert ins.label == "in_scope" and oos.label == "out_of_scope"
    assert ins.score is not None and oos.score is not None and ins.score < 0.5 < oos.score
    assert ins.detector == "fast" and ins.latency_ms > 0
    # the unsupported part of the question is reported for the clarify policy
    assert any("architecture" in u or "solar" in u for u in oos.uncovered)
    assert not any("Brindlewick" in u for u in oos.uncovered)
    assert "token alignment" in oos.rationale


@pytest.mark.slow
@pytest.mark.integration
def test_document_side_is_cached(fast, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    calls: list[tuple[str, int]] = []
    encoder = fast.featurizer.encoder
    real_embed, real_stack = encoder.embed, encoder.stack

    def counting_embed(texts):  # type: ignore[no-untyped-def]
        calls.append(("embed", len(texts)))
        return real_embed(texts)

    def counting_stack(texts):  # type: ignore[no-untyped-def]
        calls.append(("stack", len(texts)))
        return real_stack(texts)

    monkeypatch.setattr(encoder, "embed", counting_embed)
    monkeypatch.setattr(encoder, "stack", counting_stack)
    doc = Document(text=OTHER_DOC + " Fresh text for the cache test.")
    first = fast.featurizer.features("Why did the ferry stop?", [doc])
    second = fast.featurizer.features("When did the storm hit Kessling?", [doc])
    # the document's two sentences once, then only the question each time
    assert calls == [("stack", 2), ("embed", 1), ("embed", 1)]
    assert 0.0 <= first["coverage"] <= 1.0 and 0.0 < second["alignment"] <= 1.0
    assert fast.featurizer.cached_bytes > 0


@pytest.mark.slow
@pytest.mark.integration
def test_several_documents_and_registry(fast, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    alone = fast.featurizer.features(IN_SCOPE, [Document(text=OTHER_DOC)])
    both = fast.featurizer.features(IN_SCOPE, [Document(text=OTHER_DOC), Document(text=DOC)])
    assert both["coverage"] > alone["coverage"] and both["alignment"] > alone["alignment"]
    # pinned: computed before the length-sorted batches and the per-document maximum (commit acf5d6f)
    assert both["coverage"] == 1.0 and both["alignment"] == pytest.approx(0.8955230712890625, abs=1e-4)
    values, uncovered = fast.featurizer.analyse(OUT_OF_SCOPE, [Document(text=OTHER_DOC), Document(text=DOC)])
    assert values["coverage"] == 0.25 and values["alignment"] == pytest.approx(0.5894086360931396, abs=1e-4)
    assert uncovered == ("architecture firm designed", "solar roof panels")

    from scopeguard.detection.detectors import get_detector

    head = FastHead.load(default_head_path())
    strict = FastHead(**{**head.__dict__, "threshold": 0.999})
    strict.save(tmp_path)
    det = get_detector("fast", model=tmp_path)
    assert det.detect(OUT_OF_SCOPE, DOC).label == "in_scope"  # nothing reaches 0.999
    assert json.loads((tmp_path / "fast_head.json").read_text())["threshold"] == 0.999
