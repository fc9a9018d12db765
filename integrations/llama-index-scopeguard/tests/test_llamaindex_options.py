"""A mistyped constructor option is an error naming it, the closest valid option and the valid
ones, for every public adapter; valid construction and LlamaIndex's own serialized form
(``to_dict`` / ``from_dict``, which carries ``class_name``) keep working. Real LlamaIndex objects:
the FAISS index over MiniLM, its retriever and stock query engine, ``MockLLM``."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("llama_index_scopeguard", reason="pip install ./integrations/llama-index-scopeguard")

from li_testkit import CORPUS, IN_SCOPE, OUT_OF_SCOPE
from llama_index.core.llms import MockLLM
from llama_index.core.schema import QueryBundle
from llama_index_scopeguard import (
    GuardedQueryEngine,
    LlamaIndexLLM,
    ScopeGuardLLM,
    ScopeGuardPostprocessor,
    ScopeGuardPrereader,
    ScopeGuardVerdictEvent,
)
from pydantic import ValidationError

from scopeguard import Action, ConfigurationError, Guard
from scopeguard.testing import ScriptedChatModel

ANSWER = "It opened in 1887."


def _builders(retriever: Any, detector: Any) -> dict[str, tuple[Callable[..., Any], dict[str, Any]]]:
    """Each public adapter model: its class and valid keyword arguments."""
    guard = Guard(detector=detector)
    event = {
        "query": "q",
        "component": "c",
        "label": "in_scope",
        "out_of_scope": False,
        "failed_closed": False,
    }
    return {
        "GuardedQueryEngine": (
            GuardedQueryEngine,
            {"retriever": retriever, "guard": guard, "llm": MockLLM()},
        ),
        "ScopeGuardPostprocessor": (ScopeGuardPostprocessor, {"guard": guard}),
        "ScopeGuardPrereader": (ScopeGuardPrereader, {"guard": guard}),
        "ScopeGuardLLM": (ScopeGuardLLM, {"chat_model": ScriptedChatModel(lambda p: ANSWER)}),
        "ScopeGuardVerdictEvent": (ScopeGuardVerdictEvent, event),
    }


# (class, mistyped option, its closest valid option)
TYPOS = [
    ("GuardedQueryEngine", "response_synthesiser", "response_synthesizer"),
    ("GuardedQueryEngine", "retreiver", "retriever"),
    ("ScopeGuardPostprocessor", "respond_with_polcy", "respond_with_policy"),
    ("ScopeGuardPostprocessor", "drop_out_of_scop", "drop_out_of_scope"),
    ("ScopeGuardPrereader", "backround", "background"),
    ("ScopeGuardLLM", "max_token", "max_tokens"),
    ("ScopeGuardLLM", "temprature", "temperature"),
    ("ScopeGuardVerdictEvent", "hedged", "hedge"),
]


@pytest.mark.parametrize(("name", "typo", "closest"), TYPOS)
def test_a_mistyped_option_names_itself_the_closest_and_the_valid_ones(
    retriever, coverage_detector, name, typo, closest
):
    cls, kwargs = _builders(retriever, coverage_detector)[name]
    with pytest.raises(ConfigurationError) as caught:
        cls(**kwargs, **{typo: True})
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{name} got an unknown option '{typo}' (did you mean '{closest}'?); ")
    valid = message.split("valid options: ")[1].split(", ")
    assert valid == sorted(cls.model_fields) and closest in valid and typo not in valid


def test_an_option_with_nothing_close_still_lists_the_valid_ones(retriever, coverage_detector):
    cls, kwargs = _builders(retriever, coverage_detector)["GuardedQueryEngine"]
    with pytest.raises(
        ConfigurationError, match=r"^GuardedQueryEngine got an unknown option 'timeout_s'; valid"
    ):
        cls(**kwargs, timeout_s=True)


def test_several_unknown_options_are_all_named(retriever, coverage_detector):
    cls, kwargs = _builders(retriever, coverage_detector)["ScopeGuardPostprocessor"]
    with pytest.raises(ConfigurationError) as caught:
        cls(**kwargs, granularty="document", metadatakey="sg")
    assert str(caught.value).startswith(
        "ScopeGuardPostprocessor got unknown options 'granularty' (did you mean 'granularity'?), "
        "'metadatakey' (did you mean 'metadata_key'?); valid options: "
    )


def test_model_validate_rejects_an_unknown_option_too(retriever, coverage_detector):
    cls, kwargs = _builders(retriever, coverage_detector)["ScopeGuardPrereader"]
    with pytest.raises(ValidationError, match=re.escape("(did you mean 'background'?)")):
        cls.model_validate({**kwargs, "backround": True})


def test_valid_options_build_working_adapters(faiss_index, retriever, coverage_detector):
    built = _builders(retriever, coverage_detector)
    llm = built["ScopeGuardLLM"][0](**built["ScopeGuardLLM"][1], temperature=0.2, max_tokens=8, timeout=5)
    engine = built["GuardedQueryEngine"][0](**{**built["GuardedQueryEngine"][1], "llm": llm})
    response = engine.query(IN_SCOPE)
    assert str(response) == ANSWER and response.metadata["scopeguard"]["action"] == Action.ANSWERED
    post = built["ScopeGuardPostprocessor"][0](
        **built["ScopeGuardPostprocessor"][1], granularity="document", respond_with_policy=False
    )
    stock = faiss_index.as_query_engine(similarity_top_k=2, node_postprocessors=[post], llm=MockLLM())
    assert [n.get_content() for n in stock.retrieve(QueryBundle(IN_SCOPE))] == [CORPUS[0]]
    assert stock.retrieve(QueryBundle(OUT_OF_SCOPE)) == []
    prereader = built["ScopeGuardPrereader"][0](**built["ScopeGuardPrereader"][1], background=False)
    assert prereader.background is False
    event = built["ScopeGuardVerdictEvent"][0](**built["ScopeGuardVerdictEvent"][1], hedge=True)
    assert event.hedge is True


def test_llamaindex_serialized_form_round_trips(retriever, coverage_detector):
    guard = Guard(detector=coverage_detector)
    post = ScopeGuardPostprocessor(guard=guard, granularity="document", metadata_key="sg")
    data = post.to_dict()
    assert data["class_name"] == "ScopeGuardPostprocessor"
    assert ScopeGuardPostprocessor.from_dict(data).metadata_key == "sg"
    assert ScopeGuardPostprocessor(**data).granularity == "document"  # class_name is let through
    prereader = ScopeGuardPrereader(guard=guard, background=True)
    assert ScopeGuardPrereader.from_dict(prereader.to_dict()).background is True
    event = ScopeGuardVerdictEvent(
        query="q", component="c", label="out_of_scope", out_of_scope=True, failed_closed=True
    )
    assert ScopeGuardVerdictEvent(**event.model_dump()).failed_closed is True


def test_the_plain_adapter_rejects_an_unknown_keyword_with_pythons_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'temperature'"):
        LlamaIndexLLM(MockLLM(), temperature=0.1)  # type: ignore[call-arg]
