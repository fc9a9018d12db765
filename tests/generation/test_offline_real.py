"""The offline mode against real packaged models: Qwen2.5-Coder-0.5B writes, the logprob detector keeps.

One news document of the ELOQ dev split (read from ../shared at run time; skipped when absent),
one thread each, a small configuration: the grammar must make every reply of the smallest writer
``--llm local`` installs parse, and every kept question must satisfy the keep rule with the real
detector's scores. (SmolLM2-135M's replies parse too, but are questions about no sentence, "What is
the answer to this question?", which the in-scope step drops: nothing would be left to test.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scopeguard.data import load_dataset, read_jsonl
from scopeguard.generation import GenerationConfig, Generator
from scopeguard.generation.checkpoint import CheckpointStore


@pytest.mark.slow
@pytest.mark.integration
def test_the_smallest_packaged_writer_parses_every_reply_and_keeps_by_the_rule(
    local_gguf: Path, dev_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scopeguard.detection.detectors import get_detector
    from scopeguard.llm.local import LlamaCppChatModel

    monkeypatch.setenv("SCOPEGUARD_N_THREADS", "1")  # the detector's 1.5B model too
    doc = next(iter(read_jsonl(dev_data_dir / "documents.jsonl")))
    llm = LlamaCppChatModel(local_gguf, n_ctx=4096, n_threads=1)
    config = GenerationConfig(
        mode="offline",
        n_in_scope=1,
        followups=2,
        min_oos=0,  # no target to top up to: both prompts asked, whatever the unstated questions keep
        extra_rounds=0,
    )
    detector = get_detector("logprob")
    summary = Generator(llm, config=config, judge=detector, progress=False).run(
        [{"doc_id": doc["doc_id"], "text": doc["text"]}], tmp_path
    )
    record = CheckpointStore(tmp_path).load_all()[doc["doc_id"]]
    assert record.status == "done", record.error
    # constrained output: the 0.5B model's questions all parse (no unusable reply, no retry). Its
    # subject may not: the grammar holds it to one line of 80 characters, the parser to 8 words,
    # and greedy decoding differs between CPUs (on an AMD EPYC the 0.5B named this article in 12
    # words, twice, on an Intel Xeon in a few): then the subject is dropped, as designed, after its
    # one retry, and the unstated questions ask about what each sentence names
    subject = [i for i in record.issues if i.step == "subject"]
    assert all(i.reason == "no_subject" and not i.accepted for i in subject)
    # (a document short of min_oos filled from within the margin is noted too, accepted: how many
    # the 0.5B's questions keep differs between machines as its greedy replies do)
    unparsed = [i for i in record.issues if (not i.accepted or i.reason == "accepted_lenient")]
    assert [i for i in unparsed if i.step != "subject"] == []
    # 3 in-scope calls, the document's subject (and its retry), 3 out-of-scope ones (one a
    # sentence each), one follow-up call
    assert summary.usage_run.calls == 8 + min(len(subject), config.retries)
    candidates = len(record.questions) + len(record.dropped)
    assert candidates >= 3  # at least the in-scope candidates, each kept or dropped with a reason
    min_score = detector.threshold + config.oos_margin
    for q in record.questions:
        assert q.question.endswith("?") and q.filter is not None and q.filter.detector == "logprob"
        if q.label == "out_of_scope":
            assert q.overlap is not None and q.overlap >= config.min_overlap
            # the keep rule: P(out of scope) past the threshold plus the margin; one filled into a
            # short document past the threshold alone; one asking a detail its
            # document states none of whatever the filter says
            floor = detector.threshold if q.filled else min_score
            assert q.absent_detail or (q.filter.score is not None and q.filter.score >= floor)
            assert q.edit_kind in ("unstated", "followup")
        else:
            assert q.filter.label == "in_scope"
    for d in record.dropped:
        assert d.reason  # every dropped candidate says why
    assert record.questions  # the 0.5B writes questions about the sentences it is shown
    assert {q.doc_id for q in load_dataset(tmp_path).questions} == {doc["doc_id"]}
