"""The chunk_merge node; its steps (ragline.retrieval.merge) are tested in tests/retrieval/test_merge.py."""

from ragline.contracts.context import RunContext, RunHost
from ragline.contracts.request import PipelineRequest
from ragline.nodes.chunk_merge import chunk_merge
from tests.nodes.results import hit


async def test_merge_node_runs_the_steps_end_to_end(services):
    class Runtime:
        context = RunContext(host=RunHost(services=services))

    state = {"request": PipelineRequest(query="q", rerank_top_k=5), "rerank_results": [hit("a", "x y z", 0.9), hit("a", "x y z", 0.9)], "history": []}
    update = await chunk_merge(state, Runtime())
    assert [r.id for r in update["merge_results"]] == ["a"]
