"""A mistyped constructor option is an error naming it, the closest valid option and the valid
ones, for every public adapter; valid construction and LangChain's own rebuilding of a runnable
(``configurable_fields``, ``with_config``, ``model_copy``) keep working. Real LangChain objects:
the FAISS retriever over MiniLM, a fake chat model chain, the contextual compression retriever."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("langchain_scopeguard", reason="pip install ./integrations/langchain-scopeguard")

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import ConfigurableField
from langchain_scopeguard import (
    GuardedRAG,
    LangChainLLM,
    ScopeGuardChatModel,
    ScopeGuardCompressor,
    ScopeGuardRetriever,
    SentenceTransformerEmbeddings,
    rag_prompt,
)
from lc_testkit import CORPUS, IN_SCOPE, OUT_OF_SCOPE
from pydantic import ValidationError

from scopeguard import Action, ConfigurationError, Guard
from scopeguard.testing import ScriptedChatModel

ANSWER = "It opened in 1887."


def _chain() -> Any:
    return rag_prompt() | FakeListChatModel(responses=[ANSWER] * 10) | StrOutputParser()


def _builders(retriever: Any, detector: Any) -> dict[str, tuple[Callable[..., Any], dict[str, Any]]]:
    """Each public adapter model: its class and valid keyword arguments."""
    guard = Guard(detector=detector)
    return {
        "GuardedRAG": (GuardedRAG, {"retriever": retriever, "chain": _chain(), "guard": guard}),
        "ScopeGuardRetriever": (ScopeGuardRetriever, {"retriever": retriever, "guard": guard}),
        "ScopeGuardCompressor": (ScopeGuardCompressor, {"guard": guard}),
        "ScopeGuardChatModel": (ScopeGuardChatModel, {"llm": ScriptedChatModel(lambda p: ANSWER)}),
    }


# (class, mistyped option, its closest valid option)
TYPOS = [
    ("GuardedRAG", "input_kye", "input_key"),
    ("GuardedRAG", "format_document", "format_documents"),
    ("ScopeGuardRetriever", "drop_out_of_scop", "drop_out_of_scope"),
    ("ScopeGuardRetriever", "granulariti", "granularity"),
    ("ScopeGuardCompressor", "granularty", "granularity"),
    ("ScopeGuardCompressor", "metadatakey", "metadata_key"),
    ("ScopeGuardChatModel", "temprature", "temperature"),
    ("ScopeGuardChatModel", "max_token", "max_tokens"),
]


@pytest.mark.parametrize(("name", "typo", "closest"), TYPOS)
def test_a_mistyped_option_names_itself_the_closest_and_the_valid_ones(
    faiss_retriever, coverage_detector, name, typo, closest
):
    cls, kwargs = _builders(faiss_retriever, coverage_detector)[name]
    with pytest.raises(ConfigurationError) as caught:
        cls(**kwargs, **{typo: True})
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{name} got an unknown option '{typo}' (did you mean '{closest}'?); ")
    valid = message.split("valid options: ")[1].split(", ")
    assert valid == sorted(cls.model_fields) and closest in valid and typo not in valid


def test_an_option_with_nothing_close_still_lists_the_valid_ones(faiss_retriever, coverage_detector):
    cls, kwargs = _builders(faiss_retriever, coverage_detector)["GuardedRAG"]
    with pytest.raises(ConfigurationError, match=r"^GuardedRAG got an unknown option 'timeout_s'; valid"):
        cls(**kwargs, timeout_s=True)


def test_several_unknown_options_are_all_named(faiss_retriever, coverage_detector):
    cls, kwargs = _builders(faiss_retriever, coverage_detector)["ScopeGuardRetriever"]
    with pytest.raises(ConfigurationError) as caught:
        cls(**kwargs, drop_out_of_scop=True, kk=2)
    assert str(caught.value).startswith(
        "ScopeGuardRetriever got unknown options 'drop_out_of_scop' (did you mean 'drop_out_of_scope'?), "
        "'kk' (did you mean 'k'?); valid options: "
    )


def test_model_validate_rejects_an_unknown_option_too(faiss_retriever, coverage_detector):
    cls, kwargs = _builders(faiss_retriever, coverage_detector)["ScopeGuardCompressor"]
    with pytest.raises(ValidationError, match=re.escape("(did you mean 'granularity'?)")):
        cls.model_validate({**kwargs, "granularty": "set"})


def test_valid_options_build_working_adapters(faiss_retriever, coverage_detector):
    built = _builders(faiss_retriever, coverage_detector)
    rag = built["GuardedRAG"][0](**built["GuardedRAG"][1], input_key="q", name="guarded")
    assert rag.invoke({"q": IN_SCOPE})["action"] == Action.ANSWERED and rag.get_name() == "guarded"
    retriever = built["ScopeGuardRetriever"][0](
        **built["ScopeGuardRetriever"][1],
        granularity="document",
        drop_out_of_scope=True,
        k=2,
        tags=["t"],
        metadata={"m": 1},
    )
    assert [d.page_content for d in retriever.invoke(IN_SCOPE)] == [CORPUS[0]]
    compressor = built["ScopeGuardCompressor"][0](
        **built["ScopeGuardCompressor"][1], granularity="set", drop_out_of_scope=False, metadata_key="sg"
    )
    (doc,) = compressor.compress_documents(faiss_retriever.invoke(IN_SCOPE), IN_SCOPE)
    assert doc.metadata["sg"]["label"] == "in_scope"
    model = built["ScopeGuardChatModel"][0](
        **built["ScopeGuardChatModel"][1], temperature=0.2, max_tokens=8, timeout=5, callbacks=None
    )
    assert model.invoke("hi").content == ANSWER


def test_langchains_own_rebuilding_keeps_working(faiss_retriever, coverage_detector):
    guard = Guard(detector=coverage_detector)
    retriever = ScopeGuardRetriever(retriever=faiss_retriever, guard=guard).configurable_fields(
        drop_out_of_scope=ConfigurableField(id="drop")
    )  # a configured call builds a new ScopeGuardRetriever from its fields
    assert len(retriever.invoke(IN_SCOPE)) == 1
    dropping = retriever.with_config(configurable={"drop": True})
    assert dropping.invoke(OUT_OF_SCOPE) == []
    model = ScopeGuardChatModel(llm=ScriptedChatModel(lambda p: ANSWER), temperature=0.1)
    assert model.model_copy(update={"temperature": 0.5}).temperature == 0.5
    assert model.bind(stop=["1887"]).invoke("hi").content == "It opened in "
    rag = GuardedRAG(retriever=faiss_retriever, chain=_chain(), guard=guard)
    assert rag.with_config(tags=["x"]).invoke(IN_SCOPE)["answer"] == ANSWER


def test_plain_classes_reject_an_unknown_keyword_with_pythons_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'batchsize'"):
        SentenceTransformerEmbeddings("unused", batchsize=8)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'temperature'"):
        LangChainLLM(FakeListChatModel(responses=["x"]), temperature=0.1)  # type: ignore[call-arg]
