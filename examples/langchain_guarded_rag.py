"""A guarded LangChain RAG pipeline that runs offline.

Install::

    pip install "scopeguard[local,embeddings,retrieval]" ./integrations/langchain-scopeguard

Run::

    HF_HUB_OFFLINE=1 python examples/langchain_guarded_rag.py

Bring your own model: ``--base-url`` points LangChain's own ``ChatOpenAI`` at any
OpenAI-compatible server (``pip install langchain-openai``; the key is read from
``OPENAI_API_KEY``, a local server needs none) and uses it for the chain's answers and for the
guard (its clarify/defuse answers; ``--detector judge`` makes it the judge too)::

    python examples/langchain_guarded_rag.py --base-url http://127.0.0.1:8080/v1 --model local

Without ``--base-url`` everything stays offline.

It indexes a small invented corpus in FAISS with the packaged MiniLM embeddings, answers with the
packaged local LLM (Qwen2.5-Coder-0.5B through llama.cpp, wrapped as a LangChain chat model),
and guards the chain with scopeguard: an in-scope question is answered, an out-of-scope one is
defused: the clarify policy says which parts of the question the documents do not cover. The
guard pre-reads the indexed chunks first (``rag.preread``): the reader keeps its state after each
on disk, so the questions, and every later run, read only their own tokens.
(``policy="defuse"`` instead re-asks the LLM with the Zero-shot-CoT prompt; the 0.5B model often
still invents an answer, which is why the example uses ``clarify``.)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import faiss
import numpy as np
from _corpus import CORPUS, IN_SCOPE_QUESTION, OUT_OF_SCOPE_QUESTION
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.retrievers import BaseRetriever
from langchain_scopeguard import GuardedRAG, ScopeGuardChatModel, SentenceTransformerEmbeddings, rag_prompt
from pydantic import ConfigDict

from scopeguard import Action, Guard, from_spec
from scopeguard.models import minilm_path


class FaissRetriever(BaseRetriever):
    """A tiny vector store: cosine similarity over normalised embeddings in a flat FAISS index."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    embeddings: Embeddings
    documents: list[Document]
    index: faiss.Index
    k: int = 1

    @classmethod
    def from_documents(cls, documents: list[Document], embeddings: Embeddings, k: int = 1) -> FaissRetriever:
        vectors = np.asarray(embeddings.embed_documents([d.page_content for d in documents]), dtype="float32")
        index = faiss.IndexFlatIP(vectors.shape[1])
        index.add(vectors)
        return cls(embeddings=embeddings, documents=documents, index=index, k=k)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        query_vector = np.asarray([self.embeddings.embed_query(query)], dtype="float32")
        scores, ids = self.index.search(query_vector, self.k)
        return [
            Document(
                page_content=self.documents[i].page_content,
                id=self.documents[i].id,
                metadata={"score": float(s)},
            )
            for s, i in zip(scores[0], ids[0], strict=True)
            if i >= 0
        ]


def chat_models(base_url: str | None, model: str) -> tuple[Any, BaseChatModel]:
    """The guard's LLM and the chain's chat model: the packaged local one, or your ChatOpenAI."""
    if base_url is None:
        llm = from_spec("local")  # the packaged Qwen2.5-Coder-0.5B GGUF, llama.cpp in-process
        return llm, ScopeGuardChatModel(llm=llm, max_tokens=64)
    from langchain_openai import ChatOpenAI  # pip install langchain-openai

    own = ChatOpenAI(
        base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY", "x"), model=model, max_tokens=64
    )
    return own, own  # Guard(llm=own) wraps it with langchain_scopeguard.from_langchain


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="an OpenAI-compatible server for your own ChatOpenAI")
    parser.add_argument("--model", default="local", help="the model name the server expects")
    parser.add_argument("--detector", default="default", help="'judge' asks your model too")
    args = parser.parse_args(argv)

    documents = [Document(page_content=text, id=doc_id) for doc_id, text in CORPUS]
    retriever = FaissRetriever.from_documents(documents, SentenceTransformerEmbeddings(minilm_path()))

    llm, chat_model = chat_models(args.base_url, args.model)
    chain = rag_prompt() | chat_model | StrOutputParser()
    guard = Guard(detector=args.detector, policy="clarify", llm=llm)
    rag = GuardedRAG(retriever=retriever, chain=chain, guard=guard)
    # the chunks as they were indexed, read once ahead of the questions (rag.preread_in_background
    # does it on a thread, between checks); a detector that does not pre-read reads nothing
    print(f"pre-read {rag.preread(documents)} passages of {len(documents)} chunks\n")

    actions = []
    for question in (IN_SCOPE_QUESTION, OUT_OF_SCOPE_QUESTION):
        out = rag.invoke(question)
        verdict = out["verdict"]
        actions.append(out["action"])
        print(f"Q: {question}")
        print(
            f"   retrieved: {out['documents'][0].id}  verdict: {verdict.label} (P(oos)={verdict.score:.2f})"
        )
        print(f"   action: {out['action'].value}")
        if verdict.uncovered:
            print(f"   not covered by the documents: {', '.join(verdict.uncovered)}")
        print(f"A: {out['answer'].strip()}\n")

    if args.base_url is None and actions != [Action.ANSWERED, Action.CLARIFIED]:
        print(f"unexpected actions: {[a.value for a in actions]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
