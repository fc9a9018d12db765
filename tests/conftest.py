"""Shared fixtures: the dev dataset, the packaged local model, and a real llama.cpp server.

Heavy resources are created once per session. Anything missing skips the tests that need it,
with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DEV_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "eloq-gold-dev"


@pytest.fixture(scope="session")
def dev_data_dir() -> Path:
    """The ELOQ gold dev split in ../shared (skips when absent; never copied into the repo)."""
    path = Path(os.environ.get("SCOPEGUARD_DEV_DATA", DEV_DATA))
    if not (path / "questions.jsonl").is_file():
        pytest.skip(f"dev dataset not found at {path}")
    return path


@pytest.fixture(scope="session")
def local_gguf() -> Path:
    """The packaged Qwen2.5-Coder-0.5B GGUF, assembled and checksum-verified once."""
    pytest.importorskip("llama_cpp", reason="needs scopeguard[local]")
    from scopeguard.errors import ModelError
    from scopeguard.models import local_gguf as resolve

    try:
        return resolve()
    except ModelError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def llama_server(local_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real llama-cpp-python OpenAI-compatible server on 127.0.0.1; yields its base URL."""
    pytest.importorskip("llama_cpp.server", reason="needs llama-cpp-python[server]")
    from scopeguard.errors import ModelError
    from scopeguard.llm.llama_server import llama_cpp_server

    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    threads = int(os.environ.get("SCOPEGUARD_N_THREADS", "2"))
    try:
        with llama_cpp_server(local_gguf, n_ctx=4096, n_threads=threads, log=log) as base_url:
            yield base_url
    except ModelError as exc:
        pytest.fail(str(exc))
