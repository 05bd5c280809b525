from langchain_core.messages import AIMessage

from ragline.nodes.memory_affinity import (
    affinity_factor,
    apply_affinity,
    citation_counts,
)
from ragline.nodes.wiki_boost import boost_wiki_pages
from tests.nodes.results import hit


def _answer(*doc_ids):
    return AIMessage(" ".join(f'claim <kb chunk_id="c" knowledge_id="{d}"/>' for d in doc_ids))


def test_citations_are_counted_once_per_answer_per_document():
    counts = citation_counts([_answer("d1", "d1", "d2"), _answer("d1")])
    assert counts == {"d1": 2, "d2": 1}


def test_documents_cited_fewer_than_twice_get_no_affinity():
    assert affinity_factor(0) == affinity_factor(1) == 1.0


def test_affinity_grows_with_the_log_of_citations_and_caps_at_1_15():
    assert 1.0 < affinity_factor(2) < affinity_factor(8) <= 1.15
    assert affinity_factor(10_000) == 1.15


def test_affinity_breaks_a_near_tie_in_favour_of_a_cited_document():
    results = [hit("a", score=0.80, knowledge_id="new"), hit("b", score=0.79, knowledge_id="cited")]
    assert [r.id for r in apply_affinity(results, citation_counts([_answer("cited"), _answer("cited")]))] == ["b", "a"]


def test_affinity_never_lifts_a_poor_match_over_a_good_one():
    results = [hit("a", score=0.9, knowledge_id="new"), hit("b", score=0.5, knowledge_id="cited")]
    assert [r.id for r in apply_affinity(results, citation_counts([_answer("cited")] * 50))] == ["a", "b"]


def test_wiki_pages_of_wiki_enabled_bases_get_x1_3_and_a_stable_resort():
    results = [hit("a", score=0.9), hit("w", score=0.8, metadata={"chunk_type": "wiki_page"}), hit("b", score=0.9)]
    boosted = boost_wiki_pages(results, {"kb"})
    assert [r.id for r in boosted] == ["w", "a", "b"] and boosted[0].score == 0.8 * 1.3


def test_wiki_pages_outside_wiki_enabled_bases_are_not_boosted():
    results = [hit("a", score=0.9), hit("w", score=0.8, metadata={"chunk_type": "wiki_page"})]
    assert [r.score for r in boost_wiki_pages(results, set())] == [0.9, 0.8]
