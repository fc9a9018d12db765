"""Screens registered by name: a new screen is one function and one registration, and runs by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from scopeguard.errors import ConfigurationError
from scopeguard.generation.checkpoint import CheckpointStore
from scopeguard.generation.config import DEFAULT_SCREENS
from scopeguard.generation.offline import (
    OUT_OF_SCOPE,
    Candidate,
    DocumentView,
    _screens,
    available_screens,
    get_screens,
    register_screen,
)
from tests.generation.test_offline import CONFIG, DOC, RULE, _generator


@pytest.fixture(autouse=True)
def _own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test registers into a copy of the registry, dropped after it."""
    monkeypatch.setattr(_screens, "_SCREENS", dict(_screens._SCREENS))


def test_the_built_in_screens_are_registered_in_the_default_order() -> None:
    assert available_screens() == list(DEFAULT_SCREENS)
    assert [s.name for s in get_screens(DEFAULT_SCREENS)] == list(DEFAULT_SCREENS)


def test_a_registered_screen_runs_by_name_and_drops_with_its_reason(tmp_path: Path) -> None:
    seen: list[str] = []

    @register_screen("no_council", kinds=OUT_OF_SCOPE)
    def no_council(candidate: Candidate, view: DocumentView) -> str | None:
        seen.append(candidate.kind)
        return "asks about the council" if "council" in candidate.question.lower() else None

    assert available_screens()[-1] == "no_council"
    gen, _ = _generator(CONFIG.model_copy(update={"screens": (*DEFAULT_SCREENS, "no_council")}))
    gen.run([{"doc_id": "wrenfield", "text": DOC}], tmp_path / "with", length_rule=RULE)
    record = CheckpointStore(tmp_path / "with").load_all()["wrenfield"]
    dropped = [
        d.question for d in record.dropped if d.reason == "not a usable question: asks about the council"
    ]
    oos = [q.question for q in record.questions if q.label == "out_of_scope"]
    # it read only out-of-scope candidates, and dropped those asking about the council
    assert seen and set(seen) <= OUT_OF_SCOPE
    assert dropped and all("council" in q.lower() for q in dropped)
    assert not any("council" in q.lower() for q in oos)

    # not named in the config, it does not run
    gen, _ = _generator(CONFIG)
    seen.clear()
    gen.run([{"doc_id": "wrenfield", "text": DOC}], tmp_path / "without", length_rule=RULE)
    record = CheckpointStore(tmp_path / "without").load_all()["wrenfield"]
    assert not seen and any("council" in q.question.lower() for q in record.questions)


def test_an_unknown_screen_names_the_registered_ones_when_the_generator_is_built() -> None:
    register_screen("mine", kinds={"unstated"})(lambda c, v: None)
    with pytest.raises(
        ConfigurationError, match=r"unknown screen\(s\) 'theirs'; valid names: .*answered, mine$"
    ):
        _generator(CONFIG.model_copy(update={"screens": ("theirs",)}))


def test_a_screen_needs_a_name_and_a_kind() -> None:
    with pytest.raises(ConfigurationError, match="name must not be empty"):
        register_screen("", kinds=OUT_OF_SCOPE)
    with pytest.raises(ConfigurationError, match="'nothing' applies to no kind"):
        register_screen("nothing", kinds=())
