import pytest

from ragline.contracts.context import RunContext, RunHost
from ragline.contracts.passages import SearchTarget
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import ErrorKind, TurnFailed, TurnIds
from ragline.ingestion.service import TextDocument
from ragline.nodes.chunk_search import chunk_search
from ragline.nodes.chunk_search_parallel import check_search_nothing, chunk_search_parallel
from ragline.retrieval.expansion import expand_search
from ragline.retrieval.scope import resolve_targets
from tests.nodes.results import hit

TURN = TurnIds("s", "r", "u", "a")


class _Runtime:
    def __init__(self, services, tenant="default"):
        self.context = RunContext(tenant_id=tenant, host=RunHost(services=services))


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
    with pytest.raises(TurnFailed) as refused:
        await chunk_search(state, _Runtime(services, tenant="intruder"))
    assert refused.value.error.kind == ErrorKind.INVALID_INPUT


async def test_both_branches_empty_is_search_nothing():
    assert (await check_search_nothing({"search_results": []}, None))["error"].kind == ErrorKind.SEARCH_NOTHING
    assert await check_search_nothing({"search_results": [hit("c")]}, None) == {}


FOUR_FACTS = [
    "The outdoor sensor battery lasts eighteen months with lithium cells.",
    "Pairing takes up to three minutes after holding the SENSOR button.",
    "The display shows the temperature in Celsius or Fahrenheit.",
    "Firmware updates install overnight when the hub is charging.",
]


async def _expansion_calls(stack, ingestion, services, monkeypatch, embedding_top_k, **request):
    """Search a base of four one-chunk documents (every chunk a hit: vector threshold 0), recording
    the (embedding top-k, rerank top-k) of each call of the real query expansion."""
    kb = stack.knowledge_bases.create("expansion-kb")
    await ingestion.ingest_documents(kb.id, [TextDocument(text=t, title=f"fact {i}", source=f"fact-{i}") for i, t in enumerate(FOUR_FACTS)])
    calls = []

    async def recording_expand_search(*args, **kwargs):
        calls.append(args[2:])
        return await expand_search(*args, **kwargs)

    monkeypatch.setattr("ragline.retrieval.targets.expand_search", recording_expand_search)
    query = PipelineRequest(query="how long does the sensor battery last", knowledge_base_ids=[kb.id], vector_threshold=0.0,
                            relevance_gate_enabled=False, embedding_top_k=embedding_top_k, **request)
    state = {"request": query, "turn": TURN, "search_targets": [SearchTarget(knowledge_base_id=kb.id)]}
    update = await chunk_search(state, _Runtime(services))
    return calls, update["search_results"]


async def test_query_expansion_runs_when_hits_fall_short_of_embedding_top_k(stack, ingestion, services, monkeypatch):
    calls, results = await _expansion_calls(stack, ingestion, services, monkeypatch, embedding_top_k=5)
    assert len(results) == 4 and calls == [(5, 5)]


async def test_query_expansion_does_not_run_when_hits_reach_embedding_top_k(stack, ingestion, services, monkeypatch):
    calls, results = await _expansion_calls(stack, ingestion, services, monkeypatch, embedding_top_k=4)
    assert len(results) == 4 and calls == []


async def test_query_expansion_does_not_run_when_disabled_even_if_hits_fall_short(stack, ingestion, services, monkeypatch):
    calls, results = await _expansion_calls(stack, ingestion, services, monkeypatch, embedding_top_k=5, query_expansion_enabled=False)
    assert len(results) == 4 and calls == []
