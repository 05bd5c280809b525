"""Which knowledge a reader may search: the check every door applies to the knowledge bases and
documents a question (or an assistant's configuration) names, before anything is searched.

Another tenant's knowledge base, or a document of one, is "not found": its existence never leaks.
"""

from __future__ import annotations

from typing import Any

from ragline.service.access import NotFoundError, Principal


def knowledge_named(settings: Any) -> tuple[list[str], list[str]]:
    """The knowledge base ids and document ids a request or an AgentConfig names (unset: none)."""
    targets = getattr(settings, "search_targets", None) or ()
    kb_ids = [*(getattr(settings, "knowledge_base_ids", None) or ()), *(t.knowledge_base_id for t in targets)]
    return kb_ids, list(getattr(settings, "knowledge_ids", None) or ())


def authorize_knowledge(stack: Any, who: Principal, kb_ids: list[str], knowledge_ids: list[str]) -> None:
    """Raises unless `who` can read every knowledge base and document named (a RetrievalStack's catalog)."""
    readable = {kb.id for kb in stack.searcher.authorize(kb_ids, who)} if kb_ids else set()
    documents = stack.catalog.get_knowledge_many(knowledge_ids)
    for knowledge_id in knowledge_ids:
        document = documents.get(knowledge_id)
        if document is None or document.access.lets_in(who) is None:  # an unreadable document is as missing as none
            raise NotFoundError(f"document {knowledge_id} not found")
        if document.knowledge_base_id not in readable:
            stack.knowledge_bases.get(document.knowledge_base_id, who)
