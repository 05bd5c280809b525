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


def _words(n: int, word: str = "w") -> str:
    return " ".join(f"{word}{i}" for i in range(n))


async def test_a_passage_that_passed_the_full_relevance_bar_stretches_the_budget():
    """Past the budget, only what the question needs: a passage whose own evidence reached the
    gate's full bar (0.60), up to 2.4x the budget; one at half the bar is left out."""
    first = hit("a", content=_words(8), metadata={"relevance": 0.9})
    strong = hit("b", content=_words(8), metadata={"relevance": defaults.RELEVANCE_MIN_SCORE})
    weak = hit("c", content=_words(4), metadata={"relevance": defaults.RELEVANCE_MIN_SCORE - 0.01})
    assert [r.id for r in await fit_budget([first, strong, weak], 10, words)] == ["a", "b"]
    assert [r.id for r in await fit_budget([first, weak, strong], 10, words)] == ["a", "b"]  # the weak one gives way
    too_long = hit("d", content=_words(17), metadata={"relevance": 0.9})
    assert [r.id for r in await fit_budget([first, too_long], 10, words)] == ["a"]  # 8 + 17 > 2.4 x 10


async def test_within_the_budget_a_passage_far_below_the_best_evidence_stays_out():
    """The sample's pairing question: setup (0.94), warranty (0.82), troubleshooting (0.40) all fit
    250 tokens; the last is a second of prefill for nothing. Red with CONTEXT_CLOSE_SHARE at 0.4."""
    setup = hit("setup", content=_words(3), metadata={"relevance": 0.94})
    warranty = hit("warranty", content=_words(3), metadata={"relevance": 0.82})
    troubleshooting = hit("troubleshooting", content=_words(3), metadata={"relevance": 0.40})
    closer = hit("closer", content=_words(3), metadata={"relevance": 0.48})
    assert [r.id for r in await fit_budget([setup, warranty, troubleshooting, closer], 20, words)] == ["setup", "warranty", "closer"]
    assert defaults.CONTEXT_CLOSE_SHARE == 0.5
    # a question joining facts keeps its weak hops; without gate scores there is nothing to compare
    joined = await fit_budget([setup, warranty, troubleshooting], 20, words, joins_facts=True)
    assert [r.id for r in joined] == ["setup", "warranty", "troubleshooting"]
    plain = [hit(i, content=_words(3)) for i in "abc"]
    assert [r.id for r in await fit_budget(plain, 20, words)] == ["a", "b", "c"]


async def test_a_question_joining_facts_gets_a_passage_of_another_document_past_the_budget():
    first = hit("a", content=_words(8), knowledge_id="doc1")
    same_doc = hit("b", content=_words(8), knowledge_id="doc1")
    other_doc = hit("c", content=_words(8), knowledge_id="doc2")
    third_doc = hit("d", content=_words(8), knowledge_id="doc3")
    pool = [first, same_doc, other_doc, third_doc]
    assert [r.id for r in await fit_budget(pool, 10, words)] == ["a"]
    assert [r.id for r in await fit_budget(pool, 10, words, joins_facts=True)] == ["a", "c", "d"]  # 24 <= 24
    assert defaults.CONTEXT_BUDGET_STRETCH == 2.4


async def test_the_text_neighbours_lent_a_passage_gives_way_to_another_passage():
    """Merge step 7 lends a short hit its neighbours' text; within a tight budget the next passage
    that passed the gate goes in first, and lent text only where room is left."""
    content = "before1 before2 before3 own1 own2 after1 after2 after3"
    start = content.index("own1")
    expanded = hit("a", content=content, metadata={"expanded": True, "own_span": [start, start + len("own1 own2")]})
    second = hit("b", content="b1 b2 b3")
    kept = await fit_budget([expanded, second], 6, words)
    assert [r.id for r in kept] == ["a", "b"] and kept[0].content == "own1 own2" and "own_span" not in kept[0].metadata
    roomy = await fit_budget([expanded, second], 20, words)
    assert [r.content for r in roomy] == [content, "b1 b2 b3"]  # room left: the lent text comes back
