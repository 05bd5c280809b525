"""The citation ledger: which documents each caller's answers cited, across all their sessions
(seed: memory_affinity.go counts "documents this caller cited in past answers").

One item per answer, keyed by the assistant message id, in the caller's own namespace of the
LangGraph store that holds long-term memories (SQLite, or Redis shared by replicas). An item per
answer instead of a counter per document: writing is idempotent (a resumed run writes the same
key again) and two concurrent answers never lose each other's increment.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping

from langgraph.store.base import BaseStore

from ragline import defaults
from ragline.memory.service import _label

NAMESPACE_ROOT = ("ragline", "citations")

_CITED_DOCUMENT = re.compile(r"<kb\b[^>]*\bknowledge_id=\"([^\"]+)\"")


def cited_documents(text: str) -> set[str]:
    """The documents an answer cites inline (the kb tags kept in the stored answer text)."""
    return set(_CITED_DOCUMENT.findall(text or ""))


def count_citations(answers: Mapping[str, Iterable[str]]) -> Counter[str]:
    """Per document, the number of answers citing it (an answer counts a document once)."""
    counts: Counter[str] = Counter()
    for documents in answers.values():
        counts.update(set(documents))
    return counts


class CitationLedger:
    def __init__(self, store: BaseStore) -> None:
        self.store = store

    @staticmethod
    def namespace(tenant_id: str, user_id: str) -> tuple[str, ...]:
        return (*NAMESPACE_ROOT, _label(tenant_id), _label(user_id))

    async def record(self, tenant_id: str, user_id: str, message_id: str, documents: Iterable[str]) -> None:
        cited = sorted(set(documents))
        if cited and message_id:
            await self.store.aput(self.namespace(tenant_id, user_id), message_id, {"documents": cited}, index=False)

    async def answers(self, tenant_id: str, user_id: str) -> dict[str, list[str]]:
        """The caller's recorded answers (at most the scan limit): message id -> cited documents."""
        namespace = self.namespace(tenant_id, user_id)
        items = await self.store.asearch(namespace, limit=defaults.MEMORY_AFFINITY_MAX_ANSWERS)
        # asearch matches by prefix: keep this caller's own namespace only
        return {item.key: list(item.value.get("documents", [])) for item in items if tuple(item.namespace) == namespace}
