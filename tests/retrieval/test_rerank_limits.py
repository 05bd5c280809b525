"""The rerank passage limit comes from the rerank model's input window (retrieval/rerank_limits.py)."""

from __future__ import annotations

from ragline import defaults
from ragline.models.rerank import Reranker
from ragline.retrieval.rerank_limits import max_input_tokens, passage_max_chars
from ragline.retrieval.reranking import model_scores, rerank_results
from tests.nodes.results import hit


def test_the_window_comes_from_litellm_then_our_table_else_nowhere():
    assert max_input_tokens("cohere/rerank-english-v3.0") == 4096  # litellm's model table
    assert max_input_tokens("jina_ai/jina-reranker-v2-base-multilingual") == 1024
    assert max_input_tokens("hosted_vllm/BAAI/bge-reranker-base") == 512  # ours: litellm does not list it
    assert max_input_tokens("cohere/scripted-rerank") is None


def test_the_passage_limit_follows_the_window_less_the_query():
    big, small = passage_max_chars("cohere/rerank-english-v3.0", "q"), passage_max_chars("hosted_vllm/bge-reranker-base", "q")
    assert big > defaults.RERANK_PASSAGE_MAX_CHARS > small
    assert passage_max_chars("cohere/rerank-english-v3.0", "long question " * 100) < big
    assert passage_max_chars("hosted_vllm/bge-reranker-base", "q" * 10_000) == defaults.RERANK_PASSAGE_MIN_CHARS
    assert passage_max_chars("cohere/scripted-rerank", "q") == passage_max_chars(None, "q") == defaults.RERANK_PASSAGE_MAX_CHARS


async def test_the_model_receives_passages_cut_to_its_own_limit(scripted_server):
    scripted_server.rerank_requests.clear()
    long = "Pairing the Aurora sensor takes about two minutes. " * 300  # ~15,000 characters
    results = [hit("a", long)]
    for model in ("cohere/rerank-english-v3.0", "cohere/bge-reranker-base", "cohere/scripted-rerank"):
        await model_scores(Reranker(model, api_base=scripted_server.root_url, api_key="k"), "how long does pairing take?", results)
    sent = [len(request["documents"][0] if isinstance(request["documents"][0], str) else request["documents"][0]["text"])
            for request in scripted_server.rerank_requests]
    assert sent[0] > defaults.RERANK_PASSAGE_MAX_CHARS  # a 4096-token model reads more than the old fixed 4,000
    assert sent[1] < defaults.RERANK_PASSAGE_MAX_CHARS  # a 512-token model reads less
    assert sent[2] <= defaults.RERANK_PASSAGE_MAX_CHARS  # an unknown model keeps the old limit


async def test_the_rerank_model_reads_the_200_best_candidates_at_most(scripted_server):
    """Seed: at most 200 passages go to the rerank model, the best-scored first."""
    scripted_server.rerank_requests.clear()
    results = [hit(f"c{n}", f"passage number {n} about pairing", score=1.0 - n / 1000) for n in range(250)]
    reranker = Reranker("cohere/scripted-rerank", api_base=scripted_server.root_url, api_key="k")
    await rerank_results("how long does pairing take?", results, reranker, threshold=0.0, top_k=10, scoped=False)
    sent = [d if isinstance(d, str) else d["text"] for request in scripted_server.rerank_requests for d in request["documents"]]
    assert len(sent) == 200 and "passage number 199 about pairing" in sent and "passage number 200 about pairing" not in sent
