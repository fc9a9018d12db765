"""A guarded LlamaIndex query engine that runs offline.

Install::

    pip install "scopeguard[local]" "./integrations/llama-index-scopeguard[examples]"

(the ``examples`` extra adds llama-index-vector-stores-faiss, llama-index-embeddings-huggingface,
faiss-cpu and scopeguard[embeddings]).

Run::

    HF_HUB_OFFLINE=1 python examples/llamaindex_guarded_rag.py

It indexes a small invented corpus in a FAISS vector store with the packaged MiniLM embeddings
(through ``HuggingFaceEmbedding`` and a local path), answers with the packaged local LLM
(Qwen2.5-Coder-0.5B through llama.cpp, wrapped as a LlamaIndex ``CustomLLM``) and guards the
query engine with scopeguard: an in-scope question is answered, an out-of-scope one is defused:
the clarify policy says which parts of the question the documents do not cover.
(``policy="defuse"`` instead re-asks the LLM with the Zero-shot-CoT prompt; the 0.5B model often
still invents an answer, which is why the example uses ``clarify``.)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import faiss
from _corpus import CORPUS, IN_SCOPE_QUESTION, OUT_OF_SCOPE_QUESTION
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.response_synthesizers import get_response_synthesizer
from llama_index.core.schema import TextNode
from llama_index.embeddings.huggingface import HuggingFaceEmbedding
from llama_index.vector_stores.faiss import FaissVectorStore
from llama_index_scopeguard import GuardedQueryEngine, ScopeGuardLLM, rag_prompt

from scopeguard import Action, Guard, from_spec
from scopeguard.models import minilm_path


def main() -> int:
    embed_model = HuggingFaceEmbedding(model_name=minilm_path(), device="cpu")
    store = FaissVectorStore(faiss_index=faiss.IndexFlatL2(384))  # MiniLM vectors are 384-d
    index = VectorStoreIndex(
        [TextNode(text=text, id_=doc_id) for doc_id, text in CORPUS],
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=embed_model,
    )

    llm = from_spec("local")  # the packaged Qwen2.5-Coder-0.5B GGUF, llama.cpp in-process
    engine = GuardedQueryEngine(
        retriever=index.as_retriever(similarity_top_k=1),
        guard=Guard(detector="default", policy="clarify", llm=llm),
        response_synthesizer=get_response_synthesizer(
            llm=ScopeGuardLLM(chat_model=llm, max_tokens=64), text_qa_template=rag_prompt()
        ),
    )

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

    if actions != [Action.ANSWERED, Action.CLARIFIED]:
        print(f"unexpected actions: {[a.value for a in actions]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
