"""``benchmarks/generation_domains.py``: the per-domain figures on a tiny synthetic run folder with
hand labels (Wilson intervals, question forms, documents meeting 2 + 3), and its review step."""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from scopeguard.generation.checkpoint import CheckpointStore, DocumentRecord, GeneratedQuestion
from scopeguard.generation.pipeline import GenerationRunConfig, run_folder

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

# per document: its text, then (label, question) of each kept question; the subjects ("Acme kettle",
# "Brightwater", "Lumen lamp") are named in their documents, the details asked for are not
DOCS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "kettle": (
        "The Acme kettle boils a litre in three minutes. Its lid opens with a button.",
        [
            ("out_of_scope", "What is the price of the Acme kettle?"),
            ("out_of_scope", "Who designed the Acme kettle?"),
            ("in_scope", "How long does the kettle take to boil a litre?"),
            ("in_scope", "How does the lid open?"),
            ("in_scope", "How much water does it boil in three minutes?"),
        ],
    ),
    "hotel": (
        "Brightwater is a hotel by the harbour. Its rooms face the sea and breakfast is served at seven.",
        [
            ("out_of_scope", "What is the price of a room at Brightwater?"),
            ("in_scope", "What do the rooms face?"),
            ("in_scope", "When is breakfast served?"),
            ("in_scope", "Where is Brightwater?"),
        ],
    ),
    "lamp": (
        "The Lumen lamp has three brightness levels and a cloth shade. It charges over USB.",
        [
            ("out_of_scope", "What is the price of the Lumen lamp?"),
            ("out_of_scope", "When was the Lumen lamp released?"),
            ("out_of_scope", "How heavy is the Lumen lamp?"),
            ("in_scope", "How many brightness levels does the lamp have?"),
            ("in_scope", "How does the lamp charge?"),
            ("in_scope", "What is the shade made of?"),
            ("in_scope", "What does the Lumen lamp have?"),
        ],
    ),
}
SECONDS = {"kettle": 40.0, "hotel": 95.0, "lamp": 70.0}


