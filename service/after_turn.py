"""What a finished turn leaves behind beside its messages (seed: message.go IndexMessageToKB and
the citation history memory_affinity.go reads).

When a turn has been answered, the run manager hands it here once: the documents the answer
cites go into the caller's citation ledger (memory affinity across all their sessions), and the
question and answer go into their chat-history knowledge base when the request or the server
asks for it. Both run in the background after `complete`; a failure is logged, never shown.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Coroutine, Mapping
from typing import Any

from langchain_core.messages import AIMessage

from ragline.citations.messages import message_text
from ragline.contracts.access import derived_rule
from ragline.contracts.passages import knowledge_ids
from ragline.contracts.request import PipelineRequest
from ragline.memory.citations import CitationLedger, cited_documents
from ragline.service.chat_history import AnsweredTurn, ChatHistoryService
from ragline.service.registry import RunRecord
from ragline.service.replay import Transcript
from ragline.services import Services
from ragline.settings import Settings

log = logging.getLogger(__name__)

Job = Coroutine[Any, Any, None]


def drawn_on(values: Mapping[str, Any]) -> set[str]:
    """The documents whose passages reached the model this turn (the driver's `drawn_on`, or from a
    thread read back, its merged results and agent sources) or that an answer it holds cites: what
    an indexed copy of the answer may repeat."""
    passages = [*(values.get("merge_results") or []), *(values.get("sources") or [])]
    cited = [cited_documents(message_text(m)) for m in values.get("messages", []) if isinstance(m, AIMessage)]
    return set(values.get("drawn_on") or []).union(knowledge_ids(passages), *cited)


def wants_index(request_flag: bool | None, server_default: bool) -> bool:
    """The request's own choice wins; unset follows the server setting (off unless configured)."""
    return server_default if request_flag is None else request_flag


class AfterTurn:
    def __init__(self, services: Services, settings: Settings) -> None:
        self.services = services
        self.settings = settings
        self.chat_history = ChatHistoryService(services)

    def jobs(self, values: Mapping[str, Any], record: RunRecord, request: PipelineRequest, shown: Transcript) -> list[Job]:
        """The background work of one answered turn (none for a stopped, failed or empty one), from the
        thread's state after the turn (`values`: the host read it once for all it does at the end)."""
        if shown.stopped or shown.failed or not shown.answer.strip():
            return []
        saved = next((m for m in values.get("messages", []) if m.id == record.assistant_message_id), None)
        jobs: list[Job] = []
        if isinstance(saved, AIMessage) and (documents := cited_documents(message_text(saved))):
            jobs.append(self._record_citations(record, documents))
        response = values.get("chat_response")
        # the "not found" fallback is no answer: indexed, it would only be found again
        if wants_index(request.chat_history_index, self.settings.chat_history_index) and response is not None and not response.fallback:
            turn = AnsweredTurn(record.tenant_id, record.owner_id, record.session_id, record.request_id,
                                record.user_message_id, record.assistant_message_id, record.query, shown.answer)
            jobs.append(self._index(turn, drawn_on(values)))
        return jobs

    async def _record_citations(self, record: RunRecord, documents: set[str]) -> None:
        try:
            ledger = CitationLedger(self.services.memory_store)
            await ledger.record(record.tenant_id, record.owner_id, record.assistant_message_id, documents)
        except Exception:
            log.warning("recording the citations of %s failed", record.assistant_message_id, exc_info=True)

    async def _index(self, turn: AnsweredTurn, documents: set[str]) -> None:
        try:
            rules = await asyncio.to_thread(self.services.retrieval.knowledge_bases.rules_of, documents)
            access = derived_rule(rules, turn.user_id)
            if access is None:
                log.info("turn %s drew on restricted documents and names no user: not indexed", turn.request_id)
                return
            await self.chat_history.index_turn(dataclasses.replace(turn, access=access, drawn_on=tuple(sorted(documents))))
        except Exception:
            log.warning("indexing turn %s into the chat history failed", turn.request_id, exc_info=True)
