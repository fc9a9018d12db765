"""Shared fixtures: the dev dataset, the packaged local model, and a real llama.cpp server.

Heavy resources are created once per session. Anything missing skips the tests that need it,
with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# llama.cpp's and torch's OpenMP threads spin while they wait; on a busy machine (CI beside other
# jobs, or a test beside a training run) spinning threads of one library starve the other's: a
# 58-token SmolLM2 read took 7.9 s instead of 0.48 s beside a torch job. Waiting threads sleep instead.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

DEV_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "eloq-gold-dev"


@pytest.fixture(scope="session")
def dev_data_dir() -> Path:
    """The ELOQ gold dev split in ../shared (skips when absent; never copied into the repo)."""
    path = Path(os.environ.get("SCOPEGUARD_DEV_DATA", DEV_DATA))
    if not (path / "questions.jsonl").is_file():
        pytest.skip(f"dev dataset not found at {path}")
    return path


def _packaged_gguf(name: str | None = None) -> Path:
    """A packaged GGUF (default: the library's default model), or a skip naming what is missing."""
    pytest.importorskip("llama_cpp", reason="needs scopeguard[local]")
    from scopeguard.errors import ModelError
    from scopeguard.models import local_gguf as resolve

    try:
        return resolve() if name is None else resolve(name)
    except ModelError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def local_gguf() -> Path:
    """The packaged Qwen2.5-Coder-0.5B GGUF, assembled and checksum-verified once."""
    return _packaged_gguf()


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """The packaged SmolLM2-135M GGUF (93 MB): the fastest real model, for plumbing tests."""
    return _packaged_gguf("smollm2")


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real llama-cpp-python OpenAI-compatible server on 127.0.0.1; yields its base URL."""
    from scopeguard.testing import packaged_llama_server

    with packaged_llama_server(tmp_path_factory.mktemp("llama-server")) as base_url:
        yield base_url


@pytest.fixture
def reading_detector(monkeypatch: pytest.MonkeyPatch) -> Callable[[str, Callable[[], Any]], list[Any]]:
    """``register(name, make)``: registers, for this test only, a detector that reads (its entry says
    so) whose factory builds ``make()``; returns the list of reading models it is given, in order."""
    from scopeguard.detection.detectors import register_detector, registry

    monkeypatch.setattr(registry, "_DETECTORS", dict(registry._DETECTORS))

    def register(name: str, make: Callable[[], Any]) -> list[Any]:
        given: list[Any] = []

        def factory(*, reader: Any = None) -> Any:
            given.append(reader)
            return make()

        register_detector(name, factory, reader=True)
        return given

    return register
