"""LangChain drop-ins for scopeguard: guard a retriever, a whole RAG chain, or a compression step.

>>> from langchain_scopeguard import GuardedRAG
>>> rag = GuardedRAG(retriever=retriever, chain=prompt | llm | StrOutputParser(),
...                  guard=Guard(detector="default", policy="refuse"))
>>> rag.invoke("Who won?")["answer"]
"""

from langchain_scopeguard._common import METADATA_KEY
from langchain_scopeguard.chat_model import ScopeGuardChatModel, StreamingChatModel
from langchain_scopeguard.compressor import ScopeGuardCompressor
from langchain_scopeguard.embeddings import SentenceTransformerEmbeddings
from langchain_scopeguard.llm_adapter import LangChainLLM, from_langchain
from langchain_scopeguard.retriever import ScopeGuardRetriever
from langchain_scopeguard.runnable import GuardedOutput, GuardedRAG, rag_prompt

__version__ = "0.1.0"

__all__ = [
    "METADATA_KEY",
    "GuardedOutput",
    "GuardedRAG",
    "LangChainLLM",
    "ScopeGuardChatModel",
    "ScopeGuardCompressor",
    "ScopeGuardRetriever",
    "SentenceTransformerEmbeddings",
    "StreamingChatModel",
    "__version__",
    "from_langchain",
    "rag_prompt",
]
