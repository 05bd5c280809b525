"""The GraphStore contract, run against DuckDB and against Neo4j's driver on FalkorDB."""

from ragline.entities.types import GraphNode, GraphRelation, Namespace


def _node(name, kb, doc, chunks, type_="", description=""):
    return GraphNode(name, kb, doc, type_, description, list(chunks))


def _rel(source, target, relation, kb, doc, chunks):
    return GraphRelation(source, target, relation, kb, doc, "", list(chunks))


async def _eiffel_document(store, kb, doc="d1"):
    await store.replace_document(kb, doc, [
        _node("Eiffel Tower", kb, doc, ["c1"], "landmark", "A lattice tower"),
        _node("Paris", kb, doc, ["c1", "c2"], "city"),
        _node("Gustave Eiffel", kb, doc, ["c3"], "person"),
    ], [
        _rel("Eiffel Tower", "Paris", "located in", kb, doc, ["c1"]),
        _rel("Gustave Eiffel", "Eiffel Tower", "designed", kb, doc, ["c3"]),
    ])


async def test_entity_search_matches_node_names_containing_the_entity_exact_match_first(graph_store, kb_id):
    await _eiffel_document(graph_store, kb_id)
    match = await graph_store.search([Namespace(kb_id)], ["eiffel tower"])
    assert [n.name for n in match.nodes] == ["Eiffel Tower"]
    match = await graph_store.search([Namespace(kb_id)], ["EIFFEL"])
    assert [n.name for n in match.nodes] == ["Eiffel Tower", "Gustave Eiffel"]  # equal rank: alphabetical
    assert match.nodes[0].chunk_ids == ["c1"] and match.nodes[0].type == "landmark"


async def test_entity_search_matches_node_names_contained_in_the_entity(graph_store, kb_id):
    await _eiffel_document(graph_store, kb_id)
    match = await graph_store.search([Namespace(kb_id)], ["the Eiffel Tower in Paris"])
    assert [n.name for n in match.nodes] == ["Paris", "Eiffel Tower"]  # Paris is cited by more chunks


async def test_entity_search_returns_the_relations_around_matched_nodes(graph_store, kb_id):
    await _eiffel_document(graph_store, kb_id)
    match = await graph_store.search([Namespace(kb_id)], ["Gustave Eiffel"])
    assert [n.name for n in match.nodes] == ["Gustave Eiffel"]
    assert [(r.source, r.relation, r.target, r.chunk_ids) for r in match.relations] == [
        ("Gustave Eiffel", "designed", "Eiffel Tower", ["c3"])]


async def test_entity_search_stays_inside_its_knowledge_base_and_document_namespace(graph_store, kb_id):
    other_kb = kb_id + "-other"
    await _eiffel_document(graph_store, kb_id, "d1")
    await graph_store.replace_document(kb_id, "d2", [_node("Eiffel Tower", kb_id, "d2", ["c9"])], [])
    await graph_store.replace_document(other_kb, "d3", [_node("Eiffel Tower", other_kb, "d3", ["c8"])], [])
    whole = await graph_store.search([Namespace(kb_id)], ["Eiffel Tower"])
    assert sorted((n.knowledge_id, n.chunk_ids[0]) for n in whole.nodes) == [("d1", "c1"), ("d2", "c9")]
    scoped = await graph_store.search([Namespace(kb_id, "d2")], ["Eiffel Tower"])
    assert [(n.knowledge_id, n.chunk_ids) for n in scoped.nodes] == [("d2", ["c9"])] and scoped.relations == []
    both = await graph_store.search([Namespace(kb_id, "d2"), Namespace(other_kb)], ["Eiffel Tower"])
    assert [n.knowledge_base_id for n in both.nodes] == [kb_id, other_kb]


async def test_replacing_a_document_graph_never_duplicates_nodes(graph_store, kb_id):
    await _eiffel_document(graph_store, kb_id)
    await graph_store.replace_document(kb_id, "d1", [_node("Eiffel Tower", kb_id, "d1", ["c7"])], [])
    match = await graph_store.search([Namespace(kb_id)], ["eiffel"])
    assert [(n.name, n.chunk_ids) for n in match.nodes] == [("Eiffel Tower", ["c7"])] and match.relations == []


async def test_nodes_with_the_same_name_are_merged_and_relation_endpoints_become_nodes(graph_store, kb_id):
    await graph_store.replace_document(kb_id, "d1", [
        _node("Eiffel Tower", kb_id, "d1", ["c1"], "landmark"),
        _node("eiffel  TOWER", kb_id, "d1", ["c2"], "", "the longer description"),
    ], [_rel("Eiffel Tower", "Champ de Mars", "stands on", kb_id, "d1", ["c2"])])
    tower = (await graph_store.search([Namespace(kb_id)], ["eiffel tower"])).nodes
    assert [(n.name, n.type, n.description, n.chunk_ids) for n in tower] == [
        ("Eiffel Tower", "landmark", "the longer description", ["c1", "c2"])]
    field = await graph_store.search([Namespace(kb_id)], ["Champ de Mars"])
    assert [(n.name, n.chunk_ids) for n in field.nodes] == [("Champ de Mars", ["c2"])]
    assert [r.relation for r in field.relations] == ["stands on"]


async def test_deleting_a_document_or_a_knowledge_base_removes_its_graph(graph_store, kb_id):
    await _eiffel_document(graph_store, kb_id, "d1")
    await graph_store.replace_document(kb_id, "d2", [_node("Paris", kb_id, "d2", ["c5"])], [])
    await graph_store.set_extraction_enabled(kb_id, True)
    await graph_store.delete_document(kb_id, "d1")
    assert [n.knowledge_id for n in (await graph_store.search([Namespace(kb_id)], ["paris"])).nodes] == ["d2"]
    await graph_store.delete_knowledge_base(kb_id)
    assert (await graph_store.search([Namespace(kb_id)], ["paris"])).nodes == []
    assert await graph_store.extraction_enabled([kb_id]) == set()


async def test_graph_extraction_is_recorded_per_knowledge_base(graph_store, kb_id):
    other = kb_id + "-b"
    await graph_store.set_extraction_enabled(kb_id, True)
    await graph_store.set_extraction_enabled(other, True)
    await graph_store.set_extraction_enabled(other, False)
    assert await graph_store.extraction_enabled([kb_id, other, "never-seen"]) == {kb_id}


async def test_an_empty_or_blank_entity_list_matches_nothing(graph_store, kb_id):
    await _eiffel_document(graph_store, kb_id)
    assert (await graph_store.search([Namespace(kb_id)], [])).nodes == []
    assert (await graph_store.search([Namespace(kb_id)], ["  "])).nodes == []


async def test_one_character_node_names_are_not_matched_by_containment(graph_store, kb_id):
    await graph_store.replace_document(kb_id, "d1", [_node("C", kb_id, "d1", ["c1"]), _node("C++", kb_id, "d1", ["c2"])], [])
    match = await graph_store.search([Namespace(kb_id)], ["C++ templates"])
    assert [n.name for n in match.nodes] == ["C++"]
