"""The public surface is deliberate, checked the httpx way (``tests/test_exported_members.py``).

* A public package's ``__all__`` equals the public names it holds (names without a leading
  underscore, imported modules and ``annotations`` aside): nothing leaks, nothing is missing.
* A public single-file module's ``__all__`` lists every class and function it defines.
* Every module is private (a leading underscore in its path) or listed here: a new module is a
  decision, not an accident.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import typing
from types import ModuleType

import pytest

import scopeguard

# The documented surface: users import from these.
PUBLIC_MODULES = [
    "scopeguard",
    "scopeguard.errors",
    "scopeguard.types",
    "scopeguard.llm",
    "scopeguard.detection",
    "scopeguard.detection.read",
    "scopeguard.detection.signals",
    "scopeguard.detection.head",
    "scopeguard.detection.head.calibration",
    "scopeguard.detection.head.fitting",
    "scopeguard.detection.tune",
    "scopeguard.detection.detectors",
    "scopeguard.policies",
    "scopeguard.testing",
    "scopeguard.data",
    "scopeguard.prompts",
    "scopeguard.retrieval",
    "scopeguard.verification",
    "scopeguard.evaluation",
    "scopeguard.generation",
    "scopeguard.batch",
    "scopeguard.review",
    "scopeguard.scale",
    "scopeguard.models",
    "scopeguard.parsing",
    "scopeguard.voting",
    "scopeguard.llm.deadline",
    "scopeguard.llm.foreign",
    "scopeguard.serve",
    "scopeguard.client",
    "scopeguard.calibration",
    "scopeguard.llamacpp",
    "scopeguard.querylog",
]

# Implementation modules that keep a public path (imported by name in docs, tests, benchmarks or
# other packages); each has an ``__all__``. Renaming one with a leading underscore removes it here.
LISTED_MODULES = [
    "scopeguard.demo",
    "scopeguard.generation.lending",
    "scopeguard.detection.detectors.base",
    "scopeguard.detection.detectors.cascade",
    "scopeguard.detection.detectors.default",
    "scopeguard.detection.detectors.fast",
    "scopeguard.detection.detectors.judge",
    "scopeguard.detection.detectors.learned",
    "scopeguard.detection.detectors.lexical",
    "scopeguard.detection.detectors.logprob",
    "scopeguard.detection.detectors.nli",
    "scopeguard.detection.detectors.probe",
    "scopeguard.detection.detectors.registry",
    "scopeguard.detection.profile",
    "scopeguard.detection.head.card",
    "scopeguard.detection.head.default",
    "scopeguard.detection.head.fast",
    "scopeguard.detection.head.logprob",
    "scopeguard.detection.head.mlp",
    "scopeguard.detection.head.training",
    "scopeguard.detection.read.adapter",
    "scopeguard.detection.read.base",
    "scopeguard.detection.read.embeddings",
    "scopeguard.detection.read.fast",
    "scopeguard.detection.read.features",
    "scopeguard.detection.read.hidden_states",
    "scopeguard.detection.read.llama_prompt",
    "scopeguard.detection.read.llama_states",
    "scopeguard.detection.read.llamacpp",
    "scopeguard.detection.read.llamacpp_probe",
    "scopeguard.detection.read.openai",
    "scopeguard.detection.read.reader",
    "scopeguard.detection.read.scorer",
    "scopeguard.detection.read.text",
    "scopeguard.detection.read.token_encoder",
    "scopeguard.detection.read.transformers",
    "scopeguard.detection.tune.card",
    "scopeguard.detection.tune.config",
    "scopeguard.detection.tune.examples",
    "scopeguard.detection.tune.export",
    "scopeguard.detection.tune.loop",
    "scopeguard.detection.tune.model",
    "scopeguard.detection.tune.train",
    "scopeguard.evaluation.agreement",
    "scopeguard.evaluation.answering",
    "scopeguard.evaluation.compare",
    "scopeguard.evaluation.defusion",
    "scopeguard.evaluation.detection",
    "scopeguard.evaluation.plots",
    "scopeguard.evaluation.refusal",
    "scopeguard.evaluation.report",
    "scopeguard.evaluation.runner",
    "scopeguard.evaluation.store",
    "scopeguard.generation.accounting",
    "scopeguard.generation.batch",
    "scopeguard.generation.cache",
    "scopeguard.generation.checkpoint",
    "scopeguard.generation.config",
    "scopeguard.generation.corpus",
    "scopeguard.generation.eloq_layout",
    "scopeguard.generation.parsers",
    "scopeguard.generation.pipeline",
    "scopeguard.generation.offline",
    "scopeguard.generation.paper",
    "scopeguard.generation.summary",
    "scopeguard.guard",
    "scopeguard.judging",
    "scopeguard.llm.base",
    "scopeguard.llm.concurrency",
    "scopeguard.llm.llama_server",
    "scopeguard.llm.local",
    "scopeguard.llm.openai_compat",
    "scopeguard.llm.registry",
    "scopeguard.retrieval.base",
    "scopeguard.retrieval.bm25",
    "scopeguard.retrieval.dense",
    "scopeguard.retrieval.embedding_cache",
    "scopeguard.retrieval.fusion",
    "scopeguard.retrieval.metrics",
    "scopeguard.retrieval.registry",
    "scopeguard.retrieval.report",
    "scopeguard.retrieval.rerank",
    "scopeguard.retrieval.study",
    "scopeguard.review.agreement",
    "scopeguard.review.server",
    "scopeguard.review.store",
    "scopeguard.runs",
    "scopeguard.verification.guard_result",
    "scopeguard.verification.hybrid",
    "scopeguard.verification.loop",
    "scopeguard.verification.msmarco",
    "scopeguard.verification.parsing",
    "scopeguard.verification.passages",
    "scopeguard.verification.report",
    "scopeguard.verification.run",
    "scopeguard.verification.sampling",
]

# The typer command modules: the CLI is the `scopeguard` command, not an import surface.
CLI_PACKAGE = "scopeguard.cli"


def _is_private(name: str) -> bool:
    return any(part.startswith("_") for part in name.split("."))


def _all_modules() -> set[str]:
    return {
        info.name
        for info in pkgutil.walk_packages(scopeguard.__path__, "scopeguard.")
        if not _is_private(info.name)
    } | {"scopeguard"}


def _leaks(module: ModuleType) -> tuple[set[str], set[str]]:
    """(public names not in ``__all__``, names in ``__all__`` that are not public names)."""
    exported = set(module.__all__) - {"__version__"}
    if hasattr(module, "__path__"):  # a package: every public name it holds
        public = {
            n
            for n, v in vars(module).items()
            if not n.startswith("_") and not inspect.ismodule(v) and n != "annotations"
        }
        return public - exported, exported - public
    defined = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_")
        and (inspect.isclass(v) or inspect.isfunction(v))
        and v.__module__ == module.__name__
    }
    return defined - exported, {n for n in exported if not hasattr(module, n)}


@pytest.mark.parametrize("name", PUBLIC_MODULES + LISTED_MODULES)
def test_all_equals_the_public_names(name: str) -> None:
    module = importlib.import_module(name)
    assert len(module.__all__) == len(set(module.__all__)), "duplicate names in __all__"
    unlisted, missing = _leaks(module)
    assert not missing, f"{name}.__all__ lists names the module does not hold: {sorted(missing)}"
    assert not unlisted, (
        f"{name}: public names outside __all__ (list them, or give them a leading underscore): "
        f"{sorted(unlisted)}"
    )


def test_every_module_is_private_or_listed() -> None:
    found = {m for m in _all_modules() if m != CLI_PACKAGE and not m.startswith(CLI_PACKAGE + ".")}
    listed = set(PUBLIC_MODULES) | set(LISTED_MODULES)
    assert sorted(found - listed) == [], "new modules: name them _private or list them here"
    assert sorted(listed - found) == [], "listed modules that no longer exist (or became private)"


def test_the_check_catches_a_leak() -> None:
    fake = ModuleType("fake_pkg")
    fake.__path__ = []  # type: ignore[attr-defined]
    fake.__all__ = ["kept"]  # type: ignore[attr-defined]
    fake.kept = 1  # type: ignore[attr-defined]
    fake.leaked = 2  # type: ignore[attr-defined]
    fake.__dict__["_private"] = 3
    assert _leaks(fake) == ({"leaked"}, set())


def test_top_level_surface_is_stable() -> None:
    for required in (
        "Guard",
        "Document",
        "Verdict",
        "GuardResult",
        "get_detector",
        "from_spec",
        "ScopeGuardError",
        "CalibrationProfile",
        "load_profile",
        "PrereadJob",
    ):
        assert required in scopeguard.__all__


def test_every_error_derives_from_root() -> None:
    from scopeguard import errors

    classes = [n for n in errors.__all__ if n not in ("ErrorKind", "error_kind", "unknown_options_message")]
    for n in classes:
        assert issubclass(getattr(errors, n), errors.ScopeGuardError)
    # and each names its failure in the one vocabulary
    kinds = set(typing.get_args(errors.ErrorKind))
    assert {getattr(errors, n).kind for n in classes} <= kinds
