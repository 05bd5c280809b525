"""Knowledge base CRUD with tenant ownership; deleting a KB removes its vectors (image vectors too) and keyword rows.

Replaces the seed's KnowledgeBaseService (knowledgebase.go) for create/list/update/delete and its
authorizeKBAccess check.
"""

from __future__ import annotations

import asyncio
import builtins
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ragline.contracts.access import AccessDecision, AccessRule, Principal, decide
from ragline.retrieval.catalog import Catalog
from ragline.retrieval.errors import (
    KnowledgeBaseAccessError,
    KnowledgeBaseExistsError,
    KnowledgeBaseNotFoundError,
    ReadOnlyKeyError,
    RetrievalError,
)
from ragline.retrieval.types import (
    ChunkingConfig,
    FAQIndexMode,
    Knowledge,
    KnowledgeBase,
    KnowledgeBaseType,
)

if TYPE_CHECKING:
    from ragline.retrieval.hybrid import StoreEngines  # the engines import Chroma: a name lookup needs neither


def check_writable(kb: KnowledgeBase, who: Principal) -> None:
    """Knowledge writes need the owning tenant and a key that may write (not read-only)."""
    if not kb.owned_by(who.tenant_id):
        raise KnowledgeBaseAccessError(f"tenant {who.tenant_id} does not own knowledge base {kb.name}")
    if who.read_only:
        raise ReadOnlyKeyError("this API key is read-only: it may search and ask, not change knowledge")


