"""What one question searches: its targets, and the documents each target covers.

Replaces the seed's searchTargets resolution (chat_pipeline/search.go) for every stage that
needs it (chunk search, entity extraction, entity search), so the rules live once: explicit
targets win; otherwise whole knowledge bases, plus named documents grouped by their base; a
target narrowed to documents or tags covers the named documents and those carrying a tag.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ragline.contracts.passages import SearchTarget
from ragline.retrieval.catalog import Catalog


class Scoped(Protocol):
    """What a question names to search (a turn's PipelineRequest): whole bases, documents, targets."""

    @property
    def knowledge_base_ids(self) -> Sequence[str]: ...
    @property
    def knowledge_ids(self) -> Sequence[str]: ...
    @property
    def search_targets(self) -> Sequence[SearchTarget]: ...


def has_knowledge_scope(request: Scoped) -> bool:
    return bool(request.knowledge_base_ids or request.knowledge_ids or request.search_targets)


def resolve_targets(request: Scoped, catalog: Catalog) -> list[SearchTarget]:
    """Explicit targets as given; otherwise whole knowledge bases plus documents grouped by their base."""
    if request.search_targets:
        return list(request.search_targets)
    targets = [SearchTarget(knowledge_base_id=kb_id) for kb_id in dict.fromkeys(request.knowledge_base_ids)]
    by_kb: dict[str, list[str]] = defaultdict(list)
    for knowledge_id, knowledge in catalog.get_knowledge_many(request.knowledge_ids).items():
        by_kb[knowledge.knowledge_base_id].append(knowledge_id)
    whole = {t.knowledge_base_id for t in targets}
    targets += [SearchTarget(knowledge_base_id=kb, knowledge_ids=tuple(ids)) for kb, ids in by_kb.items() if kb not in whole]
    return targets


def target_documents(target: SearchTarget, catalog: Catalog) -> list[str] | None:
    """The documents a target covers, in a stable order: None for a whole base; named, then tagged."""
    if not target.is_scoped:
        return None
    ids = list(target.knowledge_ids)
    if target.tag_ids:
        wanted = set(target.tag_ids)
        ids += [k.id for k in catalog.list_knowledge(target.knowledge_base_id) if wanted & set(k.metadata.get("tags", []))]
    return list(dict.fromkeys(ids))


@dataclass
class DocumentScope:
    """Which documents each knowledge base of a turn allows (None: the whole base)."""

    documents: dict[str, set[str] | None] = field(default_factory=dict)

    @classmethod
    def of(cls, targets: Iterable[SearchTarget], catalog: Catalog, kb_ids: Iterable[str] | None = None) -> DocumentScope:
        """The targets' scope, limited to `kb_ids` when given; a whole-base target wins over scoped ones."""
        allowed = set(kb_ids) if kb_ids is not None else None
        scope = cls()
        for target in targets:
            kb_id = target.knowledge_base_id
            if allowed is not None and kb_id not in allowed:
                continue
            documents = target_documents(target, catalog)
            if documents is None or (kb_id in scope.documents and scope.documents[kb_id] is None):
                scope.documents[kb_id] = None
            else:
                scope.documents[kb_id] = (scope.documents.get(kb_id) or set()) | set(documents)
        return scope

    def allows(self, kb_id: str, knowledge_id: str) -> bool:
        if kb_id not in self.documents:
            return False
        allowed = self.documents[kb_id]
        return allowed is None or knowledge_id in allowed
