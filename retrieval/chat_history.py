"""The chat-history knowledge base of one user (seed: IndexMessageToKB's "база знаний истории чата").

Each user of a tenant gets one document knowledge base, created on first use, holding the
question/answer pairs of their indexed turns; a later question that asks to search past
conversations adds it to its search targets. It is an ordinary document base (so vector and
keyword search, rerank and citations apply unchanged), told apart by a reserved name and a tag:
a base that merely has the name but not the tag is never written to or searched as history.
"""

from __future__ import annotations

from ragline.contracts.passages import SearchTarget
from ragline.retrieval.catalog import Catalog
from ragline.retrieval.types import KnowledgeBase

CHAT_HISTORY_TAG = "chat_history"
NAME_PREFIX = "chat-history/"


def chat_history_name(user_id: str) -> str:
    return f"{NAME_PREFIX}{user_id}"


def is_chat_history(kb: KnowledgeBase) -> bool:
    return CHAT_HISTORY_TAG in kb.tags and kb.name.startswith(NAME_PREFIX)


def find_chat_history(catalog: Catalog, tenant_id: str, user_id: str) -> KnowledgeBase | None:
    """The user's chat-history base in this tenant, or None before their first indexed turn."""
    kb = catalog.find_kb(tenant_id, chat_history_name(user_id))
    return kb if kb is not None and is_chat_history(kb) else None


def tenant_chat_histories(catalog: Catalog, tenant_id: str) -> list[KnowledgeBase]:
    """Every chat-history base the tenant owns (shared bases of others never count)."""
    return [kb for kb in catalog.list_kbs() if kb.owned_by(tenant_id) and is_chat_history(kb)]


def chat_history_targets(catalog: Catalog, tenant_id: str, user_id: str) -> list[SearchTarget]:
    """The search target of the caller's past conversations (none yet: nothing to add)."""
    kb = find_chat_history(catalog, tenant_id, user_id)
    return [SearchTarget(knowledge_base_id=kb.id)] if kb is not None else []