class KnowledgeBaseService:
    def __init__(self, catalog: Catalog, stores: dict[str, StoreEngines], embedding_model: str,
                 embedding_base_url: str = "") -> None:
        self.catalog = catalog
        self.stores = stores
        self.embedding_model = embedding_model
        self.embedding_base_url = embedding_base_url
        # what else keeps state per base (the wiki status, images in Redis): blocking calls, run in a thread
        self.on_delete: builtins.list[Callable[[str], None]] = []

    def create(
        self, name: str, tenant_id: str = "default", type: KnowledgeBaseType = KnowledgeBaseType.DOCUMENT,
        description: str = "", tags: builtins.list[str] | None = None, chunking: ChunkingConfig | None = None,
        faq_index_mode: FAQIndexMode = FAQIndexMode.QUESTION_ANSWER, shared: bool = False,
        embedding_model: str | None = None, embedding_base_url: str | None = None, vector_store: str = "default",
        wiki_enabled: bool = False,
    ) -> KnowledgeBase:
        name = name.strip()
        if not name:
            raise RetrievalError("a knowledge base needs a non-empty name")
        if vector_store not in self.stores:
            raise RetrievalError(f"no vector store named {vector_store} is configured")
        if self.catalog.find_kb(tenant_id, name) is not None:
            raise KnowledgeBaseExistsError(f"knowledge base {name} already exists")
        kb = KnowledgeBase(
            id=uuid.uuid4().hex, tenant_id=tenant_id, name=name, type=KnowledgeBaseType(type),
            description=description, tags=sorted(set(tags or [])), chunking=chunking or ChunkingConfig(),
            faq_index_mode=FAQIndexMode(faq_index_mode), shared=shared, vector_store=vector_store, wiki_enabled=wiki_enabled,
            embedding_model=embedding_model or self.embedding_model,
            embedding_base_url=self.embedding_base_url if embedding_base_url is None else embedding_base_url,
        )
        self.catalog.insert_kb(kb)
        return kb

    def get(self, kb_id: str, who: Principal) -> KnowledgeBase:
        kb = self.catalog.get_kb(kb_id)
        if kb is None:
            raise KnowledgeBaseNotFoundError(f"knowledge base {kb_id} does not exist")
        return self._authorized(kb, who)

    def get_by_name(self, name: str, who: Principal) -> KnowledgeBase:
        kb = self.catalog.find_kb(who.tenant_id, name.strip())
        if kb is None:
            shared = [k for k in self.catalog.list_kbs() if k.shared and k.name == name.strip()]
            if not shared:
                raise KnowledgeBaseNotFoundError(f"knowledge base {name} does not exist")
            kb = shared[0]
        return self._authorized(kb, who)

    def resolve(self, name_or_id: str, who: Principal) -> KnowledgeBase:
        """A KB by name first (what people type), then by id (what programs pass)."""
        try:
            return self.get_by_name(name_or_id, who)
        except KnowledgeBaseNotFoundError:
            return self.get(name_or_id, who)

    def list(self, who: Principal) -> builtins.list[KnowledgeBase]:
        return [kb for kb in self.catalog.list_kbs() if kb.readable_by(who)]

    def readable_document(self, knowledge_id: str, who: Principal) -> Knowledge | None:
        """The document when `who` may read it; None when it is missing or unreadable alike."""
        knowledge = self.catalog.get_knowledge(knowledge_id)
        if knowledge is None:
            return None
        return knowledge if self.explain(knowledge, who).allowed else None

    def rules_of(self, knowledge_ids: Iterable[str]) -> builtins.list[AccessRule]:
        """Every rule a reader passes to read these documents: each one's base rule and its own. An id
        the catalog does not hold (a web page's) adds none."""
        return [rule for rules in self.rules_by_document(knowledge_ids).values() for rule in rules]

    def rules_by_document(self, knowledge_ids: Iterable[str]) -> dict[str, builtins.list[AccessRule]]:
        """Per document the catalog holds, the rules a reader passes to read it (two catalog reads in all)."""
        documents = self.catalog.get_knowledge_many(knowledge_ids)
        kbs = self.catalog.get_kbs(list({d.knowledge_base_id for d in documents.values()}))
        out: dict[str, builtins.list[AccessRule]] = {}
        for knowledge_id, knowledge in documents.items():
            kb = kbs.get(knowledge.knowledge_base_id)
            out[knowledge_id] = [*([kb.access] if kb is not None else []), *([knowledge.access] if knowledge.access is not None else [])]
        return out

    def explain(self, knowledge: Knowledge, who: Principal) -> AccessDecision:
        """Whether `who` may read the document, and the rule that decides it."""
        kb = self.catalog.get_kb(knowledge.knowledge_base_id)
        if kb is None:
            return AccessDecision(False, "its knowledge base no longer exists")
        if kb.tenant_id != who.tenant_id and not kb.shared:
            return AccessDecision(False, f"it belongs to another tenant than {who.tenant_id}")
        if not who.may_name(kb.id) and not who.may_name(kb.name):
            return AccessDecision(False, "the API key is limited to other knowledge bases")
        return decide(kb.access, knowledge.access, who)

    def set_document_access(self, knowledge_id: str, who: Principal, rule: AccessRule) -> Knowledge:
        """Narrow (or open) one document in the catalog: a writer of its base who may read it sets it; it
        holds from the next search on. The doors call IngestionService.set_access, which also removes
        the wiki pages written under the old rule."""
        knowledge = self.readable_document(knowledge_id, who)  # who cannot read it cannot learn it exists
        if knowledge is None:
            raise KnowledgeBaseNotFoundError(f"document {knowledge_id} does not exist")
        self._owned(knowledge.knowledge_base_id, who)
        changed = self.catalog.set_knowledge_access(knowledge_id, rule)
        if changed is None:
            raise KnowledgeBaseNotFoundError(f"document {knowledge_id} does not exist")
        return changed

    def update(self, kb_id: str, who: Principal, *, name: str | None = None,
               description: str | None = None, tags: builtins.list[str] | None = None, shared: bool | None = None,
               wiki_enabled: bool | None = None, access: AccessRule | None = None) -> KnowledgeBase:
        kb = self._owned(kb_id, who)
        if name is not None and name.strip() != kb.name:
            if not name.strip():
                raise RetrievalError("a knowledge base needs a non-empty name")
            if self.catalog.find_kb(who.tenant_id, name.strip()) is not None:
                raise KnowledgeBaseExistsError(f"knowledge base {name} already exists")
            kb.name = name.strip()
        if description is not None:
            kb.description = description
        if tags is not None:
            kb.tags = sorted(set(tags))
        if shared is not None:
            kb.shared = shared
        if wiki_enabled is not None:  # the caller schedules the rebuild that writes (or removes) the pages
            kb.wiki_enabled = wiki_enabled
        if access is not None:
            kb.access = access
        self.catalog.update_kb(kb)
        return kb

    async def delete(self, kb_id: str, who: Principal) -> None:
        """Stores first, catalog last: a failure leaves the KB listed, so deleting again finishes the job."""
        kb = self._owned(kb_id, who)
        engines = self.stores[kb.vector_store]
        await engines.vector.delete_kb(kb.id)
        await engines.vector.delete_image_spaces(kb.id)  # image vectors live beside the text rows, one space per image model
        await engines.keyword.delete_kb(kb.id)
        for forget in self.on_delete:  # before the catalog: the images' hook reads which documents the base holds
            await asyncio.to_thread(forget, kb.id)
        self.catalog.delete_kb(kb.id)

    def _owned(self, kb_id: str, who: Principal) -> KnowledgeBase:
        kb = self.get(kb_id, who)
        check_writable(kb, who)
        return kb

    @staticmethod
    def _authorized(kb: KnowledgeBase, who: Principal) -> KnowledgeBase:
        if not kb.readable_by(who):
            # the same words as a missing base: another tenant's base must not be confirmed to exist
            raise KnowledgeBaseAccessError(f"knowledge base {kb.id} does not exist")
        return kb
