"""The optional ingestion step that fills the entity graph (DuckDB store, scripted extraction model)."""

import json

from ragline.entities.duckdb_store import DuckDBGraphStore
from ragline.entities.types import Namespace
from ragline.ingestion.service import IngestionService, TextDocument
from ragline.services import Services
from tests.scripted_model import Reply

GRAPH = {
    "entities": [{"name": "Aurora", "type": "product", "description": "a weather station"},
                 {"name": "Northwind Instruments", "type": "company", "description": "the maker"}],
    "relationships": [{"source": "Northwind Instruments", "target": "Aurora", "relation": "makes", "description": ""}],
}


async def test_documents_of_a_graph_enabled_base_get_their_entities_and_lose_them_on_delete(stack, tmp_path, scripted_model):
    scripted_model.on(lambda body: True, Reply.text(json.dumps(GRAPH)))
    store = DuckDBGraphStore(tmp_path / "graph.duckdb")
    kb = stack.knowledge_bases.create("graph-kb")
    await store.set_extraction_enabled(kb.id, True)
    service = IngestionService(stack, graph_store=store, chat=Services().chat())
    [doc] = await service.ingest_documents(kb.id, [TextDocument(text="Northwind Instruments makes the Aurora.", title="about", source="about")])
    match = await store.search([Namespace(kb.id)], ["Aurora"])
    assert "Aurora" in [node.name for node in match.nodes]
    await service.delete_knowledge(kb.id, doc.id)
    assert not (await store.search([Namespace(kb.id)], ["Aurora"])).nodes


async def test_bases_without_graph_extraction_make_no_model_call(stack, tmp_path, scripted_model):
    store = DuckDBGraphStore(tmp_path / "graph.duckdb")
    kb = stack.knowledge_bases.create("plain-kb")
    await IngestionService(stack, graph_store=store, chat=Services().chat()).ingest_documents(kb.id, [TextDocument(text="Plain text.", title="t", source="s")])
    assert scripted_model.requests == []
