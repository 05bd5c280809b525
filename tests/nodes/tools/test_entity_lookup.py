"""The entity_lookup tool: a real catalog and the settings' DuckDB entity graph (tests/entities/world.py), a real citation registry."""

from __future__ import annotations

import pytest

from ragline import defaults
from ragline.citations import Registry
from ragline.entities.store import GraphUnavailableError, UnavailableGraphStore
from ragline.nodes.tools.base import ToolContext
from ragline.nodes.tools.entity_lookup import ENTITY_LOOKUP, NOTHING_KNOWN
from ragline.retrieval.errors import KnowledgeBaseNotFoundError
from ragline.services import Services
from ragline.settings import get_settings
from tests.entities.conftest import world  # noqa: F401 (fixtures)
from tests.entities.world import World, landmarks


def _context(world: World, *knowledge_bases: str, tenant_id: str = "default") -> ToolContext:
    services = Services(get_settings(), retrieval_factory=lambda: world.stack, graph_store_factory=lambda: world.store)
    return ToolContext(services, tenant_id, knowledge_bases, Registry())


async def test_relations_are_text_and_the_chunks_behind_them_cited_passages(world):
    kb, tower, chunks = await landmarks(world)
    context = _context(world, "Landmarks")
    outcome = await ENTITY_LOOKUP.run({"entities": ["eiffel tower", "Eiffel  Tower"]}, context)
    facts, rendered = outcome.content.split("\n\n", 1)
    assert facts == "Entities:\n- Eiffel Tower\nRelations:\n- Gustave Eiffel designed Eiffel Tower"
    assert [(s.chunk_id, s.knowledge_id, s.knowledge_base_id, s.title) for s in outcome.sources] == [
        (chunks[0].id, tower.id, kb.id, "Tower"), (chunks[1].id, tower.id, kb.id, "Tower")]
    assert '<result id="c1" doc="d1" kb="b1" title="Tower">\nThe Eiffel Tower is in Paris.' in rendered
    assert outcome.summary == "2 passages: c1 Tower, c2 Tower"
    assert context.registry.expand_text('<ref id="c2"/>').startswith(f'<kb chunk_id="{chunks[1].id}" knowledge_id="{tower.id}"')


async def test_an_unknown_entity_is_said_plainly(world):
    await landmarks(world)
    outcome = await ENTITY_LOOKUP.run({"entities": ["Louvre"]}, _context(world, "Landmarks"))
    assert (outcome.content, outcome.sources, outcome.summary) == (NOTHING_KNOWN, [], "no entity found")


async def test_only_the_turns_bases_are_searched_and_deleted_documents_say_nothing(world):
    kb, tower, _ = await landmarks(world)
    other = await world.kb("Other")
    secret, secret_chunks = world.document(other, "Secret", ["The Louvre is near the Eiffel Tower."])
    await world.graph(secret, {"Louvre": [secret_chunks[0].id]})
    assert (await ENTITY_LOOKUP.run({"entities": ["Louvre"]}, _context(world, "Landmarks"))).content == NOTHING_KNOWN
    assert (await ENTITY_LOOKUP.run({"entities": ["Louvre"]}, _context(world, "Other"))).sources[0].chunk_id == secret_chunks[0].id
    world.stack.catalog.delete_knowledge(kb.id, [tower.id])  # the graph still names the document's entities and chunks
    assert (await ENTITY_LOOKUP.run({"entities": ["Eiffel Tower"]}, _context(world, "Landmarks"))).content == NOTHING_KNOWN


async def test_another_tenants_base_is_not_found(world):
    await landmarks(world)
    with pytest.raises(KnowledgeBaseNotFoundError, match="Landmarks"):
        await ENTITY_LOOKUP.run({"entities": ["Eiffel Tower"]}, _context(world, "Landmarks", tenant_id="acme"))


async def test_a_base_without_graph_extraction_is_the_calls_error(world):
    await world.kb("Plain", graph=False)
    with pytest.raises(LookupError, match="none of this turn's knowledge bases has an entity graph"):
        await ENTITY_LOOKUP.run({"entities": ["Eiffel Tower"]}, _context(world, "Plain"))


async def test_a_deployment_without_a_graph_says_why(world):
    await world.kb("Landmarks", graph=False)
    services = Services(get_settings(), retrieval_factory=lambda: world.stack, graph_store_factory=lambda: UnavailableGraphStore("no graph here"))
    with pytest.raises(GraphUnavailableError, match="no graph here"):
        await ENTITY_LOOKUP.run({"entities": ["Eiffel Tower"]}, ToolContext(services, "default", ("Landmarks",), Registry()))


@pytest.mark.parametrize(("arguments", "knowledge_bases", "error"), [
    ({}, ("Landmarks",), "needs entities"), ({"entities": "Eiffel Tower"}, ("Landmarks",), "needs entities"),
    ({"entities": ["Eiffel Tower", " "]}, ("Landmarks",), "needs entities"),
    ({"entities": [f"e{i}" for i in range(defaults.AGENT_ENTITY_LOOKUP_MAX + 1)]}, ("Landmarks",), "look up at most 10"),
    ({"entities": ["Eiffel Tower"]}, (), "no knowledge base"),
])
async def test_malformed_calls_are_refused(world, arguments, knowledge_bases, error):
    await landmarks(world)
    with pytest.raises(ValueError, match=error):
        await ENTITY_LOOKUP.run(arguments, _context(world, *knowledge_bases))
