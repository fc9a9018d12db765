"""The reading head (`default`) with scripted verdict margins and hidden states; one real read."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scopeguard.detection.detectors.default import DefaultDetector
from scopeguard.detection.head.calibration import LogisticHead
from scopeguard.detection.head.default import DefaultHead, default_head_path, fit_default_head, model_card
from scopeguard.detection.signals import INFERENCE_TEMPLATE, Signals
from scopeguard.errors import ConfigurationError, LLMError, ModelError
from scopeguard.testing import ScriptedVerdictScorer

DOC = "The Brindlewick library opened in 2019 and cost 4 million pounds."


def head(tmp_path, *, signals=("margin", "inference_margin", "hidden"), threshold: float = 0.5):
    """P(out of scope) = sigmoid(margin + inference margin + 2 * hidden[0])."""
    names = []
    for s in signals:
        names += ["h3_0", "h3_1"] if s == "hidden" else [s]
    coef = tuple(2.0 if n == "h3_0" else 0.0 if n == "h3_1" else 1.0 for n in names)
    h = DefaultHead(
        verdict_model="scripted-verdicts",
        signals=tuple(signals),
        head=LogisticHead(tuple(names), (0.0,) * len(names), (1.0,) * len(names), coef, 0.0),
        threshold=threshold,
        layer=3 if "hidden" in signals else None,
        info={"datasets": ["a"], "n": 10, "l2": 1.0},
    )
    return h.save(tmp_path / "head")


def scripted(margin=lambda p: 0.0, hidden=lambda p: [0.0, 5.0]) -> ScriptedVerdictScorer:
    return ScriptedVerdictScorer(margin, hidden=hidden, layer=3)


def test_one_read_gives_the_margin_the_inference_probe_and_the_hidden_state(tmp_path) -> None:
    scorer = scripted(
        margin=lambda p: -1.0 if "careful reader" in p else -2.0,
        hidden=lambda p: [-1.0 if "library" in p else 3.0, 7.0],
    )
    det = DefaultDetector(model=head(tmp_path), reader=scorer)
    v = det.detect("How much did the library cost?", DOC)
    # z = -2 - 1 + 2 * -1 = -5
    assert v.label == "in_scope" and v.score == pytest.approx(1 / (1 + np.exp(5)))
    assert v.stage == "read" and v.detector == "default" and v.llm_calls == 2 and v.uncovered == ()
    assert "careful reader answer it?" in v.rationale
    # the inference probe is the same prompt up to its last line: one document state serves both
    main, probe = scorer.prompts
    shared = main.rsplit("\n", 1)[0]
    assert probe.startswith(shared) and "careful reader" in probe and "careful reader" not in main


def test_a_refusal_lists_the_question_words_the_documents_lack(tmp_path) -> None:
    det = DefaultDetector(model=head(tmp_path), reader=scripted(margin=lambda p: 3.0))
    v = det.detect("Which architect designed the Brindlewick library roof?", DOC)
    assert v.label == "out_of_scope" and set(v.uncovered) == {"architect", "designed", "roof"}
    assert "not in the documents" in v.rationale


def test_the_lowest_passage_wins_and_a_clear_answer_stops_reading(tmp_path) -> None:
    answers_first = scripted(margin=lambda p: -3.0 if "library" in p else 3.0, hidden=lambda p: [0.0, 0.0])
    det = DefaultDetector(model=head(tmp_path), reader=answers_first)
    v = det.detect("When did the library open?", [DOC, "Gardens are green."])
    assert v.label == "in_scope" and len(answers_first.prompts) == 2  # one passage, two prompts
    unsure = scripted(margin=lambda p: -0.5 if "library" in p else 3.0, hidden=lambda p: [0.0, 0.0])
    v = DefaultDetector(model=head(tmp_path), reader=unsure).detect(
        "When did the library open?", ["Gardens are green.", DOC]
    )
    assert len(unsure.prompts) == 4 and v.label == "in_scope" and v.llm_calls == 4


def test_heads_without_the_probe_or_the_hidden_state_read_less(tmp_path) -> None:
    scorer = ScriptedVerdictScorer(lambda p: 2.0)  # no hidden states
    det = DefaultDetector(model=head(tmp_path, signals=("margin",)), reader=scorer)
    v = det.detect("Who built it?", DOC)
    assert v.label == "out_of_scope" and len(scorer.prompts) == 1 and v.llm_calls == 1
    # a head that reads a hidden state refuses a scorer without one, naming the ways out
    with pytest.raises(ConfigurationError, match="hidden state of layer 3"):
        DefaultDetector(model=head(tmp_path), reader=scorer).detect("Who built it?", DOC)


def test_a_failing_reader_raises_for_the_guard_to_fail_closed(tmp_path) -> None:
    from scopeguard import Guard

    def boom(_: str) -> float:
        raise LLMError("model crashed")

    det = DefaultDetector(model=head(tmp_path), reader=scripted(margin=boom))
    with pytest.raises(LLMError, match="model crashed"):
        det.detect("Who built it?", DOC)
    verdict = Guard(detector=det).check("Who built it?", DOC)
    assert verdict.label == "unknown" and "model crashed" in (verdict.error or "")


def test_head_round_trip_card_and_errors(tmp_path) -> None:
    path = head(tmp_path)
    again = DefaultHead.load(path)
    assert again.signals == ("margin", "inference_margin", "hidden") and again.layer == 3
    assert again.probes == (INFERENCE_TEMPLATE,) and again.layers == (3,)
    card = path.with_suffix(".md").read_text()
    assert "scripted-verdicts" in card and "layer 3" in card
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ModelError, match="not the reading head"):
        DefaultHead.load(tmp_path / "bad.json")
    raw = json.loads(path.read_text())
    (tmp_path / "old.json").write_text(json.dumps({**raw, "kind": "default_cascade"}))
    with pytest.raises(ModelError, match="train-detector --detector default"):
        DefaultHead.load(tmp_path / "old.json")
    (tmp_path / "odd.json").write_text(json.dumps({**raw, "signals": ["margin", "vibes"]}))
    with pytest.raises(ModelError, match="signals must be among"):
        DefaultHead.load(tmp_path / "odd.json")
    (tmp_path / "nolayer.json").write_text(json.dumps({**raw, "layer": None}))
    with pytest.raises(ModelError, match="layer is needed"):
        DefaultHead.load(tmp_path / "nolayer.json")
    with pytest.raises(ConfigurationError, match="threshold"):
        DefaultDetector(model=path, reader=scripted(), threshold=1.5)


def signals(n_per: int = 200, seed: int = 0) -> Signals:
    """Two datasets: the margin separates both; hidden[0] separates both; hidden[1] is noise."""
    rng = np.random.default_rng(seed)
    parts = []
    for name in ("a", "b"):
        y = rng.integers(0, 2, n_per)
        margin = np.where(y == 1, 1.0, -1.0) + rng.normal(0, 1.5, n_per)
        hidden = np.stack(
            [np.where(y == 1, 1.0, -1.0) + rng.normal(0, 0.7, n_per), rng.normal(0, 1, n_per)], 1
        )
        parts.append(
            Signals(
                ids=tuple(f"{name}{i}" for i in range(n_per)),
                groups=tuple(f"{name}/d{i // 4}" for i in range(n_per)),
                datasets=(name,) * n_per,
                labels=y,
                coverage=np.full(n_per, np.nan),
                alignment=np.full(n_per, np.nan),
                margin=margin,
                hidden=hidden[:, None, :].astype(np.float32),
                layers=(7,),
                probes={INFERENCE_TEMPLATE: margin + rng.normal(0, 0.5, n_per)},
            )
        )
    return Signals.concat(parts)


def test_fit_reports_grouped_cv_and_leave_one_dataset_out() -> None:
    sig = signals()
    fitted, report = fit_default_head(
        sig, verdict_model="m", names=("margin", "inference_margin", "hidden"), layer=7, l2=0.01
    )
    assert fitted.signals == ("margin", "inference_margin", "hidden") and fitted.layer == 7
    assert set(report["cv"]["per_dataset"]) == {"a", "b"} and set(report["lodo"]) == {"a", "b"}
    assert report["cv"]["overall"]["accuracy"] > 0.85
    assert min(p["accuracy"] for p in report["lodo"].values()) > 0.85
    margin_only, plain = fit_default_head(sig, verdict_model="m", names=("margin",))
    assert plain["cv"]["overall"]["accuracy"] < report["cv"]["overall"]["accuracy"]
    assert margin_only.layer is None and margin_only.probes == ()
    # the head reproduces its own out-of-fold labels closely on the training rows
    assert sig.hidden is not None
    row = fitted.row(float(sig.margin[0]), float(sig.probes[INFERENCE_TEMPLATE][0]), sig.hidden[0])
    assert row.shape == (4,)
    assert fitted.info["lodo"]["a"]["n"] == 200 and fitted.info["l2"] == 0.01
    with pytest.raises(ConfigurationError, match="no hidden state of layer 3"):
        fit_default_head(sig, verdict_model="m", layer=3)
    broken = Signals.concat([sig.take(np.arange(10))])
    broken.margin[0] = np.nan
    with pytest.raises(ConfigurationError, match="NaN"):
        fit_default_head(broken, verdict_model="m", names=("margin",))


def test_a_threshold_chosen_left_out_bounds_every_left_out_false_refusal_rate() -> None:
    sig = signals(seed=3)
    _, free = fit_default_head(sig, verdict_model="m", names=("margin",))
    bounded, report = fit_default_head(
        sig, verdict_model="m", names=("margin",), max_false_refusal=0.05, threshold_on="lodo"
    )
    assert max(p["false_refusal_rate"] for p in free["lodo"].values()) > 0.05  # the bound binds here
    assert max(p["false_refusal_rate"] for p in report["lodo"].values()) <= 0.05
    assert bounded.threshold > free["threshold"] and report["threshold_on"] == "lodo"
    # what the best threshold in hindsight catches at 10% false refusals, beside it
    assert all(0.0 < p["extra"]["caught_at_10"] <= 1.0 for p in report["lodo"].values())
    assert len(report["out_of_fold"]["p_lodo"]) == len(sig)
    with pytest.raises(ConfigurationError, match="'cv' or 'lodo'"):
        fit_default_head(sig, verdict_model="m", names=("margin",), threshold_on="test")
    with pytest.raises(ConfigurationError, match="two datasets"):
        fit_default_head(sig.take(np.arange(200)), verdict_model="m", names=("margin",), threshold_on="lodo")


def test_the_head_identity_ignores_its_threshold() -> None:
    fitted, _ = fit_default_head(signals(), verdict_model="m", names=("margin",))
    other = DefaultHead(
        verdict_model=fitted.verdict_model, signals=fitted.signals, head=fitted.head, threshold=0.9
    )
    assert other.weights_sha256() == fitted.weights_sha256()
    refit, _ = fit_default_head(signals(seed=1), verdict_model="m", names=("margin",))
    assert refit.weights_sha256() != fitted.weights_sha256()


def test_packaged_head_is_valid() -> None:
    h = DefaultHead.load(default_head_path())
    assert h.verdict_model == "qwen2.5-coder-1.5b" and "margin" in h.signals
    assert set(h.info["datasets"]) >= {"eloq-gold-dev", "squad2-train", "subjqa"}
    assert set(h.info["lodo"]) >= {"eloq-gold-dev", "subjqa"}
    card = default_head_path().with_suffix(".md").read_text(encoding="utf-8")
    assert card == model_card(h)  # the shipped card is what its head writes
    # each dataset beside the documents drawn from it, in the order they were given
    assert "squad2-train (80 documents), squad2-train-extra (30 documents), subjqa (400 documents)" in card
    assert "near-miss (all documents)" in card


def test_the_card_pairs_each_dataset_with_its_document_limit() -> None:
    fitted, _ = fit_default_head(signals(40), verdict_model="m", names=("margin",))
    info = {**fitted.info, "datasets": ["b", "a"], "max_docs": [None, 3], "n": 80}
    card = model_card(DefaultHead(**{**fitted.__dict__, "info": info}))
    assert "Data: b (all documents), a (3 documents); 80 questions" in card
    info = {**info, "max_docs": 5}
    assert "b (5 documents), a (5 documents)" in model_card(DefaultHead(**{**fitted.__dict__, "info": info}))


@pytest.mark.slow
@pytest.mark.integration
def test_real_default_reads_with_the_packaged_model() -> None:
    pytest.importorskip("llama_cpp", reason="needs scopeguard[local]")
    det = DefaultDetector()
    doc = (
        "The Brindlewick public library opened on Saturday. Mayor Elena Torvik said the building "
        "cost 12 million dollars, paid by a regional grant, and that it holds 80,000 books."
    )
    v = det.detect("How many books does the Brindlewick library hold?", doc)
    assert v.stage == "read" and v.label == "in_scope" and v.uncovered == ()
    assert v.llm_calls == 1 + len(det.head.probes)
    v = det.detect("Which company built the Brindlewick library's heating system?", doc)
    assert v.label == "out_of_scope" and "heating" in v.uncovered


def test_default_reads_with_the_reader_it_is_given(tmp_path) -> None:
    from scopeguard import get_detector

    scorer = scripted(margin=lambda p: -3.0)
    det = get_detector("default", model=head(tmp_path), reader=scorer)
    v = det.detect("When did the library open?", DOC)
    assert isinstance(det, DefaultDetector)
    assert det.reader.scorer is scorer and scorer.prompts and v.label == "in_scope"
    assert v.rationale.startswith("scripted-verdicts answers")


def test_default_takes_reader_not_reader_llm(tmp_path) -> None:
    from scopeguard import get_detector

    renamed = r"detector 'default' takes reader=, not reader_llm= \(renamed"
    with pytest.raises(ConfigurationError, match=renamed):
        DefaultDetector(model=head(tmp_path), reader_llm=scripted())
    with pytest.raises(ConfigurationError, match=renamed):
        get_detector("default", model=head(tmp_path), reader_llm=scripted())
    # any other unknown option is still named as one
    with pytest.raises(ConfigurationError, match="detector 'default' does not take the option 'bogus'"):
        DefaultDetector(model=head(tmp_path), reader=scripted(), bogus=1)


def test_a_short_document_has_its_p_lowered_by_the_heads_shift_and_a_long_one_not(tmp_path) -> None:
    import dataclasses

    from scopeguard.detection.head.default import ShortPassages

    plain = DefaultHead.load(head(tmp_path, signals=("margin",)))
    shifted = dataclasses.replace(plain, short_passages=ShortPassages(words=40, shift=1.5))
    path = shifted.save(tmp_path / "short")
    assert DefaultHead.load(path).short_passages == ShortPassages(40, 1.5)
    assert shifted.weights_sha256() == plain.weights_sha256()  # an operating point, like the threshold
    assert "Short passages" not in model_card(shifted)  # no study figures in its card: no section
    long_doc = " ".join([DOC] * 4)  # 44 words
    det = DefaultDetector(model=path, reader=ScriptedVerdictScorer(lambda p: 1.0))
    # P = sigmoid(1) = 0.73 on the long document; sigmoid(1 - 1.5) = 0.38 on the 11-word one
    assert det.detect("When did it open?", long_doc).score == pytest.approx(1 / (1 + np.exp(-1.0)))
    v = det.detect("When did it open?", DOC)
    assert v.label == "in_scope" and v.score == pytest.approx(1 / (1 + np.exp(0.5)))
    # several documents: each passage keeps its own document's rule; the lowest P wins
    margins = ScriptedVerdictScorer(lambda p: 1.0 if "Gardens" in p else 2.0)
    v = DefaultDetector(model=path, reader=margins).detect("When?", [long_doc, "Gardens are green."])
    assert v.score == pytest.approx(1 / (1 + np.exp(0.5))) and v.llm_calls == 2
    with pytest.raises(ModelError, match="short passages"):
        ShortPassages(words=0, shift=1.0)
    with pytest.raises(ModelError, match="short passages"):
        ShortPassages(words=40, shift=-1.0)


def test_the_short_passage_rule_follows_each_passage_back_to_its_document(tmp_path) -> None:
    import dataclasses

    from scopeguard.detection.head.default import ShortPassages
    from scopeguard.types import as_documents

    plain = DefaultHead.load(head(tmp_path, signals=("margin",)))
    path = dataclasses.replace(plain, short_passages=ShortPassages(words=40, shift=1.5)).save(tmp_path / "s")
    # 200 words in passages of about 30: each passage is short, its document is not
    long_doc = " ".join(f"Sentence {i} says the Brindlewick pier is {i} metres long." for i in range(20))
    scorer = ScriptedVerdictScorer(lambda p: 1.8 if "Gardens" in p else 1.0)
    det = DefaultDetector(model=path, reader=scorer, reader_kwargs={"chunk_tokens": 64})
    split = det.reader.split(as_documents([long_doc, "Gardens are green."]))
    n_long = len(split) - 1
    assert n_long > 1 and [s.document for s in split] == [0] * n_long + [1]
    assert [s.text for s in split] == det.reader.passages(as_documents([long_doc, "Gardens are green."]))
    v = det.detect("When?", [long_doc, "Gardens are green."])
    # the long document's passages keep sigmoid(1) = 0.73; the short one's is lowered to
    # sigmoid(1.8 - 1.5) = 0.57 and wins (a long passage lowered would give sigmoid(-0.5) = 0.38)
    assert v.score == pytest.approx(1 / (1 + np.exp(-0.3))) and v.llm_calls == n_long + 1
    assert det.reading("When?", [long_doc]).p_out_of_scope == pytest.approx(1 / (1 + np.exp(-1.0)))


def test_the_packaged_head_lowers_short_passages() -> None:
    packaged = DefaultHead.load(default_head_path())
    assert packaged.short_passages is not None and packaged.short_passages.shift > 0
    assert "Short passages" in model_card(packaged)
