"""One name for the reading model: ``reader=`` on every detector that reads, declared in its registry
entry; the old names (``reader_llm=``, logprob's ``llm=``) raise one line naming it."""

from __future__ import annotations

import pytest

from scopeguard import Guard, get_detector
from scopeguard.detection.detectors import detector_reads, detector_takes, register_detector
from scopeguard.detection.detectors.logprob import LogProbDetector
from scopeguard.errors import ConfigurationError
from scopeguard.testing import ScriptedDetector, ScriptedVerdictScorer

DOC = "The Brindlewick library opened in 2019 and cost 4 million pounds."


def test_the_registry_declares_which_detectors_read() -> None:
    assert detector_reads("default") and detector_reads("logprob")
    assert not any(detector_reads(n) for n in ("lexical", "fast", "judge", "cascade", "nli", "probe"))
    with pytest.raises(ConfigurationError, match=r"unknown detector 'nope'; valid names: .*default"):
        detector_reads("nope")
    # and their factories take it by that name
    assert detector_takes("default", "reader") and detector_takes("logprob", "reader")


def test_logprob_reads_with_the_reader_it_is_given() -> None:
    scorer = ScriptedVerdictScorer(lambda p: 4.0, name="my-reader")
    det = get_detector("logprob", reader=scorer)
    v = det.detect("Who designed the roof?", DOC)
    assert det.reader.scorer is scorer and len(scorer.prompts) == 1
    assert v.label == "out_of_scope" and "my-reader answers" in v.rationale


def test_logprob_takes_reader_not_llm() -> None:
    s = ScriptedVerdictScorer(lambda p: 0.0)
    renamed = r"detector 'logprob' takes reader=, not llm= \(renamed"
    with pytest.raises(ConfigurationError, match=renamed):
        LogProbDetector(llm=s)
    with pytest.raises(ConfigurationError, match=renamed) as info:
        get_detector("logprob", llm=s)
    assert "\n" not in str(info.value)


def test_a_reader_for_a_detector_that_does_not_read_is_refused() -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"detector 'lexical' reads with no model: .*\(the detectors that do: default, logprob",
    ):
        get_detector("lexical", reader="local")
    with pytest.raises(ConfigurationError, match="apply to a detector built by name"):
        get_detector(ScriptedDetector(lambda q: 0.1), reader="local")


def test_a_registered_detector_declares_its_reader(reading_detector) -> None:
    seen = reading_detector("reading", lambda: ScriptedDetector(lambda q: 0.2, name="reading"))
    register_detector("plain", lambda: ScriptedDetector(lambda q: 0.2, name="plain"))
    assert detector_reads("reading") and not detector_reads("plain")
    get_detector("reading", reader="openai:my-model")
    assert seen == ["openai:my-model"]
    with pytest.raises(ConfigurationError, match="the detectors that do: default, logprob, reading"):
        get_detector("plain", reader="local")


def test_the_guard_routes_its_reader_and_keeps_its_llm_for_answering() -> None:
    from scopeguard.testing import ScriptedChatModel

    scorer = ScriptedVerdictScorer(lambda p: -5.0)
    llm = ScriptedChatModel(["In 2019."])
    guard = Guard(detector="logprob", reader=scorer, llm=llm, policy="refuse")
    assert guard.detector.reader.scorer is scorer  # type: ignore[attr-defined]
    result = guard.answer("When did the library open?", [DOC])
    assert result.response == "In 2019." and len(scorer.prompts) == 1
    with pytest.raises(ConfigurationError, match="detector 'lexical' reads with no model"):
        Guard(detector="lexical", reader="local")
    with pytest.raises(ConfigurationError, match="apply to a detector built by name"):
        Guard(detector=ScriptedDetector(lambda q: 0.1), reader=scorer)
