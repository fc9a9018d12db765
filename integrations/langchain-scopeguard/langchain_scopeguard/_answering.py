"""How :class:`~langchain_scopeguard.GuardedRAG` answers: its chain (or the guard's LLM), now or
speculatively (started beside the check, outside the caller's trace, and held until the verdict)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document as LCDocument
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig

from langchain_scopeguard._common import AnyGuard, to_scopeguard
from langchain_scopeguard._speculative import count_usage, detached, untraced
from scopeguard import ConfigurationError
from scopeguard._speculation import AsyncHeldAnswer, CountingChatModel, HeldAnswer, Tally
from scopeguard.policies import allm_answer, llm_answer

__all__ = ["Answering"]


def _text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, BaseMessage):
        return str(output.text)
    raise ConfigurationError(
        f"the answer chain must return a string or a message, got {type(output).__name__}; "
        "end it with StrOutputParser()"
    )


class Answering:
    """The answering steps of a guarded chain with a ``chain`` (or a ``guard`` with an LLM)."""

    if TYPE_CHECKING:
        chain: Runnable[dict[str, Any], Any] | None
        guard: AnyGuard
        format_documents: Callable[[Sequence[LCDocument]], str]
        speculative: bool

    def _chain_input(self, question: str, documents: list[LCDocument]) -> dict[str, Any]:
        return {"question": question, "context": self.format_documents(documents), "documents": documents}

    def _llm(self, tally: Tally | None) -> Any:
        """The guard's LLM (counting its tokens into a speculative answer's ``tally``)."""
        llm = self.guard.llm
        return CountingChatModel(llm, tally) if tally is not None and llm is not None else llm

    def _answer(
        self, question: str, documents: list[LCDocument], config: RunnableConfig, tally: Tally | None = None
    ) -> str:
        if self.chain is not None:
            output = self.chain.invoke(self._chain_input(question, documents), config)
            if tally is not None:
                count_usage(tally, output)
            return _text(output)
        return llm_answer(self._llm(tally), question, to_scopeguard(documents), self.guard.answer_template)

    async def _aanswer(
        self, question: str, documents: list[LCDocument], config: RunnableConfig, tally: Tally | None = None
    ) -> str:
        if self.chain is not None:
            output = await self.chain.ainvoke(self._chain_input(question, documents), config)
            if tally is not None:
                count_usage(tally, output)
            return _text(output)
        return await allm_answer(
            self._llm(tally), question, to_scopeguard(documents), self.guard.answer_template
        )

    def _speculate(
        self, question: str, documents: list[LCDocument], config: RunnableConfig, stream: bool
    ) -> HeldAnswer[str] | None:
        """The answer (a stream's text chunks with ``stream``) started on a thread, outside the
        trace, when ``speculative`` (and something was retrieved: else nothing will be answered)."""
        if not (self.speculative and to_scopeguard(documents)):
            return None
        alone = detached(config)
        if stream:
            return HeldAnswer(untraced(lambda tally: self._stream_texts(question, documents, alone, tally)))
        return HeldAnswer(untraced(lambda tally: [self._answer(question, documents, alone, tally)]))

    def _aspeculate(
        self, question: str, documents: list[LCDocument], config: RunnableConfig, stream: bool
    ) -> AsyncHeldAnswer[str] | None:
        """:meth:`_speculate` as a task."""
        if not (self.speculative and to_scopeguard(documents)):
            return None
        alone = detached(config)

        async def answer(tally: Tally) -> AsyncIterator[str]:
            yield await self._aanswer(question, documents, alone, tally)

        def chunks(tally: Tally) -> AsyncIterator[str]:
            return self._astream_texts(question, documents, alone, tally)

        return AsyncHeldAnswer(untraced(chunks if stream else answer))

    def _stream_texts(
        self, question: str, documents: list[LCDocument], config: RunnableConfig, tally: Tally | None = None
    ) -> Iterator[str]:
        """The answer's text chunks: the chain's, or the guard's LLM answer in one."""
        if self.chain is None:
            yield self._answer(question, documents, config, tally)
            return
        for chunk in self.chain.stream(self._chain_input(question, documents), config):
            if tally is not None:
                count_usage(tally, chunk)
            if text := _text(chunk):
                yield text

    async def _astream_texts(
        self, question: str, documents: list[LCDocument], config: RunnableConfig, tally: Tally | None = None
    ) -> AsyncIterator[str]:
        if self.chain is None:
            yield await self._aanswer(question, documents, config, tally)
            return
        async for chunk in self.chain.astream(self._chain_input(question, documents), config):
            if tally is not None:
                count_usage(tally, chunk)
            if text := _text(chunk):
                yield text
