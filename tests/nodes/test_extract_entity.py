from ragline.contracts.passages import SearchTarget
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import TurnIds
from ragline.nodes.extract_entity import extract_entity
from tests.entities.conftest import world  # noqa: F401 (fixture)
from tests.scripted_model import Reply, last_user_text


def _state(request, intent="kb_search", rewrite=""):
    return {"request": request, "turn": TurnIds("s", "r", "u", "a"), "intent": intent, "rewrite_query": rewrite}


async def test_extract_entity_writes_the_question_entities_and_the_graph_enabled_knowledge_bases(world, scripted_model):
    graph_kb = await world.kb("Landmarks")
    plain_kb = await world.kb("Plain", graph=False)
    scripted_model.on(lambda b: True, Reply.text('{"entities": ["Eiffel Tower", "Gustave Eiffel"]}'))
    request = PipelineRequest(query="who built it?", knowledge_base_ids=(plain_kb.id, graph_kb.id))
    update = await extract_entity(_state(request, rewrite="Who built the Eiffel Tower?"), world.runtime())
    assert update == {"entities": ["Eiffel Tower", "Gustave Eiffel"], "entity_kb_ids": [graph_kb.id]}
    prompt = last_user_text(scripted_model.requests[-1])
    assert "Question: Who built the Eiffel Tower?" in prompt  # the rewritten question is preferred


async def test_extract_entity_finds_the_knowledge_base_of_requested_documents(world, scripted_model):
    kb = await world.kb("Landmarks")
    knowledge, _ = world.document(kb, "Tower", ["The Eiffel Tower is in Paris."])
    scripted_model.on(lambda b: True, Reply.text('["Paris"]'))
    update = await extract_entity(_state(PipelineRequest(query="Paris?", knowledge_ids=(knowledge.id,))), world.runtime())
    assert update == {"entities": ["Paris"], "entity_kb_ids": [kb.id]}


async def test_extract_entity_is_skipped_when_the_intent_needs_no_knowledge_retrieval(world, scripted_model):
    kb = await world.kb("Landmarks")
    for intent in ("greeting", "chitchat", "web_search", "follow_up"):
        assert await extract_entity(_state(PipelineRequest(query="hi", knowledge_base_ids=(kb.id,)), intent), world.runtime()) == {}
    assert scripted_model.requests == []


async def test_extract_entity_is_skipped_when_no_knowledge_base_in_scope_extracts_graphs(world, scripted_model):
    plain = await world.kb("Plain", graph=False)
    other_graph_kb = await world.kb("Elsewhere")
    request = PipelineRequest(query="q", search_targets=(SearchTarget(knowledge_base_id=plain.id),))
    assert await extract_entity(_state(request), world.runtime()) == {}
    assert other_graph_kb.id and scripted_model.requests == []


async def test_a_failing_model_leaves_the_entities_empty_and_the_turn_goes_on(world, scripted_model):
    kb = await world.kb("Landmarks")
    scripted_model.on(lambda b: True, Reply(status=500, error="model down"))
    assert await extract_entity(_state(PipelineRequest(query="q", knowledge_base_ids=(kb.id,))), world.runtime()) == {}


async def test_an_unknown_knowledge_base_does_not_stop_the_turn(world, scripted_model):
    assert await extract_entity(_state(PipelineRequest(query="q", knowledge_base_ids=("missing",))), world.runtime()) == {}
    assert scripted_model.requests == []
