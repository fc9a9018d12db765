"""The public surface is deliberate: everything in ``__all__`` exists and nothing else is promised."""

import importlib

import pytest

PUBLIC_MODULES = [
    "scopeguard",
    "scopeguard.errors",
    "scopeguard.types",
    "scopeguard.llm",
    "scopeguard.detectors",
    "scopeguard.policies",
    "scopeguard.testing",
    "scopeguard.data",
    "scopeguard.prompts",
    "scopeguard.retrieval",
    "scopeguard.verification",
    "scopeguard.evaluation",
    "scopeguard.generation",
    "scopeguard.review",
    "scopeguard.models",
    "scopeguard.parsing",
    "scopeguard.voting",
    "scopeguard.verdicts",
    "scopeguard.calibration",
    "scopeguard.fitting",
    "scopeguard.signals",
    "scopeguard.llm.deadline",
    "scopeguard.llm.foreign",
]


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_names_exist_and_are_sorted_unique(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert len(exported) == len(set(exported)), "duplicate names in __all__"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ lists missing names: {missing}"


def test_top_level_surface_is_stable() -> None:
    import scopeguard

    for required in (
        "Guard",
        "Document",
        "Verdict",
        "GuardResult",
        "get_detector",
        "from_spec",
        "ScopeGuardError",
    ):
        assert required in scopeguard.__all__


def test_every_error_derives_from_root() -> None:
    from scopeguard import errors

    for n in errors.__all__:
        assert issubclass(getattr(errors, n), errors.ScopeGuardError)
