"""Log-prob verdicts against real models: llama.cpp in-process, a llama.cpp server, transformers."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from scopeguard.detection.detectors.logprob import LogProbDetector
from scopeguard.detection.read.reader import verdict_messages

pytestmark = [pytest.mark.slow, pytest.mark.integration]

DOC = (
    "The Brindlewick library opened in March 2019. The building cost 4 million pounds and was "
    "designed by the local firm Harrow & Pike. Its roof carries 300 solar panels."
)
QUESTIONS = ("How much did the Brindlewick library cost?", "Who was the first head librarian of Brindlewick?")


def test_llamacpp_prefix_cache_gives_the_same_scores_as_a_fresh_read(smollm2: Path) -> None:
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts

    warm = LlamaCppVerdicts(smollm2, n_threads=1, n_ctx=1024)
    scores = [warm.score(verdict_messages(q, DOC)) for q in QUESTIONS]  # the second reuses the document
    fresh = LlamaCppVerdicts(smollm2, n_threads=1, n_ctx=1024).score(verdict_messages(QUESTIONS[1], DOC))
    for s in scores:
        assert math.isfinite(s.margin) and 0.0 < s.coverage <= 1.0 + 1e-6 and s.n_tokens > 50
    assert scores[1].margin == pytest.approx(fresh.margin, abs=0.05)
    assert warm.name == smollm2.stem  # a path is named by its file; "smollm2" by that name
    # as a detector: a verdict with a score and one read
    v = LogProbDetector(reader=f"local:{smollm2}").detect(QUESTIONS[0], DOC)
    assert v.label in ("in_scope", "out_of_scope") and v.score is not None and v.llm_calls == 1


OTHER_DOC = (
    "The Harrow ferry crosses the estuary every forty minutes. Tickets cost 3 euros for adults and "
    "the crossing takes twelve minutes in calm weather."
)


def test_llamacpp_saved_states_reuse_a_document_read_before_another(smollm2: Path) -> None:
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts

    cached = LlamaCppVerdicts(smollm2, n_threads=1, n_ctx=1024)
    order = [(QUESTIONS[0], DOC), (QUESTIONS[0], OTHER_DOC), (QUESTIONS[1], DOC), (QUESTIONS[1], OTHER_DOC)]
    got = [cached.score(verdict_messages(q, d)).margin for q, d in order]
    assert len(cached._kept) == 4 and 0 < cached._kept.bytes <= cached.state_cache_bytes
    uncached = LlamaCppVerdicts(smollm2, n_threads=1, n_ctx=1024, state_cache_mb=0)
    fresh = [uncached.score(verdict_messages(q, d)).margin for q, d in order[2:]]
    assert got[2:] == pytest.approx(fresh, abs=0.05)
    # a budget smaller than one state keeps none, and scoring still works
    tiny = LlamaCppVerdicts(smollm2, n_threads=1, n_ctx=1024, state_cache_mb=0.01)
    assert tiny.score(verdict_messages(*order[0])).margin == pytest.approx(got[0], abs=0.05)
    assert not len(tiny._kept)
    with pytest.raises(ValueError, match="state_cache_mb"):
        LlamaCppVerdicts(smollm2, state_cache_mb=-1)


def test_llamacpp_primed_instruction_is_read_from_disk_by_the_next_process(
    smollm2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scopeguard.detection.read import llamacpp as module
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts
    from scopeguard.detection.read.reader import _DOCUMENT_SLOT

    def primed(scorer: LlamaCppVerdicts) -> int:
        return scorer.prime(verdict_messages("?", _DOCUMENT_SLOT), upto=_DOCUMENT_SLOT)

    fresh = LlamaCppVerdicts(smollm2, n_threads=1, n_ctx=1024, state_cache_mb=0, persist_states=False)
    expected = [fresh.score(verdict_messages(q, DOC)).margin for q in QUESTIONS]
    first = LlamaCppVerdicts(smollm2, n_threads=1, n_ctx=1024, state_dir=tmp_path)
    n = primed(first)
    (state,) = tmp_path.iterdir()  # one file: the instruction's state
    assert n > 50 and state.stat().st_size > 0
    # a new scorer (as in a new process) loads it instead of decoding the instruction
    second = LlamaCppVerdicts(smollm2, n_threads=1, n_ctx=1024, state_dir=tmp_path)
    second.load()
    decoded: list[tuple[int, int]] = []
    real_decode = module.decode

    def counting(llm: object, ids: list[int], n_past: int, **kw: bool) -> int:
        decoded.append((len(ids), n_past))
        return real_decode(llm, ids, n_past, **kw)

    monkeypatch.setattr(module, "decode", counting)
    assert primed(second) == n and decoded == []
    got = [second.score(verdict_messages(q, DOC)).margin for q in QUESTIONS]
    assert decoded[0][1] == n  # the first prompt is read from the end of the instruction on
    assert got == pytest.approx(expected, abs=1e-3)
    # a state llama.cpp refuses is dropped (file too) and the prompt read afresh, same scores
    state.write_bytes(b"\x01" * 64)
    third = LlamaCppVerdicts(smollm2, n_threads=1, n_ctx=1024, state_dir=tmp_path)
    assert primed(third) == n
    assert third.score(verdict_messages(QUESTIONS[0], DOC)).margin == pytest.approx(expected[0], abs=1e-3)
    assert not state.exists()


def test_preread_documents_cost_later_questions_only_their_own_tokens(
    smollm2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scopeguard.detection.read import llamacpp as module
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts

    def detector(**kw: object) -> LogProbDetector:
        return LogProbDetector(reader=LlamaCppVerdicts(smollm2, n_threads=1, n_ctx=1024, **kw))  # type: ignore[arg-type]

    fresh = detector(state_cache_mb=0, persist_states=False)
    expected = [fresh.reader.read(q, [DOC])[0].margin for q in QUESTIONS]
    assert detector(state_dir=tmp_path).preread([DOC, OTHER_DOC], progress=False) == 2
    assert len(list(tmp_path.iterdir())) == 3  # the instruction's state and one per document
    # a new detector (as in a new process) reads only each question's tokens after the document
    later = detector(state_dir=tmp_path)
    later.load()
    decoded: list[tuple[int, int]] = []
    scorer = later.scorer
    real_decode = module.decode

    def counting(llm: object, ids: list[int], n_past: int, **kw: bool) -> int:
        decoded.append((len(ids), n_past))
        return real_decode(llm, ids, n_past, **kw)

    monkeypatch.setattr(module, "decode", counting)
    got = [later.reader.read(q, [DOC])[0].margin for q in QUESTIONS]
    assert got == pytest.approx(expected, abs=1e-3)
    n_doc = scorer.count_tokens(DOC)
    assert decoded and all(past > n_doc and n < 40 for n, past in decoded), decoded
    # answering about a document nobody pre-read writes no state file
    later.reader.read(QUESTIONS[0], ["A third document about the Kessling harbour and its two cranes."])
    assert len(list(tmp_path.iterdir())) == 3


@pytest.mark.timeout(300)
def test_q8_0_states_are_half_the_bytes_restore_as_read_and_stay_apart_from_f16(
    smollm2: Path, tmp_path: Path
) -> None:
    """#60 item 2: a q8_0 KV cache's saved states, per token about half an f16 one's (34 bytes per 32
    values against 64), give a new reader the scores of a fresh q8_0 read; an f16 reader never
    restores them (the type is in the key), and the lookups find the pre-read document."""
    from scopeguard.detection.read.llama_states import saved_states_summary
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts

    def detector(kv: str, **kw: object) -> LogProbDetector:
        return LogProbDetector(reader=LlamaCppVerdicts(smollm2, n_threads=1, n_ctx=1024, kv_type=kv, **kw))  # type: ignore[arg-type]

    fresh = detector("q8_0", state_cache_mb=0, persist_states=False)
    expected = [fresh.reader.read(q, [DOC])[0].margin for q in QUESTIONS]
    for kv in ("q8_0", "f16"):
        assert detector(kv, state_dir=tmp_path).preread([DOC], progress=False) == 1
    summary = saved_states_summary(tmp_path)
    assert (
        summary.kv_types["q8_0"][0] == summary.kv_types["f16"][0] == 2
    )  # the instruction's and the document's
    q8, f16 = summary.bytes_per_token("q8_0"), summary.bytes_per_token("f16")
    assert q8 is not None and f16 is not None and 0.5 < q8 / f16 < 0.6
    later = detector("q8_0", state_dir=tmp_path)
    scorer = later.scorer
    assert isinstance(scorer, LlamaCppVerdicts) and scorer.kv_type == "q8_0"
    got = [later.reader.read(q, [DOC])[0].margin for q in QUESTIONS]
    assert got == pytest.approx(expected, abs=0.02)
    stats = scorer.state_stats()
    assert (stats.kv_type, stats.lookups, stats.hits, stats.hit_rate) == ("q8_0", 2, 2, 1.0)
    assert stats.saved is not None and stats.saved.files == 4
    # an f16 reader of a folder of q8_0 states finds none of them (and removes none): it reads afresh
    only_q8 = tmp_path / "q8_0"
    only_q8.mkdir()
    for file in tmp_path.glob("*-q8_0-*.state"):
        file.rename(only_q8 / file.name)
    other = detector("f16", state_dir=only_q8)
    margin = other.reader.read(QUESTIONS[0], [DOC])[0].margin
    assert (other.scorer.state_stats().lookups, other.scorer.state_stats().hits) == (1, 0)  # type: ignore[attr-defined]
    f16_fresh = detector("f16", state_cache_mb=0, persist_states=False).reader.read(QUESTIONS[0], [DOC])[0]
    assert margin == pytest.approx(f16_fresh.margin, abs=0.02)
    # the q8_0 states are all there; the f16 reader kept its own instruction's beside them
    assert saved_states_summary(only_q8).kv_types["q8_0"] == summary.kv_types["q8_0"]


def test_llamacpp_server_logprobs_match_the_in_process_model(llama_server: str, local_gguf: Path) -> None:
    from scopeguard.detection.read import verdict_scorer
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts
    from scopeguard.llm.openai_compat import OpenAIChatModel

    remote = verdict_scorer(OpenAIChatModel("local", base_url=llama_server))
    local = LlamaCppVerdicts(local_gguf, n_threads=1)
    for q in QUESTIONS:
        a = remote.score(verdict_messages(q, DOC))
        b = local.score(verdict_messages(q, DOC))
        assert math.isfinite(a.margin)
        assert a.margin == pytest.approx(b.margin, abs=0.5), q


def test_transformers_backend_batches_like_single_prompts(smollm2: Path) -> None:
    pytest.importorskip("transformers", reason="needs scopeguard[probe]")
    pytest.importorskip("gguf", reason="needs scopeguard[probe]")
    from scopeguard.detection.read.transformers import TransformersVerdicts

    scorer = TransformersVerdicts(str(smollm2), device="cpu", batch_size=2)
    prompts = [verdict_messages(q, DOC) for q in QUESTIONS]
    batched = scorer.score_many(prompts, progress=False)
    single = [scorer.score(p) for p in prompts]
    for a, b in zip(batched, single, strict=True):
        assert a.margin == pytest.approx(b.margin, abs=1e-3)
        assert 0.0 < a.coverage <= 1.0 + 1e-6


def test_transformers_backend_returns_the_hidden_states_llama_cpp_does(smollm2: Path) -> None:
    pytest.importorskip("transformers", reason="needs scopeguard[probe]")
    pytest.importorskip("gguf", reason="needs scopeguard[probe]")
    import numpy as np

    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts
    from scopeguard.detection.read.transformers import TransformersVerdicts

    scorer = TransformersVerdicts(str(smollm2), device="cpu", batch_size=2, layers=(-1, 2))
    prompts = [verdict_messages(q, DOC) for q in QUESTIONS]
    batched = scorer.score_many(prompts, progress=False)
    single = [scorer.score(p) for p in prompts]
    for a, b in zip(batched, single, strict=True):
        assert a.hidden is not None and b.hidden is not None and a.hidden.shape == (2, b.hidden.shape[1])
        assert np.allclose(a.hidden, b.hidden, atol=1e-2 * float(np.abs(b.hidden).max()))
    # the same layers, read by llama.cpp from its quantised weights
    local = LlamaCppVerdicts(smollm2, n_threads=1, n_ctx=1024, layers=(-1, 2), persist_states=False)
    assert local.layers == scorer.layers
    there = local.score(prompts[0]).hidden
    assert there is not None
    for a, b in zip(single[0].hidden, there, strict=True):
        assert np.corrcoef(a, b)[0, 1] > 0.9
