"""Set reads: a question read once against several passages' kept states joined in one sequence."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scopeguard.detection.detectors.default import DefaultDetector
from scopeguard.detection.head.default import DefaultHead, default_head_path
from scopeguard.detection.read import Reader
from scopeguard.detection.read._verdict_prompt import TEMPLATE, document_block, verdict_messages
from scopeguard.detection.read.base import VerdictScore
from scopeguard.errors import ConfigurationError, DocumentTooLongError
from scopeguard.llm.base import ChatMessage
from scopeguard.prompts import render
from scopeguard.testing import ScriptedVerdictScorer

PASSAGES = [
    "The Brindlewick pier was painted green in 1931 by the harbour crew.",
    "Marrow Hall, the town's library, opened in 1904 with two thousand books.",
    "The ferry to Osk leaves at seven each morning and returns at dusk.",
]
QUESTION = "When was the Brindlewick pier painted?"


def test_document_block_finds_the_block_between_the_instruction_and_the_question() -> None:
    prompt = render(TEMPLATE, document=PASSAGES[0], question=QUESTION)
    block = document_block(prompt)
    assert block is not None
    start, end, cut = block
    assert prompt[start:end] == f'Document:\n"""\n{PASSAGES[0]}\n"""\n\n'
    assert prompt[cut:].startswith(QUESTION)
    assert document_block("Is this a verdict prompt? No.") is None


def test_a_scorer_that_cannot_join_states_is_told_to_read_passage_by_passage() -> None:
    reader = Reader(ScriptedVerdictScorer(lambda prompt: 1.0))
    with pytest.raises(ConfigurationError, match="passage by passage"):
        reader.read_set(QUESTION, PASSAGES)


def test_read_mode_is_checked() -> None:
    with pytest.raises(ConfigurationError, match="passages, set"):
        DefaultDetector(reader=ScriptedVerdictScorer(lambda prompt: 1.0), read="sets")


class SetScorer(ScriptedVerdictScorer):
    """A scripted scorer with ``score_set``: records each set it is asked and returns a hidden state
    of the packaged head's width (its margin: -3 when a passage names the pier, else 3)."""

    def __init__(self, width: int) -> None:
        super().__init__(lambda prompt: 3.0)
        self.width = width
        self.sets: list[int] = []

    def score_set(
        self, prompts: Sequence[Sequence[ChatMessage]], *, template: str = TEMPLATE
    ) -> VerdictScore:
        self.sets.append(len(prompts))
        named = any("Brindlewick pier was" in m[0].content for m in prompts)
        margin = -3.0 if named else 3.0
        return VerdictScore(
            logp_yes=-np.logaddexp(0.0, margin),
            logp_no=-np.logaddexp(0.0, -margin),
            n_tokens=10,
            hidden=np.zeros((1, self.width), dtype=np.float32),
        )


def test_the_default_detector_in_set_mode_reads_the_question_once_for_all_passages() -> None:
    head = DefaultHead.load(default_head_path())
    width = len(head.head.features) - (len(head.signals) - 1)
    scorer = SetScorer(width)
    detector = DefaultDetector(reader=scorer, read="set")
    answered = detector.detect(QUESTION, PASSAGES)
    assert scorer.sets == [3]
    assert answered.llm_calls == 1
    assert "3 passages read as one set" in answered.rationale
    unanswered = detector.detect(QUESTION, PASSAGES[1:])
    assert scorer.sets == [3, 2]
    assert answered.score < unanswered.score


