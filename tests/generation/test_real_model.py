"""The generator against the real packaged Qwen2.5-Coder-0.5B (llama.cpp, CPU) on one invented document."""

from __future__ import annotations

from pathlib import Path

import pytest

from scopeguard.data import load_dataset
from scopeguard.generation import GenerationConfig, Generator, LengthRule
from scopeguard.generation.checkpoint import CheckpointStore

# An invented document (not news): a fictional town's library reopening.
DOCUMENT = (
    "The public library of Marrow Creek reopened on Saturday after a renovation that lasted fourteen months. "
    "The project cost 3.1 million dollars, most of it paid by the county. "
    "Head librarian Tessa Quill said the building now has a children's reading room, a repair cafe and "
    "twelve new computers. "
    "The old roof, which had leaked since 2016, was replaced with solar panels that should cover half of the "
    "library's electricity. "
    "About four hundred residents attended the opening, and the first book borrowed was a local history of "
    "the creek's mills."
)


@pytest.mark.slow
@pytest.mark.integration
def test_real_local_model_generates_valid_files_and_resumes(local_gguf: Path, tmp_path: Path) -> None:
    from scopeguard.llm.local import LlamaCppChatModel

    llm = LlamaCppChatModel(local_gguf, n_ctx=4096, n_threads=1)  # robust on a shared, oversubscribed CPU
    config = GenerationConfig(
        mode="efficient",
        n_claims=3,
        n_subsets=3,
        rounds=1,
        n_in_scope=2,
        judge_votes=1,
        judge_temperature=0.0,
    )
    rule = LengthRule(min_words=None, max_words=None)
    summary = Generator(llm, config=config, concurrency=1, progress=False).run(
        [{"doc_id": "marrow", "text": DOCUMENT}], tmp_path, length_rule=rule
    )
    record = CheckpointStore(tmp_path).load_all()["marrow"]
    # every reply was either used or recorded with a reason; nothing crashed
    assert summary.docs_done + summary.docs_failed == 1
    assert summary.usage_run.calls >= 3 and summary.usage_run.completion_tokens > 0
    for issue in record.issues:
        # every unusable reply is named; run-level notes (extra rounds, removal skipped) are no replies
        assert issue.reason and (issue.reply_id or issue.step in ("extra_rounds", "remove"))
    if record.status == "done":
        ds = load_dataset(tmp_path) if record.questions else None
        if ds is not None:
            for q in ds.questions:
                assert q.question.endswith("?")
                if q.label == "out_of_scope":
                    prov = q.metadata["provenance"]
                    # auto filter: the fast detector for the small packaged model (no LLM votes)
                    assert prov["hallucinated_claim"] and prov["filter"]["label"] == "out_of_scope"
                    assert prov["filter"]["detector"] == "fast"
    again = Generator(llm, config=config, concurrency=1, progress=False).run(
        [{"doc_id": "marrow", "text": DOCUMENT}], tmp_path, length_rule=rule
    )
    assert again.usage_run.calls == 0 and again.docs_resumed == 1
