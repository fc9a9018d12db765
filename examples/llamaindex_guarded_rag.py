"""A guarded LlamaIndex query engine that runs offline.

Install::

    pip install "scopeguard[local]" "./integrations/llama-index-scopeguard[examples]"

(the ``examples`` extra adds llama-index-vector-stores-faiss, llama-index-embeddings-huggingface,
faiss-cpu and scopeguard[embeddings]).

Run::

    HF_HUB_OFFLINE=1 python examples/llamaindex_guarded_rag.py

Bring your own model: ``--base-url`` points LlamaIndex's own ``OpenAILike`` at any
OpenAI-compatible server (``pip install llama-index-llms-openai-like``; the key is read from
``OPENAI_API_KEY``, a local server needs none) and uses it for the answers and for the guard
(its clarify/defuse answers; ``--detector judge`` makes it the judge too)::

    python examples/llamaindex_guarded_rag.py --base-url http://127.0.0.1:8080/v1 --model local

Without ``--base-url`` everything stays offline.

It indexes a small invented corpus in a FAISS vector store with the packaged MiniLM embeddings
(through ``HuggingFaceEmbedding`` and a local path), answers with the packaged local LLM
(Qwen2.5-Coder-0.5B through llama.cpp, wrapped as a LlamaIndex ``CustomLLM``) and guards the
query engine with scopeguard: an in-scope question is answered, an out-of-scope one is defused:
the clarify policy says which parts of the question the documents do not cover. The guard
pre-reads the index's nodes first (``engine.preread``; ``ScopeGuardPrereader`` does it while an
index is built from documents): the reader keeps its state after each on disk, so the questions,
and every later run, read only their own tokens.
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
from _corpus import CORPUS, IN_SCOPE_QUESTION, OUT_OF_SCOPE_QUESTION
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.llms import LLM
from llama_index.core.response_synthesizers import get_response_synthesizer
from llama_index.core.schema import TextNode
from llama_index.embeddings.huggingface import HuggingFaceEmbedding
from llama_index.vector_stores.faiss import FaissVectorStore
from llama_index_scopeguard import GuardedQueryEngine, ScopeGuardLLM, rag_prompt

from scopeguard import Action, Guard, from_spec
from scopeguard.models import minilm_path


def llms(base_url: str | None, model: str) -> tuple[Any, LLM]:
    """The guard's LLM and the answering LLM: the packaged local one, or your OpenAILike."""
    if base_url is None:
        llm = from_spec("local")  # the packaged Qwen2.5-Coder-0.5B GGUF, llama.cpp in-process
        return llm, ScopeGuardLLM(chat_model=llm, max_tokens=64)
    from llama_index.llms.openai_like import OpenAILike  # pip install llama-index-llms-openai-like

    own = OpenAILike(
        api_base=base_url,
        api_key=os.environ.get("OPENAI_API_KEY", "x"),
        model=model,
        is_chat_model=True,
        max_tokens=64,
    )
    return own, own  # Guard(llm=own) wraps it with llama_index_scopeguard.from_llama_index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="an OpenAI-compatible server for your own OpenAILike")
    parser.add_argument("--model", default="local", help="the model name the server expects")
    parser.add_argument("--detector", default="default", help="'judge' asks your model too")
    args = parser.parse_args(argv)

    embed_model = HuggingFaceEmbedding(model_name=minilm_path(), device="cpu")
    store = FaissVectorStore(faiss_index=faiss.IndexFlatL2(384))  # MiniLM vectors are 384-d
    nodes = [TextNode(text=text, id_=doc_id) for doc_id, text in CORPUS]
    index = VectorStoreIndex(
        nodes,
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=embed_model,
    )

    llm, answering = llms(args.base_url, args.model)
    engine = GuardedQueryEngine(
        retriever=index.as_retriever(similarity_top_k=1),
        guard=Guard(detector=args.detector, policy="clarify", llm=llm),
        response_synthesizer=get_response_synthesizer(llm=answering, text_qa_template=rag_prompt()),
    )
    # the nodes as they were indexed, read once ahead of the questions (engine.preread_in_background
    # does it on a thread, between checks); a detector that does not pre-read reads nothing
    print(f"pre-read {engine.preread(nodes)} passages of {len(nodes)} nodes\n")

    actions = []
    for question in (IN_SCOPE_QUESTION, OUT_OF_SCOPE_QUESTION):
        response = engine.query(question)
        guarded = (response.metadata or {})["scopeguard"]
        verdict = guarded["verdict"]
        actions.append(guarded["action"])
        print(f"Q: {question}")
        print(
            f"   retrieved: {response.source_nodes[0].node.node_id}  "
            f"verdict: {verdict.label} (P(oos)={verdict.score:.2f})"
        )
        print(f"   action: {guarded['action'].value}")
        if verdict.uncovered:
            print(f"   not covered by the documents: {', '.join(verdict.uncovered)}")
        print(f"A: {str(response).strip()}\n")

    if args.base_url is None and actions != [Action.ANSWERED, Action.CLARIFIED]:
        print(f"unexpected actions: {[a.value for a in actions]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
