from ragline.contracts.request import PipelineRequest
from ragline.nodes.filter_top_k import filter_results, filter_top_k
from tests.nodes.helpers import node_runtime
from tests.nodes.results import hit


def test_ties_are_broken_by_document_chunk_type_chunk_index_and_id():
    results = [hit("b", score=0.5, knowledge_id="d2"), hit("z", score=0.5, knowledge_id="d1", chunk_index=2), hit("a", score=0.5, knowledge_id="d1", chunk_index=2), hit("top", score=0.9, knowledge_id="d9")]
    assert [r.id for r in filter_results(results, 10)] == ["top", "a", "z", "b"]


def test_results_are_cut_to_rerank_top_k_and_kept_by_entries_are_appended():
    results = [hit(f"r{i}", score=1 - i / 10) for i in range(5)] + [hit("img", score=0.01, metadata={"kept_by": "image_vector"})]
    assert [r.id for r in filter_results(results, 2)] == ["r0", "r1", "img"]


async def test_node_falls_back_to_rerank_then_search_results():
    state = {"request": PipelineRequest(query="q", rerank_top_k=1), "merge_results": [], "rerank_results": [], "search_results": [hit("s", score=0.3), hit("t", score=0.4)]}
    assert [r.id for r in (await filter_top_k(state, node_runtime()))["merge_results"]] == ["t"]


async def test_node_cuts_the_results_to_the_answering_models_context_budget(scripted_model, monkeypatch):
    from ragline.settings import get_settings

    monkeypatch.setenv("RAGLINE_CONTEXT_TOKEN_BUDGET", "12")
    get_settings.cache_clear()
    passages = [hit(f"r{i}", content="the outdoor sensor runs on two lithium cells", score=1 - i / 10) for i in range(3)]
    state = {"request": PipelineRequest(query="q"), "merge_results": passages}
    assert [r.id for r in (await filter_top_k(state, node_runtime()))["merge_results"]] == ["r0"]
    monkeypatch.setenv("RAGLINE_CONTEXT_TOKEN_BUDGET", "0")
    get_settings.cache_clear()
    assert len((await filter_top_k(state, node_runtime()))["merge_results"]) == 3


async def test_a_question_joining_facts_stretches_the_budget_to_another_documents_passage(scripted_model, monkeypatch):
    from ragline.settings import get_settings

    monkeypatch.setenv("RAGLINE_CONTEXT_TOKEN_BUDGET", "12")
    get_settings.cache_clear()
    passages = [hit(f"r{i}", content="the outdoor sensor runs on two lithium cells", score=1 - i / 10, knowledge_id=f"d{i}") for i in range(3)]
    joining = "Which waterfall is in the same country as the Bubye River, a Limpopo tributary that floods each summer?"
    plain = {"request": PipelineRequest(query="How long does the sensor battery last?"), "merge_results": passages}
    assert [r.id for r in (await filter_top_k(plain, node_runtime()))["merge_results"]] == ["r0"]
    state = {"request": PipelineRequest(query="q"), "rewrite_query": joining, "merge_results": passages}
    assert [r.id for r in (await filter_top_k(state, node_runtime()))["merge_results"]] == ["r0", "r1", "r2"]  # ~30 of 12 x 2.4 tokens
    get_settings.cache_clear()
