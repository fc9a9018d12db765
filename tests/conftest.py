"""Shared fixtures: the dev dataset, the packaged local model, and a real llama.cpp server.

Heavy resources are created once per session. Anything missing skips the tests that need it,
with the reason.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def llama_server(local_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real llama-cpp-python OpenAI-compatible server on 127.0.0.1; yields its base URL."""
    pytest.importorskip("llama_cpp.server", reason="needs llama-cpp-python[server]")
    port = _free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with log.open("w") as fh:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(local_gguf),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                "4096",
                "--n_threads",
                os.environ.get("SCOPEGUARD_N_THREADS", "2"),
                "--verbose",
                "False",
            ],
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"llama.cpp server exited early:\n{log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("llama.cpp server did not start within 120 s")
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
