"""Importing the CLI and the jobs loads no heavy optional library: the openai SDK (Batch API, OpenAI
models) and torch (embeddings, probes) load when a run needs them, so `scopeguard --help` and an
online run on a fake model stay light (#18: nothing changes the default single-machine path)."""

from __future__ import annotations

import subprocess
import sys

import pytest

MODULES = (
    "scopeguard",
    "scopeguard.cli._app",
    "scopeguard.generation.pipeline",
    "scopeguard.evaluation.runner",
    "scopeguard.verification.run",
    "scopeguard.batch",
)


@pytest.mark.parametrize("module", MODULES)
def test_importing_loads_neither_openai_nor_torch(module: str) -> None:
    heavy = "print(','.join(m for m in ('openai', 'torch') if m in sys.modules))"
    code = f"import importlib, sys; importlib.import_module({module!r}); {heavy}"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