def test_a_set_the_reader_cannot_hold_at_once_is_read_in_halves() -> None:
    """A reader whose state cache holds fewer passages than a check's (DocumentTooLongError) gets
    them in halves; the set that names the pier still answers the question."""

    class Holds2(SetScorer):
        def score_set(
            self, prompts: Sequence[Sequence[ChatMessage]], *, template: str = TEMPLATE
        ) -> VerdictScore:
            if len(prompts) > 2:
                self.sets.append(len(prompts))
                raise DocumentTooLongError("cannot hold them together", n_tokens=300, limit=200)
            return super().score_set(prompts, template=template)

    head = DefaultHead.load(default_head_path())
    scorer = Holds2(len(head.head.features) - (len(head.signals) - 1))
    detector = DefaultDetector(reader=scorer, read="set")
    whole = DefaultDetector(reader=SetScorer(scorer.width), read="set").detect(QUESTION, PASSAGES)
    halves = detector.detect(QUESTION, PASSAGES)
    assert scorer.sets == [3, 1, 2]
    assert halves.label == whole.label and halves.score == pytest.approx(whole.score)


# -- against the real llama.cpp read (the packaged SmolLM2: the plumbing, not the quality) --------


@pytest.fixture(scope="module")
def scorer(smollm2: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts

    return LlamaCppVerdicts(smollm2, n_ctx=1024, state_dir=tmp_path_factory.mktemp("states"), layers=(-1,))


def prompts(question: str, passages: Sequence[str]) -> list[list[ChatMessage]]:
    return [verdict_messages(question, p) for p in passages]


def test_one_passage_read_as_a_set_is_that_passage_read(scorer: Any) -> None:
    alone = scorer.score(verdict_messages(QUESTION, PASSAGES[0]))
    scorer.forget()
    as_set = scorer.score_set(prompts(QUESTION, PASSAGES[:1]))
    assert as_set.margin == pytest.approx(alone.margin, abs=0.05)
    assert as_set.n_tokens == alone.n_tokens
    assert as_set.hidden is not None and as_set.hidden.shape == alone.hidden.shape


def test_a_set_of_known_passages_costs_only_the_question(
    scorer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scopeguard.detection.read import llamacpp

    first = scorer.score_set(prompts(QUESTION, PASSAGES))  # reads and keeps each passage first
    assert np.isfinite(first.margin)
    decoded: list[int] = []
    real = llamacpp.decode

    def counting(llm: Any, ids: Sequence[int], n_past: int, **kw: Any) -> int:
        decoded.append(len(ids))
        return int(real(llm, ids, n_past, **kw))

    monkeypatch.setattr(llamacpp, "decode", counting)
    scorer.forget()
    again = scorer.score_set(prompts(QUESTION, PASSAGES))
    assert again.margin == pytest.approx(first.margin, abs=0.05)  # the same set, joined afresh
    other = "Who painted the Brindlewick pier?"
    scorer.score_set(prompts(other, PASSAGES))
    question_tokens = scorer.count_tokens(other)
    # each set read decoded only its question side: never a passage again
    assert decoded and max(decoded) < question_tokens + 40
    assert again.n_tokens > sum(scorer.count_tokens(p) for p in PASSAGES)


def test_set_reads_refuse_what_they_cannot_read(scorer: Any) -> None:
    with pytest.raises(ConfigurationError):
        scorer.score_set([])
    with pytest.raises(ConfigurationError):
        scorer.score_set([[ChatMessage(role="user", content="Is this a verdict prompt?")]])
    long = [" ".join([p] * 25) for p in PASSAGES]
    with pytest.raises(DocumentTooLongError):
        scorer.score_set(prompts(QUESTION, long))
    # the scorer still reads after a refusal
    assert np.isfinite(scorer.score_set(prompts(QUESTION, PASSAGES[:2])).margin)


def test_a_reader_that_keeps_no_states_cannot_join_them(smollm2: Path) -> None:
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts

    keeps_none = LlamaCppVerdicts(smollm2, n_ctx=1024, state_cache_mb=0, persist_states=False)
    with pytest.raises(ConfigurationError, match="state_cache_mb cannot hold 2 passages"):
        keeps_none.score_set(prompts(QUESTION, PASSAGES[:2]))


def test_a_state_cache_too_small_for_a_set_says_so_as_a_set_too_long(smollm2: Path, tmp_path: Path) -> None:
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts

    sized = LlamaCppVerdicts(smollm2, n_ctx=1024, state_dir=tmp_path / "a", persist_states=False)
    sized.score_set(prompts(QUESTION, PASSAGES))
    per_state = sized._kept.bytes / len(sized._kept)  # each passage's kept state, and the instruction's
    small = LlamaCppVerdicts(
        smollm2,
        n_ctx=1024,
        state_dir=tmp_path / "b",
        persist_states=False,
        state_cache_mb=2.5 * per_state / 2**20,
    )
    with pytest.raises(DocumentTooLongError, match="cannot hold 3 passages together"):
        small.score_set(prompts(QUESTION, PASSAGES))
    assert np.isfinite(small.score_set(prompts(QUESTION, PASSAGES[:2])).margin)  # two fit


def test_a_calibration_profile_fitted_on_passage_reads_does_not_match_set_reads() -> None:
    head = DefaultHead.load(default_head_path())
    scorer = SetScorer(len(head.head.features) - (len(head.signals) - 1))
    passages = DefaultDetector(reader=scorer).identity()
    same_head = DefaultDetector(model=default_head_path(), reader=scorer, read="set").identity()
    assert "read" not in passages
    assert same_head == {**passages, "read": "set"}
    set_head = DefaultDetector(reader=scorer, read="set")  # the packaged head fitted on set reads
    assert set_head.head.layer == head.layer
    assert set_head.identity()["head"] != passages["head"]


def test_bindings_without_shared_sequences_read_passages_and_refuse_sets(
    smollm2: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts
    from scopeguard.llamacpp import _loader

    monkeypatch.setattr(_loader, "supports_sequences", lambda lib=None: False)
    old = LlamaCppVerdicts(smollm2, n_ctx=1024, persist_states=False)
    assert np.isfinite(old.score(verdict_messages(QUESTION, PASSAGES[0])).margin)
    with pytest.raises(ConfigurationError, match="cannot join kept states"):
        old.score_set(prompts(QUESTION, PASSAGES[:2]))


def test_set_reads_from_several_threads_keep_what_they_join(smollm2: Path) -> None:
    """Four threads, room for about one set's states: every set read succeeds (each keeps and joins
    its passages under one hold of the model's lock)."""
    from concurrent.futures import ThreadPoolExecutor

    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts

    tight = LlamaCppVerdicts(smollm2, n_ctx=1024, state_cache_mb=12, persist_states=False)
    sets = [[f"({i}.{j}) {p}" for j, p in enumerate(PASSAGES)] for i in range(4)]

    def read(passages: list[str]) -> float:
        return float(tight.score_set(prompts(QUESTION, passages)).margin)

    with ThreadPoolExecutor(max_workers=4) as pool:
        margins = list(pool.map(read, sets * 2))
    assert all(np.isfinite(m) for m in margins)


def test_a_set_too_long_for_the_context_is_read_in_halves_and_the_lower_score_wins() -> None:
    head = DefaultHead.load(default_head_path())

    class ShortContext(SetScorer):
        def score_set(
            self, prompts: Sequence[Sequence[ChatMessage]], *, template: str = TEMPLATE
        ) -> VerdictScore:
            if len(prompts) > 2:
                self.sets.append(-len(prompts))
                raise DocumentTooLongError("too long for the test's context", n_tokens=9999, limit=4096)
            return super().score_set(prompts, template=template)

    scorer = ShortContext(len(head.head.features) - (len(head.signals) - 1))
    detector = DefaultDetector(reader=scorer, read="set")
    halves = detector.detect(QUESTION, PASSAGES)
    assert scorer.sets == [-3, 1, 2]  # refused whole, then the first passage, then the other two
    assert halves.score == pytest.approx(
        detector.detect(QUESTION, PASSAGES[:1]).score
    )  # the pier's half wins
