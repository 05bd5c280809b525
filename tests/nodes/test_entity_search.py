
from ragline.contracts.access import AccessRule, Principal
from ragline.contracts.passages import SearchTarget, merge_search_results
from ragline.contracts.request import PipelineRequest
from ragline.entities.store import open_graph_store
from ragline.nodes.entity_search import entity_search
from ragline.settings import get_settings
from tests.entities.conftest import falkordb, world  # noqa: F401 (fixtures)
from tests.entities.world import landmarks


def _state(request, entities, kb_ids, targets=None):
    state = {"request": request, "entities": entities, "entity_kb_ids": kb_ids}
    if targets is not None:
        state["search_targets"] = targets
    return state


async def test_entity_search_turns_matched_nodes_and_relations_into_results_with_score_zero(world):
    kb, tower, chunks = await landmarks(world)
    update = await entity_search(_state(PipelineRequest(query="q", knowledge_base_ids=(kb.id,)), ["Eiffel Tower"], [kb.id]), world.runtime())
    results = update["search_results"]
    assert [r.id for r in results] == [chunks[0].id, chunks[1].id]  # the node's chunk, then its relation's
    first, second = results
    assert (first.score, first.content, first.knowledge_id, first.knowledge_base_id, first.knowledge_title) == (
        0.0, "The Eiffel Tower is in Paris.", tower.id, kb.id, "Tower")
    assert first.metadata["source"] == "graph" and first.metadata["graph_entities"] == ["Eiffel Tower"]
    assert second.metadata["graph_relations"] == ["Gustave Eiffel designed Eiffel Tower"]
    assert [n["name"] for n in update["graph_result"]["nodes"]] == ["Eiffel Tower"]
    assert update["graph_result"]["relations"][0]["relation"] == "designed"


async def test_entity_search_results_merge_with_chunk_search_without_duplicates(world):
    kb, _, chunks = await landmarks(world)
    update = await entity_search(_state(PipelineRequest(query="q", knowledge_base_ids=(kb.id,)), ["Eiffel Tower"], [kb.id]), world.runtime())
    chunk_hit = update["search_results"][0].model_copy(update={"score": 0.8, "metadata": {}})
    merged = merge_search_results([chunk_hit], update["search_results"])
    assert [(r.id, r.score) for r in merged] == [(chunks[0].id, 0.8), (chunks[1].id, 0.0)]


async def test_chunks_of_deleted_documents_and_knowledge_bases_are_dropped(world):
    kb, tower, chunks = await landmarks(world)
    other_doc, other_chunks = world.document(kb, "Museum", ["The Louvre is near the Eiffel Tower."])
    await world.graph(other_doc, {"Eiffel Tower": [other_chunks[0].id]})
    request = PipelineRequest(query="q", knowledge_base_ids=(kb.id,))
    world.stack.catalog.delete_knowledge(kb.id, [tower.id])  # the graph still names its chunks
    update = await entity_search(_state(request, ["Eiffel Tower"], [kb.id]), world.runtime())
    assert [r.id for r in update["search_results"]] == [other_chunks[0].id]
    world.stack.catalog.delete_kb(kb.id)
    assert (await entity_search(_state(request, ["Eiffel Tower"], [kb.id]), world.runtime()))["search_results"] == []


async def test_chunks_outside_the_turns_knowledge_bases_are_dropped(world):
    kb, tower, chunks = await landmarks(world)
    other = await world.kb("Other")
    other_doc, other_chunks = world.document(other, "Secret", ["Eiffel Tower internal notes."])
    # a stale node of the in-scope base pointing at a chunk that lives in another base
    await world.graph(tower, {"Eiffel Tower": [chunks[0].id, other_chunks[0].id]})
    await world.graph(other_doc, {"Eiffel Tower": [other_chunks[0].id]})
    request = PipelineRequest(query="q", knowledge_base_ids=(kb.id,))
    update = await entity_search(_state(request, ["Eiffel Tower"], [kb.id, other.id]), world.runtime())
    assert [r.id for r in update["search_results"]] == [chunks[0].id]


