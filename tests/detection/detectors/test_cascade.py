"""The cascade: escalation band, merging, failure fallback (scripted stages), and the real default."""

from __future__ import annotations

import pytest

from scopeguard.detection.detectors import get_detector
from scopeguard.detection.detectors.cascade import CascadeDetector
from scopeguard.detection.detectors.lexical import LexicalDetector
from scopeguard.errors import ConfigurationError, LLMConnectionError
from scopeguard.testing import ScriptedDetector

# An invented document (written for these tests; no dataset text).
DOC = (
    "The town of Brindlewick opened a new public library on Saturday after three years of construction. "
    "Mayor Elena Torvik said the building cost 12 million dollars and was paid for by a regional grant."
)


def Scripted(
    name: str, score: float | None, *, fail: bool = False, uncovered: tuple[str, ...] = ()
) -> ScriptedDetector:
    """A detector returning a fixed score (or raising); ``.calls`` counts its calls."""
    reply = LLMConnectionError("server down", endpoint="http://127.0.0.1:9") if fail else score
    return ScriptedDetector(lambda _q: reply, name=name, uncovered=uncovered, llm_calls=1)


@pytest.mark.parametrize("score", [0.05, 0.25, 0.75, 0.97])
def test_confident_first_stage_decides_alone(score: float) -> None:
    first, second = Scripted("a", score), Scripted("b", 0.5)
    v = CascadeDetector(first, second, low=0.25, high=0.75).detect("q?", DOC)
    assert second.calls == 0 and first.calls == 1
    assert not v.escalated
    assert v.score == score
    assert v.label == ("out_of_scope" if score >= 0.5 else "in_scope")


def test_uncertain_first_stage_escalates_and_keeps_uncovered() -> None:
    first = Scripted("a", 0.6, uncovered=("solar roof",))
    second = Scripted("b", 0.2)
    v = CascadeDetector(first, second, low=0.25, high=0.75, name="mine").detect("q?", DOC)
    assert second.calls == 1
    assert v.escalated and v.label == "in_scope" and v.score == 0.2
    assert v.uncovered == ("solar roof",)
    assert v.detector == "mine"
    assert v.llm_calls == 2
    assert "a says" in v.rationale and "b says" in v.rationale


def test_first_stage_without_score_escalates() -> None:
    second = Scripted("b", 0.9)
    v = CascadeDetector(Scripted("a", None), second).detect("q?", DOC)
    assert v.escalated and v.label == "out_of_scope" and second.calls == 1


@pytest.mark.parametrize("second", [Scripted("b", 0.0, fail=True), Scripted("b", None)])
def test_failed_second_stage_falls_back_to_first(second: Scripted) -> None:
    v = CascadeDetector(Scripted("a", 0.6), second).detect("q?", DOC)
    assert v.escalated
    assert v.label == "out_of_scope" and v.score == 0.6
    assert v.error is not None


async def test_async_path_matches_sync() -> None:
    det = CascadeDetector(Scripted("a", 0.5), Scripted("b", 0.1))
    sync, async_ = det.detect("q?", DOC), await det.adetect("q?", DOC)
    assert (sync.label, sync.score, sync.escalated) == (async_.label, async_.score, async_.escalated)


def test_bad_configuration() -> None:
    with pytest.raises(ConfigurationError, match="low <= high"):
        CascadeDetector(Scripted("a", 0.1), Scripted("b", 0.1), low=0.8, high=0.2)
    with pytest.raises(ConfigurationError, match="unknown detector"):
        CascadeDetector("nope", Scripted("b", 0.1))
    with pytest.raises(ConfigurationError, match="must be a detector"):
        CascadeDetector(42, Scripted("b", 0.1))  # type: ignore[arg-type]


def test_stages_by_registry_name_with_real_lexical() -> None:
    det = get_detector("cascade", first="lexical", second=LexicalDetector(threshold=0.9), low=0.3, high=0.7)
    assert isinstance(det, CascadeDetector)
    sure = det.detect("How much did the Brindlewick building cost?", DOC)
    assert sure.label == "in_scope" and not sure.escalated
    # half the words covered: lexical score 0.5 is in the band, the strict second stage says out of scope
    unsure = det.detect("Which Brindlewick firm designed the solar building?", DOC)
    assert unsure.escalated and unsure.label == "out_of_scope"


@pytest.mark.slow
@pytest.mark.integration
def test_real_fast_cascade() -> None:
    pytest.importorskip("sentence_transformers", reason="needs scopeguard[embeddings]")
    from scopeguard.detection.detectors.cascade import default_cascade
    from scopeguard.detection.detectors.fast import FastDetector

    ins_q = "How much did the new Brindlewick library building cost?"
    oos_q = "Which architecture firm designed the Brindlewick library's solar roof panels?"
    # without a second stage, default_cascade is the fast stage alone
    det = default_cascade()
    assert isinstance(det, FastDetector)
    assert det.detect(ins_q, DOC).label == "in_scope"
    assert det.detect(oos_q, DOC).label == "out_of_scope"
    # with a second stage it is a cascade over the real fast stage; a band covering everything
    # sends every question to the (real, strict) lexical second stage
    cascade = default_cascade(second=LexicalDetector(threshold=0.99), low=0.0, high=1.0)
    assert isinstance(cascade, CascadeDetector) and cascade.name == "default"
    v = cascade.detect(ins_q, DOC)
    assert v.escalated and v.detector == "default" and v.label == "in_scope"  # fully covered
    v = cascade.detect(oos_q, DOC)
    assert v.escalated and v.label == "out_of_scope"
    assert any("solar" in u for u in v.uncovered)
