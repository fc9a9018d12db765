"""The README's main job: ``scopeguard demo`` with the shipped default detector (real models)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_demo_decides_every_question_as_expected() -> None:
    pytest.importorskip("llama_cpp", reason="needs scopeguard[local]")
    pytest.importorskip("sentence_transformers", reason="needs scopeguard[embeddings]")
    from scopeguard.demo import iter_demo

    steps: list[str] = []
    cases = list(iter_demo(detector="default", policy="clarify", llm=None, progress=steps.append))
    assert any("reading model" in s for s in steps)  # progress is reported while models load
    assert any("pre-reading the 4 documents" in s for s in steps)
    got = [(c.question, c.result.verdict.label) for c in cases]
    assert got == [(c.question, c.expected) for c in cases]
    for c in cases:
        v = c.result.verdict
        assert v.detector == "default" and v.stage == "read"
        if v.label == "in_scope":
            assert not v.uncovered and c.result.action.value == "answered"
        else:
            assert c.result.action.value == "clarified"
