"""Every shipped prompt template renders exactly as its committed snapshot.

A prompt change is a behaviour change: it must show up in review as a snapshot diff. To accept a
deliberate change, run ``SCOPEGUARD_UPDATE_SNAPSHOTS=1 python -m pytest tests/prompts`` and commit
the files under ``tests/prompts/snapshots/``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jinja2.meta
import pytest

from scopeguard import Document
from scopeguard.errors import ConfigurationError
from scopeguard.prompts import available_templates, render
from scopeguard.prompts._render import _env

SNAPSHOTS = Path(__file__).parent / "snapshots"

# One value per variable name used by any template (invented text only).
POOL: dict[str, Any] = {
    "document": "The ferry Kestrel carries 180 passengers across the bay in 35 minutes.",
    "documents": [
        Document(id="ferry", text="The Kestrel carries 180 passengers."),
        Document(id="pier", text="The pier."),
    ],
    "question": "Which shipyard built the Kestrel?",
    "response": "The document does not say which shipyard built the Kestrel.",
    "uncovered": ["shipyard", "built"],
    "rationale": "",
    "n": 3,
    "firm": False,
    "facts": ["The Kestrel carries 180 passengers.", "(missing)", "The crossing takes 35 minutes."],
    "missing": [2],
    "true_facts": ["The Kestrel carries 180 passengers.", "The crossing takes 35 minutes."],
    "false_facts": ["The Kestrel was built in Norway.", "The Kestrel carries 180 passengers."],
    "passage": "The ferry Kestrel carries 180 passengers across the bay in 35 minutes.",
    "llm_answer": "It carries 200 passengers.",
    "retriever_answer": "180 passengers.",
    "evidence_id": "ferry#p0",
    "questions": ["How many passengers does the Kestrel carry?", "How long does the crossing take?"],
    "kinds": ["negation", "entity_swap", "other_neutral"],
    "example": 1,
    "sentence": "The Kestrel carries 180 passengers across the bay in 35 minutes.",
    "subject": "the ferry Kestrel",
    "kind": "place",
    "asked": ["Who built the Kestrel?", "When was the Kestrel launched?"],
    "subject_kinds": ("product", "place", "book", "film", "person", "event", "other"),
    "text": "The ferry Kestrel carries 180 passengers across the bay in 35 minutes. It sails hourly.",
}


def _variables(name: str) -> set[str]:
    env = _env()
    source = env.loader.get_source(env, f"{name}.j2")[0]
    return set(jinja2.meta.find_undeclared_variables(env.parse(source)))


@pytest.mark.parametrize("name", available_templates())
def test_template_matches_snapshot(name: str) -> None:
    missing = _variables(name) - set(POOL)
    assert not missing, f"add values for {sorted(missing)} to POOL in {__file__}"
    rendered = render(name, **{k: POOL[k] for k in _variables(name)}) + "\n"
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("SCOPEGUARD_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(rendered, encoding="utf-8")
    assert path.is_file(), f"no snapshot for template {name!r}: run with SCOPEGUARD_UPDATE_SNAPSHOTS=1"
    assert rendered == path.read_text(encoding="utf-8")


# Other renderings of a template, each pinned by a snapshot of its own, ``NAME.VARIANT.txt``
# (a subject of a kind without hints of its own gets the one list; the first round is shown no
# questions asked).
VARIANTS: dict[tuple[str, str], dict[str, Any]] = {
    ("gen_unstated_question", "other-kind"): {"kind": "other"},
    ("gen_unstated_question", "first-round"): {"asked": []},
}


@pytest.mark.parametrize(("name", "variant"), list(VARIANTS))
def test_template_variant_matches_snapshot(name: str, variant: str) -> None:
    values = {**{k: POOL[k] for k in _variables(name)}, **VARIANTS[name, variant]}
    rendered = render(name, **values) + "\n"
    path = SNAPSHOTS / f"{name}.{variant}.txt"
    if os.environ.get("SCOPEGUARD_UPDATE_SNAPSHOTS") == "1":
        path.write_text(rendered, encoding="utf-8")
    assert path.is_file(), f"no snapshot for {name!r} {variant}: run with SCOPEGUARD_UPDATE_SNAPSHOTS=1"
    assert rendered == path.read_text(encoding="utf-8")


def test_paper_templates_cite_their_source() -> None:
    cited = {
        "oos_judgement": "B.3",
        "rag_basic": "B.6",
        "rag_zero_shot_cot": "B.8",
        "gen_extract_claims": "B.1",
        "gen_recover_claims": "B.2",
        "gen_remove_claims": "B.11",
        "gen_oos_questions": "B.10",
        "gen_in_scope_questions": "B.9",
    }
    env = _env()
    for name, section in cited.items():
        header = env.loader.get_source(env, f"{name}.j2")[0].split("#}")[0]
        assert "ELOQ" in header and section in header, name


def test_template_examples_are_every_string_a_template_sets() -> None:
    from scopeguard.prompts import template_examples

    perturb = template_examples("gen_perturb_question")
    assert "When did the council of Alderby approve the harbour plan?" in perturb
    assert "Who scored the winning goal for Hale Rovers in the cup final?" in perturb
    assert list(perturb) == sorted(perturb, key=lambda s: (-len(s), s))  # longest first
    assert template_examples("gen_unstated_question") == ()  # no example to copy
    assert any("Brackwater" in s for s in template_examples("gen_remove_claims"))
    with pytest.raises(ConfigurationError, match="unknown prompt template"):
        template_examples("no_such_template")
