"""LlamaIndex drop-ins for scopeguard: a node postprocessor, a guarded query engine, an LLM adapter,
and an ingestion step that pre-reads the nodes as they are indexed.

>>> from llama_index_scopeguard import GuardedQueryEngine
>>> engine = GuardedQueryEngine(retriever=index.as_retriever(), llm=llm,
...                             guard=Guard(detector="default", policy="refuse"))
>>> engine.query("Who won?").metadata["scopeguard"]["verdict"]
"""

from llama_index_scopeguard._common import METADATA_KEY, ScopeGuardSpeculationEvent, ScopeGuardVerdictEvent
from llama_index_scopeguard.llm import ScopeGuardLLM
from llama_index_scopeguard.llm_adapter import LlamaIndexLLM, from_llama_index
from llama_index_scopeguard.postprocessor import ScopeGuardPostprocessor
from llama_index_scopeguard.prereader import ScopeGuardPrereader
from llama_index_scopeguard.query_engine import GuardedQueryEngine, rag_prompt

__version__ = "0.1.0"

__all__ = [
    "METADATA_KEY",
    "GuardedQueryEngine",
    "LlamaIndexLLM",
    "ScopeGuardLLM",
    "ScopeGuardPostprocessor",
    "ScopeGuardPrereader",
    "ScopeGuardSpeculationEvent",
    "ScopeGuardVerdictEvent",
    "__version__",
    "from_llama_index",
    "rag_prompt",
]
