"""Query expansion (seed: query_expansion.go): local variants, keyword-only searches per target."""

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from ragline import defaults
from ragline.ingestion.service import TextDocument
from ragline.retrieval.expansion import (
    expand_search,
    expansion_top_k,
    is_keyword,
    key_phrases,
    query_variants,
    query_words,
)
from ragline.retrieval.tokenizer import HAN, STOPWORDS
from ragline.retrieval.types import KnowledgeBaseType, SearchParams

_HAN_RE = __import__("re").compile(f"[{HAN}]")
WORDS = ["boundary", "layer", "the", "of", "wing", "what", "is", "supersonic", "flutter", "a", "iPhone15",
         "长城", "在", "哪里", "北京", "的", "皇家宫殿", "电池容量", "手机", "是", "42", "how", "tall"]
queries = st.lists(st.sampled_from(WORDS), max_size=12).map(" ".join) | st.text(max_size=40)


@given(queries)
@settings(max_examples=150, deadline=None)
def test_variants_are_unique_bounded_and_never_the_query_itself(query):
    variants = query_variants(query)
    assert len(variants) == len(set(variants)) <= defaults.QUERY_EXPANSION_MAX_VARIANTS
    assert " ".join(query.lower().split()) not in variants
    assert all(v.strip() for v in variants)


@given(queries)
@settings(max_examples=150, deadline=None)
def test_variants_only_use_the_query_s_own_keywords(query):
    """No invented words: every word of a variant occurs in the query, none is a stop or question word."""
    lowered = query.lower()
    for variant in query_variants(query):
        for word in variant.split():
            assert word in lowered and word not in STOPWORDS and is_keyword(word)


@given(queries)
@settings(max_examples=150, deadline=None)
def test_no_variant_word_mixes_scripts_or_is_shorter_than_two_characters(query):
    for variant in query_variants(query):
        for word in variant.split():
            han = [bool(_HAN_RE.match(c)) for c in word]
            assert all(han) or not any(han), word
            assert len(word) >= defaults.QUERY_EXPANSION_MIN_WORD_CHARS


@given(st.lists(st.sampled_from(["the", "of", "what", "is", "的", "是", "在", "a", "how"]), max_size=8).map(" ".join))
def test_a_query_of_stop_words_only_has_no_variant(query):
    assert query_variants(query) == []


def test_variants_remove_stop_words_reorder_and_pick_key_phrases():
    query = "what similarity laws must be obeyed when constructing aeroelastic models of heated high speed aircraft"
    variants = query_variants(query)
    assert variants[0] == "similarity laws obeyed constructing aeroelastic models heated high speed aircraft"
    assert variants[1] == " ".join(reversed(variants[0].split()))
    assert key_phrases(query)[:2] == ["heated high speed aircraft", "constructing aeroelastic models"]
    assert "heated high speed aircraft" in variants


def test_chinese_goes_whole_to_jieba_and_mixed_text_splits_where_the_script_switches():
    assert query_words("iPhone15手机") == ["iphone15", "手机"]  # not i/p/h/... nor 手/机
    assert query_words("中华人民共和国") == ["中华", "华人", "人民", "共和", "共和国", "中华人民共和国"]
    assert query_variants("长城在哪里") == ["长城"]


def test_length_counts_characters_not_bytes():
    assert is_keyword("长城")  # 2 characters (6 bytes in UTF-8)
    assert not is_keyword("城") and not is_keyword("x")


def test_top_k_is_twice_the_larger_of_embedding_and_rerank_top_k():
    assert expansion_top_k(10, 5) == 20
    assert expansion_top_k(3, 8) == 16


class SpySearcher:
    """The real HybridSearcher, recording each call and the most calls in flight at once."""

    def __init__(self, inner):
        self.inner, self.calls, self.running, self.peak = inner, [], 0, 0

    def authorize(self, kb_ids, tenant_id):
        return self.inner.authorize(kb_ids, tenant_id)

    async def search(self, params):
        self.calls.append(params)
        self.running += 1
        self.peak = max(self.peak, self.running)
        await asyncio.sleep(0.01)
        try:
            return await self.inner.search(params)
        finally:
            self.running -= 1


FACTS = [("wing", "Flutter of a swept wing at transonic speed was measured in the wind tunnel."),
         ("shell", "Buckling loads of thin cylindrical shells under axial compression."),
         ("heat", "Heat transfer to a blunt body in hypersonic flow.")]


async def _kb(stack, ingestion, name="facts", **kb_args):
    kb = stack.knowledge_bases.create(name, **kb_args)
    await ingestion.ingest_documents(kb.id, [TextDocument(text, title, f"src:{title}") for title, text in FACTS])
    return kb


async def test_variants_search_keyword_only_with_relaxed_threshold_and_doubled_top_k(stack, ingestion):
    kb = await _kb(stack, ingestion)
    spy = SpySearcher(stack.searcher)
    primary = SearchParams(query="what is the flutter speed of a swept wing", knowledge_base_ids=[kb.id],
                           match_count=10, keyword_threshold=0.5, query_embedding=[0.0] * 384)
    results = await expand_search(spy, [primary], embedding_top_k=10, rerank_top_k=5)
    assert spy.calls and all(p.disable_vector and p.query_embedding is None for p in spy.calls)
    assert {p.keyword_threshold for p in spy.calls} == {0.5 * 0.8}
    assert {p.match_count for p in spy.calls} == {20}
    assert all(p.query == primary.query and p.keyword_query != primary.query for p in spy.calls)
    assert results[0].knowledge_title == "wing"
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    assert len({r.id for r in results}) == len(results)


async def test_scoped_searches_keep_their_thresholds_off(stack, ingestion):
    kb = await _kb(stack, ingestion)
    spy = SpySearcher(stack.searcher)
    scoped = SearchParams(query="the flutter of a swept wing, at what speed", knowledge_base_ids=[kb.id], disable_recall_thresholds=True)
    await expand_search(spy, [scoped], 10, 5)
    assert spy.calls and all(p.keyword_threshold == 0.0 and p.disable_recall_thresholds for p in spy.calls)


async def test_expansion_is_skipped_when_keyword_search_is_off(stack, ingestion):
    kb = await _kb(stack, ingestion)
    faq = stack.knowledge_bases.create("faq", type=KnowledgeBaseType.FAQ)
    spy = SpySearcher(stack.searcher)
    off = SearchParams(query="swept wing flutter speed", knowledge_base_ids=[kb.id], disable_keyword=True)
    no_index = SearchParams(query="swept wing flutter speed", knowledge_base_ids=[faq.id])
    assert await expand_search(spy, [off, no_index], 10, 5) == []
    assert spy.calls == []


async def test_every_variant_runs_on_every_target_at_most_16_at_once(stack, ingestion):
    kbs = [await _kb(stack, ingestion, name=f"kb{i}") for i in range(5)]
    spy = SpySearcher(stack.searcher)
    query = "what similarity laws must be obeyed when constructing aeroelastic models of heated high speed aircraft"
    targets = [SearchParams(query=query, knowledge_base_ids=[kb.id]) for kb in kbs]
    await expand_search(spy, targets, 10, 5)
    # 5 variants, minus the reversed one (the same bag of words as the first: BM25 ignores order)
    assert len(spy.calls) == 5 * 4
    assert {tuple(p.knowledge_base_ids) for p in spy.calls} == {(kb.id,) for kb in kbs}
    assert spy.peak == defaults.QUERY_EXPANSION_MAX_CONCURRENCY