@pytest.fixture
def gd(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The script as a module (it imports its siblings, so benchmarks/ is on the path meanwhile)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("generation_domains")


def _run(folder: Path) -> Path:
    store = CheckpointStore(folder)
    for order, (doc_id, (text, questions)) in enumerate(DOCS.items()):
        kept = tuple(
            GeneratedQuestion(
                id=f"{doc_id}_{i}",
                doc_id=doc_id,
                question=q,
                label=label,  # type: ignore[arg-type]
                words=len(q.split()),
                edit_kind="unstated" if label == "out_of_scope" else "direct",
            )
            for i, (label, q) in enumerate(questions)
        )
        store.save(
            DocumentRecord(
                doc_id=doc_id,
                order=order,
                text=text,
                status="done",
                mode="offline",
                model="writer",
                questions=kept,
                seconds=SECONDS[doc_id],
            )
        )
    store.save(
        DocumentRecord(doc_id="broken", order=9, text="x", status="failed", mode="offline", model="writer")
    )
    config = GenerationRunConfig(model="writer-1.5b", judge_model="writer-1.5b", filter_with="logprob")
    run_folder(folder).open(config)
    return folder


def _labels(gd: ModuleType) -> dict[str, dict[str, Any]]:
    """Every out-of-scope question natural and unanswerable but "Who designed ..." (answerable) and
    "How heavy ..." (not natural); every in-scope one answerable but "What does the Lumen lamp
    have?"; "When was ... released?" left unlabelled."""
    labels = {}
    for doc_id, (_, questions) in DOCS.items():
        for label, q in questions:
            if q.startswith("When was"):
                continue
            labels[gd.label_key(doc_id, q)] = {
                "domain": "reviews",
                "label": label,
                "natural": None if label == "in_scope" else not q.startswith("How heavy"),
                "answerable": q.startswith("Who designed")
                if label == "out_of_scope"
                else not q.endswith("lamp have?"),
            }
    return labels


def test_wilson_interval_inverts_the_score_test_and_stays_in_range(gd: ModuleType) -> None:
    from _report import wilson

    z = 1.96
    for k, n in [(0, 10), (3, 10), (27, 36), (36, 36), (1, 1)]:
        low, high = wilson(k, n)
        p = k / n
        assert 0.0 <= low <= p <= high <= 1.0
        for x in (low, high):  # each end is where the score test's statistic equals z
            if 0.0 < x < 1.0:
                assert math.isclose((p - x) ** 2, z * z * x * (1 - x) / n, rel_tol=1e-9)
        mirror = wilson(n - k, n)
        assert math.isclose(low, 1 - mirror[1]) and math.isclose(high, 1 - mirror[0])
    assert wilson(0, 0) is None
    assert wilson(30, 40)[1] - wilson(30, 40)[0] > wilson(300, 400)[1] - wilson(300, 400)[0]


def test_question_form_keeps_the_opening_and_drops_the_subject(gd: ModuleType) -> None:
    text = DOCS["lamp"][0]
    assert gd.question_form("What is the price of the Lumen lamp?", text) == "what is the price"
    assert gd.question_form("How heavy is the Lumen lamp?", text) == "how heavy is"
    # the subject's words, named by the document, are one "_"
    assert gd.question_form("When was the Lumen lamp released?", text) == "when was the _ released"
    assert gd.question_form("When was the Lumen lamp released?", "") == "when was the lumen"


def test_report_per_domain(gd: ModuleType, tmp_path: Path) -> None:
    folder = _run(tmp_path / "run")
    labels = _labels(gd)
    # the repository's manifest, its sample's ids emptied: the run's own documents are the sample
    manifest = {d: {**m, "doc_ids": []} for d, m in gd.domains().items()}
    rows, meta = gd.build_report({"reviews": [folder]}, manifest, labels)
    (row,) = rows

    oos = [(d, q) for d, (_, qs) in DOCS.items() for label, q in qs if label == "out_of_scope"]
    ins = [(d, q) for d, (_, qs) in DOCS.items() for label, q in qs if label == "in_scope"]
    oos_labs = [labels[gd.label_key(d, q)] for d, q in oos if gd.label_key(d, q) in labels]
    good = sum(lab["natural"] and not lab["answerable"] for lab in oos_labs)
    answerable = sum(labels[gd.label_key(d, q)]["answerable"] for d, q in ins)
    assert row["oos_kept"] == len(oos) and row["oos_labelled"] == len(oos) - 1 == len(oos_labs)
    assert row["natural_unanswerable"] == round(good / len(oos_labs), 3)
    assert row["natural_unanswerable_ci"] == [round(x, 3) for x in gd.wilson(good, len(oos_labs))]
    assert row["in_scope_kept"] == row["in_scope_labelled"] == len(ins)
    assert row["answerable"] == round(answerable / len(ins), 3)

    # the failed document counts among the documents and meets nothing
    def meets(qs: list[tuple[str, str]]) -> bool:
        labels_of = [label for label, _ in qs]
        return labels_of.count("out_of_scope") >= 2 and labels_of.count("in_scope") >= 3

    meeting = sum(meets(qs) for _, qs in DOCS.values())
    assert 0 < meeting < len(DOCS)
    assert (row["docs"], row["docs_done"], row["docs_meeting"]) == (len(DOCS) + 1, len(DOCS), meeting)
    assert row["docs_meeting_share"] == round(meeting / (len(DOCS) + 1), 3)
    assert row["seconds_per_doc_median"] == sorted(SECONDS.values())[1]
    assert row["seconds_per_doc_max"] == max(SECONDS.values())

    prices = sum(q.startswith("What is the price") for _, q in oos)
    assert row["top_form"] == "what is the price"
    assert row["top_form_share"] == round(prices / len(oos), 3)
    # too few labels, a share under 75% and one form over 15%: each target missed is named
    missed = row["missed"].split(", ")
    assert {"oos_labelled", "natural_unanswerable", "top_form_share", "docs_meeting_share"} <= set(missed)
    assert "seconds_per_doc_median" not in missed

    settings = meta["runs"]["reviews"]["settings"]
    assert settings["model"] == "writer-1.5b" and settings["screens"]
    assert meta["data"]["reviews"] == {"dataset": "subjqa", "source": "shared"}


def test_review_writes_text_to_work_and_empty_labels_to_the_review_file(
    gd: ModuleType, tmp_path: Path
) -> None:
    folder = _run(tmp_path / "run")
    review_file = tmp_path / "review.json"
    first = gd.review({"reviews": [folder]}, gd.domains(), tmp_path / "work", review_file)
    total = sum(len(qs) for _, qs in DOCS.values())
    assert first == {"reviews": total}
    page = (tmp_path / "work" / "to_label_reviews.md").read_text(encoding="utf-8")
    assert DOCS["hotel"][0] in page and "What is the price of a room at Brightwater?" in page
    saved = json.loads(review_file.read_text(encoding="utf-8"))
    assert len(saved) == total
    assert "Brightwater" not in review_file.read_text(encoding="utf-8")  # keys and labels, no text
    # labels filled by hand are kept, and only the rest counted again
    saved.update(_labels(gd))
    review_file.write_text(json.dumps(saved), encoding="utf-8")
    again = gd.review({"reviews": [folder]}, gd.domains(), tmp_path / "work", review_file)
    assert again == {"reviews": 1}
    assert json.loads(review_file.read_text(encoding="utf-8")) == saved


def test_two_runs_of_a_domain_are_read_blind_on_one_sheet(gd: ModuleType, tmp_path: Path) -> None:
    first = _run(tmp_path / "a")
    second = _run(tmp_path / "b")
    # the second arm kept one more question of the hotel's
    store = CheckpointStore(second)
    hotel = store.load_all()["hotel"]
    extra = "How far is Brightwater from the station?"
    added = hotel.questions[0].model_copy(update={"id": "hotel_x", "question": extra})
    store.save(hotel.model_copy(update={"questions": (*hotel.questions, added)}))
    review_file = tmp_path / "review.json"
    unlabelled = gd.review({"reviews": [first, second]}, gd.domains(), tmp_path / "work", review_file)
    total = sum(len(qs) for _, qs in DOCS.values())
    assert unlabelled == {"reviews": total + 1}  # each question once, the extra one too
    page = (tmp_path / "work" / "to_label_reviews.md").read_text(encoding="utf-8")
    assert page.count(extra) == 1 and page.count("What is the price of a room at Brightwater?") == 1
    # no question says which run kept it
    assert all(str(tmp_path) not in line for line in page.splitlines() if line.startswith("- "))
    with pytest.raises(SystemExit, match="one --run a domain"):
        gd.build_report({"reviews": [first, second]}, gd.domains(), {})


def test_runs_name_a_domain_of_the_manifest(gd: ModuleType) -> None:
    manifest = gd.domains()
    assert set(manifest) == {"news", "wikipedia", "reviews", "policies"}
    for spec in manifest.values():
        assert spec["source"] in {"shared", "repo"} and isinstance(spec["doc_ids"], list) and spec["drawn_by"]
    assert gd.parse_runs(["news=/tmp/x"], manifest) == {"news": [Path("/tmp/x")]}
    # the arms of one draw: several runs of a domain
    assert gd.parse_runs(["news=/tmp/a", "news=/tmp/b"], manifest) == {
        "news": [Path("/tmp/a"), Path("/tmp/b")]
    }
    with pytest.raises(SystemExit, match="news, wikipedia, reviews, policies"):
        gd.parse_runs(["blogs=/tmp/x"], manifest)


def test_documents_writes_each_domains_sample_from_its_data_set(gd: ModuleType, tmp_path: Path) -> None:
    pages = BENCHMARKS / "data" / "policies" / "documents.jsonl"
    ids = [json.loads(line)["doc_id"] for line in pages.read_text(encoding="utf-8").splitlines()][::-5]
    manifest = {
        "policies": {"dataset": "benchmarks/data/policies", "source": "repo", "doc_ids": ids, "drawn_by": ""},
        "news": {"dataset": "eloq-gold-dev", "source": "shared", "doc_ids": [], "drawn_by": "not drawn"},
    }
    gd.documents(manifest, tmp_path)
    written = [json.loads(line) for line in (tmp_path / "policies.jsonl").read_text().splitlines()]
    assert [d["doc_id"] for d in written] == ids and all(d["text"] for d in written)
    assert not (tmp_path / "news.jsonl").exists()  # no sample yet: nothing to write
