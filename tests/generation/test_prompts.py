"""The generator's prompt templates: the paper's wording, real counts, and the firm retry line."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from scopeguard.prompts import render

GEN_TEMPLATES = [
    "gen_extract_claims",
    "gen_recover_claims",
    "gen_remove_claims",
    "gen_oos_questions",
    "gen_in_scope_questions",
]


@pytest.mark.parametrize("name", GEN_TEMPLATES)
def test_templates_cite_their_source(name: str) -> None:
    source = resources.files("scopeguard.prompts").joinpath(f"{name}.j2").read_text(encoding="utf-8")
    assert source.startswith("{#") and "ELOQ" in source.split("#}")[0]


def test_extract_prompt_is_the_papers_with_the_count() -> None:
    p = render("gen_extract_claims", document="Some text.", n=6, firm=False)
    assert "list 6 most important facts it contains" in p and p.endswith("6 most important facts:")
    assert "could not be used" not in p
    assert "EXACTLY 6 facts" in render("gen_extract_claims", document="Some text.", n=6, firm=True)


def test_recover_prompt_shows_the_masked_list_not_the_document() -> None:
    p = render("gen_recover_claims", facts=["A.", "(missing)", "C."], n=3, firm=False)
    assert '"""\n1. A.\n2. (missing)\n3. C.\n"""' in p
    assert "You must return all the 3 facts." in p and p.endswith("Completed list of facts:")


def test_remove_prompt_counts_are_computed_and_the_example_is_our_own() -> None:
    p = render(
        "gen_remove_claims",
        document="Doc.",
        true_facts=["T1.", "T2."],
        false_facts=["F1.", "F2.", "F3."],
        firm=False,
    )
    assert "Brackwater" in p  # the invented one-shot example
    assert "list of 4 ground-truth facts" in p and "list of 5 hallucinated facts" in p  # the example's counts
    assert "list of 2 ground-truth facts" in p and "list of 3 hallucinated facts" in p  # the real counts
    assert "Remaining hallucinated facts:\n2. " in p  # the example answer keeps original numbers
    assert p.endswith("Remaining hallucinated facts:")


def test_question_prompts() -> None:
    oos = render("gen_oos_questions", document="Doc.", facts=["F1.", "F2."], firm=False)
    assert "13 to 18 words" in oos and "1. F1.\n2. F2." in oos
    ins = render("gen_in_scope_questions", document="Doc.", n=3, firm=False)
    assert "top 3 questions that the document directly answers" in ins


SNAPSHOT_DIR = Path(__file__).with_name("snapshots")
SNAPSHOT_VARS: dict[str, dict[str, object]] = {
    "gen_extract_claims": {"document": "DOC", "n": 6},
    "gen_recover_claims": {"facts": ["F1.", "(missing)", "F3."], "n": 3},
    "gen_remove_claims": {
        "document": "DOC",
        "true_facts": ["T1.", "T2."],
        "false_facts": ["H1.", "H2.", "H3."],
    },
    "gen_oos_questions": {"document": "DOC", "facts": ["H1.", "H2."]},
    "gen_in_scope_questions": {"document": "DOC", "n": 3},
}


@pytest.mark.parametrize("firm", [False, True])
@pytest.mark.parametrize("name", sorted(SNAPSHOT_VARS))
def test_rendered_prompts_match_their_snapshots(name: str, firm: bool) -> None:
    """A prompt change must be deliberate: update tests/generation/snapshots/ with it."""
    rendered = render(name, firm=firm, **SNAPSHOT_VARS[name])
    path = SNAPSHOT_DIR / f"{name}{'.firm' if firm else ''}.txt"
    assert rendered == path.read_text(encoding="utf-8")
