"""A small real catalog (knowledge bases, documents, chunks) and entity graph for node tests.

Chunks go straight into the catalog (entity search reads chunks by id and needs no vectors);
the graph goes into the store the settings choose, DuckDB under the test's data directory
unless RAGLINE_GRAPH_BOLT_URL points at FalkorDB.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from langgraph.runtime import Runtime

from ragline.contracts.context import RunContext, RunHost
from ragline.entities.store import GraphStore, open_graph_store
from ragline.entities.types import GraphNode, GraphRelation
from ragline.models.embeddings import Embedder
from ragline.retrieval.catalog import ChunkRecord
from ragline.retrieval.config import RetrievalConfig
from ragline.retrieval.stack import RetrievalStack
from ragline.retrieval.types import Knowledge, KnowledgeBase
from ragline.services import Services
from ragline.settings import get_settings


@dataclass
class World:
    stack: RetrievalStack
    store: GraphStore
    tenant_id: str = "default"
    kbs: dict[str, KnowledgeBase] = field(default_factory=dict)

    @classmethod
    def build(cls, root: Path) -> World:
        settings = RetrievalConfig(redis_url=None, chroma_url=None)
        stack = RetrievalStack.build(root / "retrieval", Embedder(model="ragline/multilingual-e5-small"), settings)
        return cls(stack, open_graph_store(get_settings()))

    def runtime(self, tenant_id: str = "default", user_id: str = "default", groups: tuple[str, ...] = ()) -> Runtime[RunContext]:
        services = Services(get_settings(), retrieval_factory=lambda: self.stack, graph_store_factory=lambda: self.store)
        return Runtime(context=RunContext(tenant_id=tenant_id, user_id=user_id, groups=groups, host=RunHost(services=services)))

    async def kb(self, name: str, graph: bool = True, tenant_id: str = "default", shared: bool = False) -> KnowledgeBase:
        kb = self.stack.knowledge_bases.create(name, tenant_id=tenant_id, shared=shared)
        self.kbs[name] = kb
        await self.store.set_extraction_enabled(kb.id, graph)
        return kb

    def document(self, kb: KnowledgeBase, title: str, passages: list[str], metadata: dict | None = None) -> tuple[Knowledge, list[ChunkRecord]]:
        knowledge = Knowledge(id=f"{kb.name}-{title}".lower().replace(" ", "-"), knowledge_base_id=kb.id,
                              tenant_id=kb.tenant_id, title=title, source=f"test:{title}", metadata=metadata or {})
        chunks = [ChunkRecord(f"{knowledge.id}-c{i}", kb.id, knowledge.id, i, text, metadata={"title": title})
                  for i, text in enumerate(passages)]
        self.stack.catalog.replace_documents(kb.id, [(knowledge, chunks, "\n".join(passages))])
        return knowledge, chunks

    async def graph(self, knowledge: Knowledge, nodes: dict[str, list[str]], relations: list[tuple[str, str, str, list[str]]] = ()) -> None:
        """nodes: name -> chunk ids; relations: (source, relation, target, chunk ids)."""
        kb, doc = knowledge.knowledge_base_id, knowledge.id
        await self.store.replace_document(
            kb, doc,
            [GraphNode(name, kb, doc, chunk_ids=ids) for name, ids in nodes.items()],
            [GraphRelation(s, t, r, kb, doc, chunk_ids=ids) for s, r, t, ids in relations],
        )


async def landmarks(world: World) -> tuple[KnowledgeBase, Knowledge, list[ChunkRecord]]:
    """A base "Landmarks" with one document of three passages, and the graph read from it: the
    Eiffel Tower and Paris (first passage), Gustave Eiffel (second), who designed the tower."""
    kb = await world.kb("Landmarks")
    tower, chunks = world.document(kb, "Tower", ["The Eiffel Tower is in Paris.", "Gustave Eiffel's company built it.", "Unrelated."])
    await world.graph(tower, {"Eiffel Tower": [chunks[0].id], "Paris": [chunks[0].id], "Gustave Eiffel": [chunks[1].id]},
                      [("Gustave Eiffel", "designed", "Eiffel Tower", [chunks[1].id])])
    return kb, tower, chunks
