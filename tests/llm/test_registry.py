"""Spec strings select a backend."""

from __future__ import annotations

import pytest

from scopeguard.errors import ConfigurationError, ModelError
from scopeguard.llm import from_spec
from scopeguard.llm.openai_compat import OpenAIChatModel
from scopeguard.testing import ScriptedChatModel


def test_unknown_prefix_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigurationError, match="local, openai"):
        from_spec("anthropic:claude")


def test_openai_spec_with_a_base_url_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    llm = from_spec("openai:llama3")
    assert isinstance(llm, OpenAIChatModel)
    assert llm.model == "llama3" and llm.base_url == "http://127.0.0.1:11434/v1"


def test_openai_spec_without_key_or_base_url_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        from_spec("openai:gpt-4o-mini")


def test_kwargs_reach_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    llm = from_spec("openai:m", base_url="http://127.0.0.1:9/v1", timeout=3.0, max_attempts=2)
    assert isinstance(llm, OpenAIChatModel) and llm.timeout == 3.0 and llm.max_attempts == 2


def test_a_model_object_passes_through() -> None:
    llm = ScriptedChatModel([])
    assert from_spec(llm) is llm


def test_local_spec_resolves_names_and_paths() -> None:
    pytest.importorskip("llama_cpp", reason="needs scopeguard[local]")
    from scopeguard.llm.local import LlamaCppChatModel

    with pytest.raises(ModelError, match="not found"):
        from_spec("local:/no/such/model.gguf")
    with pytest.raises(ModelError, match=r"qwen2\.5-coder-0\.5b"):
        from_spec("local:no-such-model")
    try:
        llm = from_spec("local:smollm2")
    except ModelError as exc:
        pytest.skip(str(exc))
    assert isinstance(llm, LlamaCppChatModel) and llm.path.suffix == ".gguf"


def test_with_standard_params_builds_specs_and_checks_instances() -> None:
    from scopeguard.errors import ConfigurationError
    from scopeguard.llm import with_standard_params
    from scopeguard.llm.openai_compat import OpenAIChatModel
    from scopeguard.testing import ScriptedChatModel

    built = with_standard_params("openai:gpt-a?timeout=3", model="gpt-b", max_retries=0, api_key="sk-1")
    assert isinstance(built, OpenAIChatModel)
    assert (built.name, built.max_attempts, built.timeout, built.api_key) == ("gpt-b", 1, 3.0, "sk-1")
    remote = OpenAIChatModel("gpt-a", api_key="sk-own")
    assert with_standard_params(remote, model="gpt-a", max_retries=3, api_key="sk-own") is remote
    with pytest.raises(ConfigurationError, match=r"api_key \(it has a key of its own\), max_retries=1"):
        with_standard_params(remote, api_key="sk-other", max_retries=1)
    scripted = ScriptedChatModel(["x"])  # no key, no retries of its own: nothing to contradict
    assert with_standard_params(scripted, api_key="any", max_retries=2) is scripted
