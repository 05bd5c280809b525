from ragline.graph.context import RunContext
from ragline.graph.request import PipelineRequest, SearchTarget
from ragline.graph.state import ErrorKind, TurnIds
from ragline.ingestion.service import TextDocument
from ragline.nodes.chunk_search import chunk_search
from ragline.nodes.chunk_search_parallel import check_search_nothing, chunk_search_parallel
from ragline.retrieval.scope import resolve_targets

from tests.nodes.results import hit

TURN = TurnIds("s", "r", "u", "a")


class _Runtime:
    def __init__(self, services, tenant="default"):
        self.context = RunContext(services=services, tenant_id=tenant)


async def _kb_with_two_documents(stack, ingestion):
    kb = stack.knowledge_bases.create("search-kb")
    docs = await ingestion.ingest_documents(kb.id, [
        TextDocument(text="The outdoor sensor battery lasts eighteen months with lithium cells.", title="battery", source="battery"),
        TextDocument(text="Pairing takes up to three minutes after holding the SENSOR button.", title="pairing", source="pairing"),
    ])
    return kb, docs


async def test_documents_are_resolved_to_their_knowledge_base(stack, ingestion):
    kb, docs = await _kb_with_two_documents(stack, ingestion)
    targets = resolve_targets(PipelineRequest(query="q", knowledge_ids=[docs[1].id]), stack.catalog)
    assert targets == [SearchTarget(knowledge_base_id=kb.id, knowledge_ids=(docs[1].id,))]


async def test_whole_base_search_respects_thresholds_but_scoped_targets_turn_them_off(stack, ingestion, services):
    kb, docs = await _kb_with_two_documents(stack, ingestion)
    strict = {"vector_threshold": 0.99, "keyword_threshold": 0.99}
    whole = {"request": PipelineRequest(query="duration of device connection", knowledge_base_ids=[kb.id], **strict), "turn": TURN}
    whole["search_targets"] = (await chunk_search_parallel(whole, _Runtime(services)))["search_targets"]
    assert (await chunk_search(whole, _Runtime(services)))["search_results"] == []
    scoped = {"request": PipelineRequest(query="duration of device connection", knowledge_ids=[docs[1].id], **strict), "turn": TURN}
    scoped["search_targets"] = (await chunk_search_parallel(scoped, _Runtime(services)))["search_targets"]
    results = (await chunk_search(scoped, _Runtime(services)))["search_results"]
    assert results and {r.knowledge_id for r in results} == {docs[1].id}


async def test_another_tenants_knowledge_base_is_refused(stack, ingestion, services):
    kb, _ = await _kb_with_two_documents(stack, ingestion)
    state = {"request": PipelineRequest(query="battery", knowledge_base_ids=[kb.id]), "turn": TURN, "search_targets": [SearchTarget(knowledge_base_id=kb.id)]}
    update = await chunk_search(state, _Runtime(services, tenant="intruder"))
    assert update["error"].kind == ErrorKind.INVALID_INPUT


async def test_both_branches_empty_is_search_nothing():
    assert (await check_search_nothing({"search_results": []}, None))["error"].kind == ErrorKind.SEARCH_NOTHING
    assert await check_search_nothing({"search_results": [hit("c")]}, None) == {}
