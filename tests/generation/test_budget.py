from ragline import defaults
from ragline.generation.budget import context_budget, fit_budget
from ragline.settings import Settings
from tests.nodes.results import hit


async def words(texts):
    return [len(text.split()) for text in texts]


async def test_passages_are_kept_in_rank_order_while_they_fit():
    results = [hit("a", content="one two three"), hit("b", content="four five"), hit("c", content="six seven eight"), hit("d", content="x")]
    assert [r.id for r in await fit_budget(results, 5, words)] == ["a", "b"]
    assert [r.id for r in await fit_budget(results, 8, words)] == ["a", "b", "c"]


async def test_a_first_passage_larger_than_the_budget_is_cut_not_dropped():
    long = hit("a", content=" ".join(f"w{i}" for i in range(100)))
    (kept,) = await fit_budget([long, hit("b", content="short")], 10, words)
    assert kept.id == "a" and kept.metadata["cut_to_budget"] and len(kept.content.split()) <= 13  # the cut is proportional in characters, plus the ellipsis


def test_the_local_model_gets_the_small_budget_and_remote_models_none(tmp_path):
    settings = Settings(data_dir=tmp_path)
    assert context_budget(settings, local=True) == defaults.LOCAL_CONTEXT_TOKEN_BUDGET == 250  # measured: see generation/budget.py
    assert context_budget(settings, local=False) is None
    assert context_budget(Settings(data_dir=tmp_path, context_token_budget=0), local=True) is None
    assert context_budget(Settings(data_dir=tmp_path, context_token_budget=50), local=False) == 50
