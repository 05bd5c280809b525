import json

import pytest

from ragline.entities.duckdb_store import DuckDBGraphStore
from ragline.entities.extraction import (
    ExtractionError,
    extract_document_graph,
    extract_graph,
    extract_query_entities,
    parse_entities,
    parse_graph,
)
from ragline.entities.types import Namespace
from ragline.retrieval.catalog import ChunkRecord
from ragline.services import Services
from tests.scripted_model import Reply, last_user_text


def _chat():
    return Services().chat()  # the configured model: the scripted one in these tests


@pytest.mark.parametrize("reply, expected", [
    ('{"entities": ["Eiffel Tower", "Paris"]}', ["Eiffel Tower", "Paris"]),
    ('```json\n["Gustave  Eiffel"]\n```', ["Gustave Eiffel"]),
    ('Sure! {"entities": [{"name": "Louvre"}, "louvre", ""]} hope this helps', ["Louvre"]),
    ('{"entities": []}', []),
])
def test_query_entities_are_parsed_leniently(reply, expected):
    assert parse_entities(reply) == expected


@pytest.mark.parametrize("reply", ["no json here", '{"entities": "Paris"}'])
def test_a_reply_without_an_entity_list_is_an_extraction_error(reply):
    with pytest.raises(ExtractionError):
        parse_entities(reply)


def test_graph_replies_drop_entities_without_names_and_relationships_without_endpoints():
    graph = parse_graph(json.dumps({"entities": [{"name": "Paris", "type": "city"}, {"type": "x"}, "bad"],
                                    "relationships": [{"source": "Eiffel Tower", "target": "Paris", "relation": "in"},
                                                      {"source": "", "target": "Paris"}]}))
    assert [e.name for e in graph.entities] == ["Paris"]
    assert [(r.source, r.target, r.relation) for r in graph.relationships] == [("Eiffel Tower", "Paris", "in")]


async def test_extract_entity_asks_the_model_with_the_graph_extraction_prompt_and_a_json_schema(scripted_model):
    scripted_model.on(lambda b: True, Reply.text('{"entities": ["Gustave Eiffel"]}'))
    assert await extract_query_entities("Who was Gustave Eiffel?", _chat()) == ["Gustave Eiffel"]
    body = scripted_model.requests[-1]
    assert "Question: Who was Gustave Eiffel?" in last_user_text(body)
    assert body["response_format"]["json_schema"]["name"] == "query_entities"


async def test_a_server_rejecting_structured_output_gets_the_plain_prompt(scripted_model):
    scripted_model.on(lambda b: "response_format" in b, Reply(status=400, error="response_format not supported"))
    scripted_model.on(lambda b: True, Reply.text('["Paris"]'))
    assert await extract_query_entities("Tell me about Paris", _chat()) == ["Paris"]
    assert "response_format" not in scripted_model.requests[-1]


async def test_extract_graph_returns_entities_and_relationships(scripted_model):
    scripted_model.on(lambda b: True, Reply.text(json.dumps({
        "entities": [{"name": "Eiffel Tower", "type": "landmark"}], "relationships": []})))
    graph = await extract_graph("The Eiffel Tower is in Paris.", _chat())
    assert [e.name for e in graph.entities] == ["Eiffel Tower"]
    assert "Text:\nThe Eiffel Tower is in Paris." in last_user_text(scripted_model.requests[-1])


def _passage(body) -> str:
    return last_user_text(body).split("Text:")[-1]


async def test_document_extraction_writes_one_graph_per_document_with_chunk_ids(scripted_model, tmp_path):
    designer = {"entities": [{"name": "Gustave Eiffel", "type": "person"}, {"name": "Eiffel Tower"}],
                "relationships": [{"source": "Gustave Eiffel", "target": "Eiffel Tower", "relation": "designed"}]}
    place = {"entities": [{"name": "Eiffel Tower", "type": "landmark"}, {"name": "Paris"}],
             "relationships": [{"source": "Eiffel Tower", "target": "Paris", "relation": "located in"}]}
    scripted_model.on(lambda b: "designed" in _passage(b), Reply.text(json.dumps(designer)))
    scripted_model.on(lambda b: "broken" in _passage(b), Reply.text("not json at all"))
    scripted_model.on(lambda b: True, Reply.text(json.dumps(place)))
    chunks = [ChunkRecord("c1", "kb", "doc", 0, "The Eiffel Tower is in Paris."),
              ChunkRecord("c2", "kb", "doc", 1, "Gustave Eiffel designed it."),
              ChunkRecord("c3", "kb", "doc", 2, "broken chunk"),
              ChunkRecord("p1", "kb", "doc", 0, "parent text", indexed=False)]
    store = DuckDBGraphStore(tmp_path / "g.duckdb")
    report = await extract_document_graph(store, "kb", "doc", chunks, _chat())
    assert (report.chunks, report.failed_chunks, report.nodes, report.relations) == (3, 1, 3, 2)
    tower = (await store.search([Namespace("kb")], ["Eiffel Tower"])).nodes[0]
    assert tower.chunk_ids == ["c1", "c2"] and tower.type == "landmark"
    assert len(scripted_model.requests) == 3  # the parent chunk is not extracted


async def test_a_document_whose_every_chunk_fails_keeps_its_previous_graph(scripted_model, tmp_path):
    store = DuckDBGraphStore(tmp_path / "g.duckdb")
    scripted_model.on(lambda b: True, Reply.text('{"entities": [{"name": "Paris"}], "relationships": []}'), times=1)
    scripted_model.on(lambda b: True, Reply(status=500, error="down"))
    await extract_document_graph(store, "kb", "doc", [ChunkRecord("c1", "kb", "doc", 0, "Paris.")], _chat())
    report = await extract_document_graph(store, "kb", "doc", [ChunkRecord("c1", "kb", "doc", 0, "Paris again.")], _chat())
    assert report.failed_chunks == 1 and report.errors
    assert [n.name for n in (await store.search([Namespace("kb")], ["paris"])).nodes] == ["Paris"]
