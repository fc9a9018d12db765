"""packaged_llama_server: the llama.cpp server fixture's body skips when unavailable, fails when broken."""

from __future__ import annotations

from pathlib import Path

import pytest

from scopeguard.errors import MissingDependencyError, ModelError
from scopeguard.llm import llama_server
from scopeguard.testing import packaged_llama_server


def test_a_missing_server_package_skips_naming_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(module: str, **kw: str) -> None:
        raise MissingDependencyError(kw["package"], kw["extra"], kw["feature"])

    monkeypatch.setattr(llama_server, "require", missing)
    with pytest.raises(pytest.skip.Exception, match=r"llama-cpp-python\[server\]"), packaged_llama_server():
        pytest.fail("no server was expected")


def test_a_missing_model_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llama_server, "require", lambda module, **kw: None)
    with (
        pytest.raises(pytest.skip.Exception, match="unknown model 'no-such-model'"),
        packaged_llama_server(model="no-such-model"),
    ):
        pytest.fail("no server was expected")


def test_a_server_that_cannot_start_is_an_error_not_a_skip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("llama_cpp.server", reason="needs llama-cpp-python[server]")
    monkeypatch.setenv("SCOPEGUARD_N_THREADS", "1")
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf file")
    with pytest.raises(ModelError, match="exited early"), packaged_llama_server(tmp_path, model=str(broken)):
        pytest.fail("a broken model file cannot be served")
    assert (tmp_path / "server.log").is_file()  # the log went into log_dir