async def test_a_scoped_target_searches_only_its_documents(world):
    kb, tower, chunks = await landmarks(world)
    museum, museum_chunks = world.document(kb, "Museum", ["The Louvre is near the Eiffel Tower."])
    await world.graph(museum, {"Eiffel Tower": [museum_chunks[0].id]})
    targets = [SearchTarget(knowledge_base_id=kb.id, knowledge_ids=(museum.id,))]
    request = PipelineRequest(query="q", search_targets=tuple(targets))
    update = await entity_search(_state(request, ["Eiffel Tower"], [kb.id], targets), world.runtime())
    assert [r.id for r in update["search_results"]] == [museum_chunks[0].id]


async def test_knowledge_bases_of_another_tenant_are_dropped_unless_shared(world):
    private = await world.kb("Private", tenant_id="other-tenant")
    doc, chunks = world.document(private, "Doc", ["Eiffel Tower facts."])
    await world.graph(doc, {"Eiffel Tower": [chunks[0].id]})
    request = PipelineRequest(query="q", knowledge_base_ids=(private.id,))
    assert (await entity_search(_state(request, ["Eiffel Tower"], [private.id]), world.runtime()))["search_results"] == []
    world.stack.knowledge_bases.update(private.id, Principal.operator_of("other-tenant"), shared=True)
    shared = await entity_search(_state(request, ["Eiffel Tower"], [private.id]), world.runtime())
    assert [r.id for r in shared["search_results"]] == [chunks[0].id]


async def test_entity_search_returns_at_most_30_chunks(world):
    kb = await world.kb("Big")
    doc, chunks = world.document(kb, "Many", [f"Paris fact number {i}." for i in range(40)])
    await world.graph(doc, {"Paris": [c.id for c in chunks]})
    update = await entity_search(_state(PipelineRequest(query="q", knowledge_base_ids=(kb.id,)), ["Paris"], [kb.id]), world.runtime())
    assert [r.id for r in update["search_results"]] == [c.id for c in chunks[:30]]


async def test_without_entities_entity_search_does_nothing(world):
    kb, _, _ = await landmarks(world)
    assert await entity_search(_state(PipelineRequest(query="q", knowledge_base_ids=(kb.id,)), [], [kb.id]), world.runtime()) == {}
    assert await entity_search(_state(PipelineRequest(query="q", knowledge_base_ids=(kb.id,)), ["Paris"], []), world.runtime()) == {}


async def test_an_unreachable_graph_server_yields_no_graph_results(world, monkeypatch):
    kb, _, _ = await landmarks(world)
    monkeypatch.setenv("RAGLINE_GRAPH_BOLT_URL", "bolt://127.0.0.1:9")  # nothing listens on the discard port
    get_settings.cache_clear()
    world.store = open_graph_store(get_settings())
    assert await entity_search(_state(PipelineRequest(query="q", knowledge_base_ids=(kb.id,)), ["Paris"], [kb.id]), world.runtime()) == {}


async def test_entity_search_over_neo4j_bolt(world, falkordb, monkeypatch):
    monkeypatch.setenv("RAGLINE_GRAPH_BOLT_URL", falkordb.bolt_url)
    get_settings.cache_clear()
    world.store = open_graph_store(get_settings())
    kb, _, chunks = await landmarks(world)
    update = await entity_search(_state(PipelineRequest(query="q", knowledge_base_ids=(kb.id,)), ["gustave"], [kb.id]), world.runtime())
    assert [r.id for r in update["search_results"]] == [chunks[1].id]
    assert update["graph_result"]["relations"][0]["target"] == "Eiffel Tower"


async def test_an_entity_is_seen_only_through_passages_the_reader_may_read(world):
    kb = await world.kb("Landmarks")
    secret, chunks = world.document(kb, "Secret", ["The Eiffel Tower hides a private apartment."])
    await world.graph(secret, {"Eiffel Tower": [chunks[0].id]})
    world.stack.knowledge_bases.set_document_access(secret.id, Principal.operator_of("default"), AccessRule(groups=["staff"]))
    state = _state(PipelineRequest(query="q", knowledge_base_ids=(kb.id,)), ["Eiffel Tower"], [kb.id])
    outsider = await entity_search(state, world.runtime(user_id="visitor"))
    assert outsider["search_results"] == [] and outsider["graph_result"] == {"nodes": [], "relations": []}
    insider = await entity_search(state, world.runtime(user_id="guide", groups=("staff",)))
    assert [r.id for r in insider["search_results"]] == [chunks[0].id] and insider["graph_result"]["nodes"]
