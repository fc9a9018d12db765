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
    monkeypatch.setenv("SCOPEGUARD_LLAMA_EXTRA_BUFFERS", "off")  # no canary for a broken file
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF, then nothing a model needs")  # passes the magic check, fails to load
    with pytest.raises(ModelError, match="exited early"), packaged_llama_server(tmp_path, model=str(broken)):
        pytest.fail("a broken model file cannot be served")
    assert (tmp_path / "server.log").is_file()  # the log went into log_dir
    assert "extra buffers off" in (tmp_path / "server.log").read_text()  # the loader's child ran


def test_a_file_that_is_not_gguf_is_refused_before_any_process_starts(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp.server", reason="needs llama-cpp-python[server]")
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf file")
    with (
        pytest.raises(ModelError, match="is not a GGUF file"),
        packaged_llama_server(tmp_path, model=str(broken)),
    ):
        pytest.fail("a broken model file cannot be served")


def test_the_alias_and_further_options_reach_the_server_command(monkeypatch: pytest.MonkeyPatch) -> None:
    commands: list[list[str]] = []

    class Exited:
        returncode = 3

        def __init__(self, command: list[str], **kw: object) -> None:
            commands.append(command)

        def poll(self) -> int:
            return self.returncode

        def terminate(self) -> None: ...

        def wait(self, timeout: float | None = None) -> int:
            return self.returncode

    monkeypatch.setattr(llama_server, "require", lambda module, **kw: None)
    monkeypatch.setattr(llama_server, "server_command", lambda model, args: ["serve", str(model), *args])
    monkeypatch.setattr(llama_server.subprocess, "Popen", Exited)
    with (
        pytest.raises(ModelError, match="exited early"),
        llama_server.llama_cpp_server("m.gguf", alias="qwen2.5-coder-1.5b", args=["--cache", "true"]),
    ):
        pytest.fail("the server exited")
    command = commands[0]
    assert command[command.index("--model_alias") + 1] == "qwen2.5-coder-1.5b"
    assert command[-2:] == ["--cache", "true"]
