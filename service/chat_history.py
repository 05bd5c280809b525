"""Conversations as knowledge (seed: message.go IndexMessageToKB and SearchMessages).

- `index_turn` writes one answered turn (question and answer) into the caller's chat-history
  knowledge base (retrieval/chat_history.py), one document per turn keyed by its request id, so
  re-indexing the same turn replaces it and a later question can search past conversations. An
  answer drawn from restricted documents keeps their rule (contracts/access.py `derived_rule`).
- `search` is the tenant's message search: hybrid (or vector-only, keyword-only) search over the
  tenant's chat-history bases, reranked by the pipeline's rerank chain when a rerank model is
  configured (threshold rules, composite score, MMR), one hit per turn (its best chunk), paged over
  a bounded pool.
- `forget_session` removes a deleted session's turns: a conversation the user deleted must not
  keep answering questions.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from ragline import defaults
from ragline.contracts.access import AccessRule, Principal
from ragline.contracts.passages import SearchResult
from ragline.retrieval.chat_history import (
    CHAT_HISTORY_TAG,
    chat_history_name,
    find_chat_history,
    tenant_chat_histories,
)
from ragline.retrieval.errors import KnowledgeBaseExistsError
from ragline.retrieval.reranking import rerank_results
from ragline.retrieval.types import KnowledgeBase, SearchParams
from ragline.services import Services

log = logging.getLogger(__name__)

SearchMode = Literal["hybrid", "vector", "keyword"]
DRAWN_ON = "drawn_on"  # a turn document's metadata: the documents its answer drew on


@dataclass(frozen=True)
class AnsweredTurn:
    """One finished turn, as the run manager knows it after the answer was saved."""

    tenant_id: str
    user_id: str
    session_id: str
    request_id: str
    user_message_id: str
    assistant_message_id: str
    question: str
    answer: str
    access: AccessRule = field(default_factory=AccessRule)  # derived from the documents the answer drew on
    drawn_on: tuple[str, ...] = ()  # those documents: a search checks their rules as they are then


class MessageHit(BaseModel):
    """One past turn found by a message search."""

    session_id: str
    request_id: str
    user_message_id: str
    assistant_message_id: str
    user_id: str
    question: str
    answer: str
    score: float = Field(description="The best score of the turn's chunks: the composite rerank score with a rerank model, else the search score.")
    match_type: str = Field(description="vector, keyword or hybrid (found by both).")
    knowledge_base_id: str
    knowledge_id: str


def turn_text(turn: AnsweredTurn) -> str:
    """What is indexed: the pair reads as a short Q/A document, so both sides are searchable."""
    return f"Question: {turn.question.strip()}\nAnswer: {turn.answer.strip()}"


def _cut(text: str) -> str:
    return text[: defaults.CHAT_HISTORY_TEXT_MAX_CHARS]


def _drawn_on(meta: dict[str, Any]) -> list[str]:
    return [i for i in meta.get(DRAWN_ON) or [] if isinstance(i, str)]


class ChatHistoryService:
    """Index answered turns and search them; built on the process's retrieval and ingestion."""

    def __init__(self, services: Services) -> None:
        self.services = services

    def history_kb(self, tenant_id: str, user_id: str) -> KnowledgeBase:
        """The user's chat-history base, created on their first indexed turn."""
        catalog = self.services.retrieval.catalog
        kb = find_chat_history(catalog, tenant_id, user_id)
        if kb is not None:
            return kb
        try:
            return self.services.retrieval.knowledge_bases.create(
                chat_history_name(user_id), tenant_id, tags=[CHAT_HISTORY_TAG],
                description=f"Past conversations of {user_id}, indexed turn by turn.",
            )
        except KnowledgeBaseExistsError:
            kb = find_chat_history(catalog, tenant_id, user_id)  # a concurrent turn created it first
            if kb is None:  # the name is taken by a base that is not a chat history: never write into it
                raise
            return kb

    async def index_turn(self, turn: AnsweredTurn) -> str:
        """Index one answered turn; returns the document id (the same for the same request)."""
        kb = self.history_kb(turn.tenant_id, turn.user_id)
        metadata = {
            "session_id": turn.session_id, "request_id": turn.request_id, "user_id": turn.user_id,
            "user_message_id": turn.user_message_id, "assistant_message_id": turn.assistant_message_id,
            "question": _cut(turn.question), "answer": _cut(turn.answer), DRAWN_ON: list(turn.drawn_on[:defaults.CHAT_HISTORY_DRAWN_ON_MAX]),
        }
        knowledge = await self.services.ingestion.ingest_text(
            kb.id, _cut(turn_text(turn)), title=_cut(turn.question.strip())[:200] or "conversation",
            source=f"chat:{turn.session_id}:{turn.request_id}", tenant_id=turn.tenant_id, metadata=metadata,
            access=turn.access,
        )
        return knowledge.id

    async def search(self, who: Principal, query: str, *, mode: SearchMode = "hybrid", offset: int = 0,
                     limit: int = defaults.MESSAGE_SEARCH_PAGE_SIZE) -> tuple[list[MessageHit], int]:
        """One page of the tenant's past turns matching `query` that `who` may read (a turn answered
        from restricted documents carries their rule), best first, and how many matched."""
        stack = self.services.retrieval
        kbs = tenant_chat_histories(stack.catalog, who.tenant_id)
        if not kbs:
            return [], 0
        params = SearchParams(
            query=query, knowledge_base_ids=[kb.id for kb in kbs], tenant_id=who.tenant_id, reader=who,
            match_count=defaults.MESSAGE_SEARCH_MAX_HITS,
            disable_vector=mode == "keyword", disable_keyword=mode == "vector",
        )
        results = await stack.searcher.search(params)
        reranker = self.services.reranker()
        if reranker is not None:  # the pipeline's rerank chain, as the search API shares it (seed: vector + rerank)
            results = await rerank_results(query, results, reranker, threshold=defaults.DEFAULT_RERANK_THRESHOLD,
                                           top_k=defaults.MESSAGE_SEARCH_MAX_HITS, scoped=False)
        hits = await asyncio.to_thread(self._per_turn, results, who)  # catalog reads: a file or Redis
        return hits[offset : offset + limit], len(hits)

    def _per_turn(self, results: list[SearchResult], who: Principal) -> list[MessageHit]:
        """The best chunk of each turn; turns whose document carries no turn metadata are skipped, and
        so is a turn that drew on a document `who` may not read now (its rule changed after the turn
        was indexed)."""
        best: dict[str, SearchResult] = {}
        for result in results:
            if result.knowledge_id not in best or result.score > best[result.knowledge_id].score:
                best[result.knowledge_id] = result
        documents = self.services.retrieval.catalog.get_knowledge_many(list(best))
        readable = self._readable_sources([d.metadata for d in documents.values()], who)
        hits = []
        for knowledge_id, result in best.items():
            document = documents.get(knowledge_id)
            meta: dict[str, Any] = document.metadata if document is not None else {}
            if not meta.get("request_id") or not all(readable.get(i, True) for i in _drawn_on(meta)):
                continue
            hits.append(MessageHit(
                session_id=meta["session_id"], request_id=meta["request_id"], user_id=str(meta.get("user_id", "")),
                user_message_id=str(meta.get("user_message_id", "")), assistant_message_id=str(meta.get("assistant_message_id", "")),
                question=str(meta.get("question", "")), answer=str(meta.get("answer", "")), score=result.score,
                match_type=result.match_type.value, knowledge_base_id=result.knowledge_base_id, knowledge_id=knowledge_id,
            ))
        return sorted(hits, key=lambda h: h.score, reverse=True)

    def _readable_sources(self, metas: list[dict[str, Any]], who: Principal) -> dict[str, bool]:
        """Whether `who` may read each document these turns drew on, as their rules are now (the asker
        too: an answer from a document they may no longer read is not found again); one catalog read
        for all of them. A document the catalog no longer holds is not listed (nothing left to guard)."""
        if who.operator:
            return {}
        sources = {i for meta in metas for i in _drawn_on(meta)}
        rules = self.services.retrieval.knowledge_bases.rules_by_document(sources)
        return {doc: all(rule.lets_in(who) is not None for rule in doc_rules) for doc, doc_rules in rules.items()}

    async def forget_session(self, tenant_id: str, session_id: str) -> int:
        """Remove the indexed turns of a deleted session from every chat history of the tenant."""
        stack = self.services.retrieval
        removed = 0
        for kb in tenant_chat_histories(stack.catalog, tenant_id):
            for document in stack.catalog.list_knowledge(kb.id):
                if document.metadata.get("session_id") == session_id:
                    await self.services.ingestion.delete_knowledge(kb.id, document.id, tenant_id)
                    removed += 1
        return removed

