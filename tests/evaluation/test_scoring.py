"""Answer scoring: SQuAD normalisation, CJK per character, contains-gold and citations."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragline.evaluation import scoring
from ragline.evaluation.report import aggregate, compare, percentile

# --- normalisation and tokens ---


def test_normalisation_drops_case_punctuation_articles_and_extra_spaces():
    assert scoring.normalize("  The  Denver Broncos! ") == "denver broncos"
    assert scoring.normalize("an apple, a pear") == "apple pear"


def test_punctuation_inside_a_number_is_deleted_not_split_as_squad_does():
    assert scoring.tokens("1,000 km") == ["1000", "km"]


def test_chinese_is_one_token_per_character():
    assert scoring.tokens("光荣公司。") == ["光", "荣", "公", "司"]


def test_mixed_text_splits_cjk_per_character_and_latin_per_word():
    assert scoring.tokens("光荣和ω-force 开发 Koei Tecmo") == ["光", "荣", "和", "ωforce", "开", "发", "koei", "tecmo"]


def test_full_width_forms_match_their_ascii_spelling():
    assert scoring.exact_match("ＡＢＣ１２３", "abc123")


# --- exact match and F1 ---


def test_exact_match_ignores_articles_and_punctuation():
    assert scoring.exact_match("the Denver Broncos.", "Denver Broncos")
    assert not scoring.exact_match("Denver", "Denver Broncos")


def test_f1_is_the_token_overlap_of_answer_and_gold():
    # answer tokens: it lasts eighteen months; gold: eighteen months -> p 2/4, r 1
    assert scoring.f1("It lasts eighteen months", "eighteen months") == pytest.approx(2 * 0.5 / 1.5)
    assert scoring.f1("Fahrenheit", "Celsius") == 0.0


def test_chinese_f1_counts_characters():
    # 村雨城 vs 任天堂游戏谜之村雨城: 3 common characters, p 3/3, r 3/10
    assert scoring.f1("村雨城", "任天堂游戏谜之村雨城") == pytest.approx(2 * 1 * 0.3 / 1.3)


def test_the_best_gold_answer_counts():
    golds = ["村雨城", "任天堂游戏谜之村雨城"]
    assert scoring.best_exact_match("村雨城。", golds)
    assert scoring.best_f1("村雨城", golds) == 1.0
    assert scoring.best_f1("anything", []) == 0.0


def test_texts_without_tokens_score_as_squad_says():
    assert scoring.f1("", "") == 1.0
    assert scoring.f1("the", "Denver") == 0.0


# --- contains gold ---


def test_contains_finds_the_gold_phrase_inside_a_sentence():
    assert scoring.contains("The Super Bowl was won by the Denver Broncos, 24-10.", "Denver Broncos")
    assert scoring.contains("答案是光荣和ω-force两家公司", "光荣和ω-force")


def test_contains_never_matches_part_of_a_longer_word_or_number():
    assert not scoring.contains("It scored 3080 points", "308")
    assert not scoring.contains("anything", "the")  # a gold without tokens is never contained


# --- tags and citations ---

ANSWER = (
    'It is 308 <kb chunk_id="a1" knowledge_id="k1" title="Super &amp; Bowl"/> and more '
    '<kb chunk_id="b2" attributed="true"/> <kb chunk_id="a1"/> <web url="https://x.test" title="x"/>'
)


def test_strip_tags_leaves_the_text_a_reader_sees():
    assert scoring.strip_tags(ANSWER) == "It is 308 and more"
    assert scoring.strip_tags('one <ref id="c1"/> two <ref id="c2"></ref>') == "one two"


def test_citations_are_distinct_chunks_with_their_attribution():
    assert scoring.citations(ANSWER) == [scoring.Citation("a1", False), scoring.Citation("b2", True)]


def test_a_chunk_cited_by_the_model_and_attributed_counts_once_as_model_written():
    answer = '<kb chunk_id="a1" attributed="true"/> then <kb chunk_id="a1"/>'
    assert scoring.citations(answer) == [scoring.Citation("a1", False)]


def test_citation_precision_is_the_share_of_cited_passages_holding_a_gold_answer():
    passages = ["Panthers gave up just 308 points.", "Kuechly had 118 tackles."]
    assert scoring.citation_precision(passages, ["308"]) == 0.5
    assert scoring.citation_precision([], ["308"]) is None


# --- properties ---

texts = st.lists(st.sampled_from([*"abc XYZ,.-光荣城", "the ", "1,0", "Ｂ"]), max_size=30).map("".join)


@given(texts)
def test_f1_of_a_text_with_itself_is_one(text):
    assert scoring.f1(text, text) == 1.0


@given(texts, texts)
def test_exact_match_implies_f1_one_and_containment(prediction, gold):
    if scoring.exact_match(prediction, gold):
        assert scoring.f1(prediction, gold) == 1.0
        assert not scoring.tokens(gold) or scoring.contains(prediction, gold)


@given(st.text(alphabet=st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF), min_size=1, max_size=20))
def test_cjk_strings_score_per_character(text):
    assert scoring.tokens(text) == list(text)


@given(texts, texts)
def test_f1_is_symmetric_and_bounded(a, b):
    assert 0.0 <= scoring.f1(a, b) <= 1.0
    assert scoring.f1(a, b) == pytest.approx(scoring.f1(b, a))


# --- aggregates and the gate ---


def _row(**fields):
    row = {"exact_match": False, "f1": 0.0, "contains_gold": False, "gold_retrieved": True, "citations": [],
           "fallback": False, "error": None, "first_token_s": 1.0, "complete_s": 2.0}
    return {**row, **fields}


def test_aggregate_pools_citations_and_counts_coverage_over_answered_turns():
    rows = [
        _row(exact_match=True, f1=1.0, contains_gold=True, citations=[{"attributed": False, "contains_gold": True}]),
        _row(f1=0.5, contains_gold=True, citations=[{"attributed": True, "contains_gold": False},
                                                    {"attributed": False, "contains_gold": True}]),
        _row(fallback=True, first_token_s=0.1, complete_s=0.2),
        _row(error="boom", first_token_s=None, complete_s=9.0),
    ]
    metrics = aggregate(rows, [_row(fallback=True), _row()])
    assert metrics["exact_match"] == 0.25 and metrics["f1"] == 0.375 and metrics["contains_gold"] == 0.5
    assert metrics["citation_precision"] == pytest.approx(2 / 3, abs=1e-4)
    assert metrics["citation_precision_attributed"] == 0.0 and metrics["citation_precision_model"] == 1.0
    assert metrics["citations_model"] == 2 and metrics["citations_attributed"] == 1
    assert metrics["citation_coverage"] == 1.0  # the fallback and the error are not answers
    assert metrics["fallback_rate"] == 0.25 and metrics["error_rate"] == 0.25
    assert metrics["abstention_rate"] == 0.5
    assert metrics["complete_p50_s"] == 2.0  # the failed turn's 9 s is left out


def test_percentile_interpolates_between_ranks():
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([5.0], 0.95) == 5.0
    assert percentile([], 0.5) is None


def test_the_gate_flags_drops_beyond_the_tolerance_in_the_bad_direction_only():
    baseline = {"f1": 0.60, "exact_match": 0.40, "error_rate": 0.0, "complete_p50_s": 1.0}
    current = {"f1": 0.595, "exact_match": 0.30, "error_rate": 0.20, "complete_p50_s": 9.0}
    flagged = {d.metric for d in compare(current, baseline, 0.01) if d.regressed}
    assert flagged == {"exact_match", "error_rate"}  # f1 within tolerance; latency is never gated
