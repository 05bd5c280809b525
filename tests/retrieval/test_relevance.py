import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragline import defaults
from ragline.contracts.passages import SearchResult
from ragline.retrieval.relevance import relevance_scores, relevant


def passage(id: str, content: str, similarity: float | None) -> SearchResult:
    return SearchResult(id=id, content=content, score=similarity or 0.5, knowledge_id=id, knowledge_base_id="kb", vector_score=similarity)


NEIGHBOURS = [
    passage("pairing", "Pairing takes up to three minutes after holding the SENSOR button.", 0.80),
    passage("display", "The display shows the temperature in Celsius or Fahrenheit.", 0.79),
    passage("firmware", "Firmware updates install overnight when the console is charging.", 0.79),
]
BATTERY = passage("battery", "The outdoor sensor battery lasts eighteen months with lithium cells.", 0.86)


def test_a_passage_holding_the_questions_terms_passes_and_its_neighbours_do_not():
    kept = relevant("How long does the outdoor sensor battery last?", [BATTERY, *NEIGHBOURS])
    assert [r.id for r in kept] == ["battery"] and kept[0].metadata["relevance"] >= defaults.RELEVANCE_MIN_SCORE


def test_an_off_topic_question_keeps_nothing_however_similar_the_vectors():
    # e5 gives unrelated text ~0.8: similarity alone would keep all of these
    assert relevant("What is the capital of France?", [BATTERY, *NEIGHBOURS]) == []


def test_the_threshold_is_the_line():
    scores = relevance_scores("How long does the outdoor sensor battery last?", [BATTERY, *NEIGHBOURS])
    assert scores is not None
    score = scores[0]
    assert [r.id for r in relevant("How long does the outdoor sensor battery last?", [BATTERY, *NEIGHBOURS], threshold=score)] == ["battery"]
    assert relevant("How long does the outdoor sensor battery last?", [BATTERY, *NEIGHBOURS], threshold=score + 1e-6) == []


def test_similarity_counts_as_far_as_it_stands_out_from_the_hits():
    question = "When do firmware updates install?"
    lexical_only = relevance_scores(question, [passage("a", "firmware updates install overnight", 0.8), passage("b", "other text", 0.8)])
    standing_out = relevance_scores(question, [passage("a", "firmware updates install overnight", 0.9), passage("b", "other text", 0.8)])
    assert lexical_only and standing_out
    assert standing_out[0] - lexical_only[0] == pytest.approx(3.0 * 0.05)  # similarity weighs 3x


def test_a_question_in_another_script_is_judged_on_similarity_alone():
    question = "传感器的电池能用多久？"
    close = relevance_scores(question, [passage("en", BATTERY.content, 0.90), passage("x", "filler", 0.80), passage("y", "filler", 0.80)])
    assert close is not None and close[0] == pytest.approx(11.0 * 0.10)  # passes 0.60 at 0.055 above the median


def test_a_question_without_content_terms_is_not_judged():
    assert relevant("is it?", NEIGHBOURS) == NEIGHBOURS


@given(st.lists(st.floats(0, 1), min_size=1, max_size=8), st.text(max_size=40))
def test_scores_are_one_per_hit_and_never_drop_a_hit_with_every_term(similarities, question):
    hits = [passage(str(i), f"{question} filler {i}", s) for i, s in enumerate(similarities)]
    scores = relevance_scores(question, hits)
    if scores is not None:
        assert len(scores) == len(hits)


def test_the_measured_bar_and_share_are_the_defaults():
    """0.60, half of it and five terms: the figures in retrieval/relevance.py were measured with these."""
    assert (defaults.RELEVANCE_MIN_SCORE, defaults.RELEVANCE_KEEP_SHARE, defaults.RELEVANCE_TERMS_PER_PASSAGE) == (0.60, 0.5, 5)
    weak = passage("weak", "The outdoor sensor mast stands in the garden.", 0.80)
    question = "How long does the outdoor sensor battery last?"
    scores = relevance_scores(question, [BATTERY, weak, *NEIGHBOURS])
    assert scores is not None and 0.60 * 0.5 <= scores[1] < 0.60 <= scores[0]
    assert [r.id for r in relevant(question, [BATTERY, weak, *NEIGHBOURS])] == ["battery", "weak"]  # kept beside the best


SCREENSHOT = passage("screenshot", "Error E42: the rain gauge bucket is blocked. Clean the funnel and restart the console.", 0.84)


def test_a_lone_hit_passes_on_the_questions_terms_it_holds():
    # one document in the base: no neighbours to weigh terms against, so every term weighs the same
    assert [r.id for r in relevant("What does error E42 on the rain gauge mean?", [SCREENSHOT])] == ["screenshot"]
    assert relevant("What is the capital of France?", [SCREENSHOT]) == []


def test_two_hits_are_still_too_few_to_weigh_terms_by_rarity():
    other = passage("pairing", "Pairing takes up to three minutes after holding the SENSOR button.", 0.80)
    # 3 of 5 terms: enough when terms weigh alike, not when the 2 missing ones count as rare evidence
    assert [r.id for r in relevant("Why is the rain gauge blocked after heavy storms?", [SCREENSHOT, other])] == ["screenshot"]


def test_a_passage_repeating_its_documents_title_gets_no_evidence_from_that_line():
    def titled(id: str, body: str, similarity: float) -> SearchResult:
        return SearchResult(id=id, content=f"Super Bowl 50\n{body}", score=similarity, knowledge_id=id, knowledge_base_id="kb",
                            knowledge_title="Super Bowl 50", vector_score=similarity)

    question = "Which team won Super Bowl 50?"
    halftime = titled("halftime", "Beyoncé and Bruno Mars joined Coldplay for the halftime show.", 0.86)
    others = [titled(f"p{i}", f"The stadium sold {i} thousand tickets for the final.", 0.85) for i in range(4)]
    assert relevant(question, [halftime, *others]) == []  # the title is on every passage: not an answer
    winner = titled("winner", "The Denver Broncos won Super Bowl 50 against the Carolina Panthers.", 0.86)
    assert [r.id for r in relevant(question, [winner, halftime, *others])][:1] == ["winner"]
    untitled = halftime.model_copy(update={"knowledge_title": ""})  # the same first line, not the document's title
    assert relevance_scores(question, [untitled, *others])[0] > relevance_scores(question, [halftime, *others])[0]


BUBYE = passage("bubye", "The Bubye River is a tributary of the Limpopo River in southern Zimbabwe.", 0.86)
FALLS = passage("falls", "Victoria Falls is a waterfall on the Zambezi River in southern Africa.", 0.84)
RIVERS = [passage(f"river{i}", f"The {name} River flows through the eastern highlands of the country.", 0.80)
          for i, name in enumerate(("Save", "Runde", "Mazowe"))]


def test_a_question_joining_facts_passes_on_the_passage_that_holds_one_hop():
    """Multi-hop: no passage holds 'waterfall' and 'Bubye' both. The question has ten content
    terms; judged on a share of five terms' weight, the Bubye passage passes (0.71; 0.44 on a
    share of all ten, and the question would end in "not found")."""
    question = "Which waterfall is in the same country as the Bubye River, a Limpopo tributary that floods each summer?"
    assert [r.id for r in relevant(question, [BUBYE, FALLS, *RIVERS])] == ["bubye", "falls"]  # the second hop at half the bar


ZSTD = passage("zstd", "zstd compresses at level 3 by default; levels go from 1 to 19.", 0.85)
ULTRA = passage("ultra", "With --ultra, zstd unlocks levels up to 22, which need more memory.", 0.83)
OTHERS = [passage(f"o{i}", text, 0.80) for i, text in enumerate(("gzip compresses files with the deflate method.",
                                                                 "xz uses the LZMA2 method and is slow to compress.",
                                                                 "bzip2 sorts blocks before compressing them."))]


def test_a_question_asking_two_things_passes_on_a_passage_that_answers_one():
    question = "What is zstd's default compression level, and what maximum level does the ultra option allow?"
    whole = relevant(question, [ZSTD, ULTRA, *OTHERS], threshold=2.0)  # no part reaches 2: nothing
    assert whole == []
    kept = [r.id for r in relevant(question, [ZSTD, ULTRA, *OTHERS])]
    assert kept[:2] == ["zstd", "ultra"]


def test_a_question_joins_facts_past_five_content_terms_or_with_several_parts():
    from ragline.retrieval.relevance import joins_facts

    assert joins_facts("Which waterfall is in the same country as the Bubye River, a Limpopo tributary that floods each summer?")
    assert joins_facts("What is zstd's default compression level, and what maximum level does the ultra option allow?")
    assert not joins_facts("How long does the outdoor sensor battery last?")


def test_a_chinese_how_long_phrase_is_a_question_word_not_a_term_passages_must_hold():
    """保修期是多长时间？: jieba gives 多长时间, 长时间, 时间 beside 保修期; a passage says 两年保修, not how long."""
    warranty = passage("zh-warranty", "控制台和室外传感器享有两年保修。电池和雷击损坏不在保修范围内。", 0.94)
    others = [passage(f"zh{i}", text, 0.80) for i, text in enumerate(("先装入电池，再接通显示屏电源。", "室外传感器应安装在离地面至少一点五米的地方。", "按住 SENSOR 键三秒钟完成配对。"))]
    assert [r.id for r in relevant("保修期是多长时间？", [warranty, *others])] == ["zh-warranty"]


ALBUM = passage("album", "Izgoy is a studio album performed by Alisa, a rock band from Saint Petersburg.", 0.84)
INVASION = passage("invasion", "In 1931 the Empire of Japan invaded Manchuria after the Mukden incident.", 0.83)
RAILWAY = passage("railway", "The Trans-Siberian Railway crosses the country from Moscow to Vladivostok.", 0.80)
FILLERS = [passage("festivals", "Rock music festivals in Finland draw large summer crowds.", 0.80),
           passage("treaty", "The treaty ended the war between the two empires in 1905.", 0.80)]


def test_a_multi_hop_question_passes_on_what_the_three_best_hits_hold_together():
    """Each hop in its own passage, none reaching the bar alone (0.43, 0.40): the three best hits
    hold five of the eight terms, 0.77 of the weight, and at 0.8 of it the best hit passes (0.62).
    Red with RELEVANCE_JOINT_HITS 1 or 2 (the railway's 'country' is the third hit's), or a weight of 0.7."""
    question = "When did the country of the performer of Izgoy invade Manchuria on the emperor's orders?"
    scores = relevance_scores(question, [ALBUM, INVASION, RAILWAY, *FILLERS])
    assert scores is not None and scores[0] == pytest.approx(0.617, abs=0.001)
    assert [r.id for r in relevant(question, [ALBUM, INVASION, RAILWAY, *FILLERS])] == ["album", "invasion"]


def test_hits_that_hold_the_questions_topic_together_do_not_pass_at_full_weight():
    """The base holds the album, not its review: together the hits hold 0.63 of the terms' weight,
    over the bar at full weight, under it at 0.8 (red with RELEVANCE_JOINT_WEIGHT 1.0)."""
    assert relevant("Which Moscow newspaper reviewed the Alisa album Izgoy?", [ALBUM, INVASION, RAILWAY, *FILLERS]) == []


def test_the_joint_evidence_numbers_are_the_measured_defaults():
    """Three hits at 0.8: the figures in retrieval/relevance.py were measured with these."""
    assert (defaults.RELEVANCE_JOINT_HITS, defaults.RELEVANCE_JOINT_WEIGHT) == (3, 0.8)


def test_a_question_typed_without_accents_names_the_passages_accented_term():
    """Red without the folding: 'aschenbrodel' is then a term no hit holds, the rarest of all."""
    ballet = passage("ballet", "Aschenbrödel is a ballet by Johann Strauss II, first staged in Berlin.", 0.80)
    others = [passage(f"o{i}", text, 0.80) for i, text in enumerate(("Johann Strauss II wrote the Blue Danube waltz.", "Vienna hosts an opera ball.", "A waltz is danced in three-four time."))]
    assert [r.id for r in relevant("Where was Aschenbrodel first staged?", [ballet, *others])] == ["ballet"]


@given(st.text(max_size=30))
def test_accent_folding_keeps_every_base_letter_and_is_idempotent(text):
    from ragline.retrieval.relevance import _without_accents

    folded = _without_accents(text)
    assert _without_accents(folded) == folded
    assert len(folded) <= len(unicodedata.normalize("NFD", text))
    if text.isascii():
        assert folded == text


def test_accent_folding_leaves_hangul_and_han_alone():
    from ragline.retrieval.relevance import _without_accents

    assert _without_accents("한국어 保修期 Akinoshū") == "한국어 保修期 Akinoshu"


SPECS = passage("specs", "| measurement | range | accuracy |\n| humidity | 1 % to 99 % | ±3 % |\n| wind speed | 0 to 50 m/s | ±1 m/s |", 0.85)


def test_a_question_word_form_the_passage_spells_otherwise_is_the_same_word():
    """Snowball stems "accurate" as "accur" and "accuracy" as "accuraci": one begins the other."""
    kept = relevant("How accurate is the humidity reading?", [SPECS, *NEIGHBOURS])
    assert [r.id for r in kept] == ["specs"]


def test_stems_shorter_than_the_variant_length_stay_apart(monkeypatch):
    window = passage("window", "Move the console closer to the window.", 0.85)
    assert relevant("What about the wind?", [window, *NEIGHBOURS]) == []  # "wind" does not begin "window" as a variant
    monkeypatch.setattr(defaults, "RELEVANCE_VARIANT_MIN_LETTERS", 4)
    assert [r.id for r in relevant("What about the wind?", [window, *NEIGHBOURS])] != []


def test_the_variant_rule_is_what_passes_the_table(monkeypatch):
    monkeypatch.setattr(defaults, "RELEVANCE_VARIANT_MIN_LETTERS", 99)  # no variants
    assert relevant("How accurate is the humidity reading?", [SPECS, *NEIGHBOURS]) == []


def test_up_to_is_how_a_question_asks_not_a_term_passages_hold():
    scores = relevance_scores("Up to what wind speed does it measure?", [SPECS, *NEIGHBOURS])
    assert scores is not None and scores[0] >= defaults.RELEVANCE_MIN_SCORE
    assert relevance_scores("Up", [SPECS]) is None


def entry(id: str, title: str, content: str, similarity: float) -> SearchResult:
    return SearchResult(id=id, content=content, score=similarity, knowledge_id=id, knowledge_base_id="kb",
                        knowledge_title=title, vector_score=similarity)


BUYENDE = entry("buyende", "Buyende", "Buyende is a town in the Eastern Region of Uganda, the seat of its district.", 0.82)
LEADERS = [entry(f"l{i}", title, text, 0.82) for i, (title, text) in enumerate((
    ("Leader of the Opposition (Kenya)", "The Leader of the Opposition in Kenya heads the largest party outside government."),
    ("Eastern Region", "The Eastern Region is one of the regions of Ghana, with its capital at Koforidua."),
    ("Opposition (politics)", "In politics the opposition comprises the parties not in government."),
    ("Municipal council", "A municipal council governs a town and elects its mayor."),
))]
BRIDGE = "Who is the current opposition leader in the country where Buyende is located?"


def test_the_entry_of_a_name_the_question_mentions_passes_as_a_bridge_questions_first_hop():
    """The Buyende entry holds one term of six: alone it scores under the bar, and the question
    ended in "not found" although the entry names the country (musique_100: 9% refused, 4% with
    the rule). Red without named_entry, or with RELEVANCE_NAMED_ENTRY_SCORE under the threshold."""
    assert defaults.RELEVANCE_NAMED_ENTRY_SCORE >= defaults.RELEVANCE_MIN_SCORE
    assert "buyende" in [r.id for r in relevant(BRIDGE, [BUYENDE, *LEADERS])]
    assert relevant(BRIDGE.replace("Buyende", "buyende"), [BUYENDE, *LEADERS]) == []  # not a name: the terms decide


def test_a_named_title_shared_by_several_hits_is_no_entry():
    """Several paragraphs of one article about the question's subject: which of them answers is
    for their own terms to say (XQuAD without its gold paragraph keeps abstaining)."""
    second = entry("buyende-2", "Buyende", "Buyende hosts a weekly market on Saturdays.", 0.82)
    assert relevant(BRIDGE, [BUYENDE, second, *LEADERS]) == []
    other = entry("uganda", "Uganda", "Uganda is a landlocked country in East Africa.", 0.82)
    assert relevant(BRIDGE, [BUYENDE, other, *LEADERS])  # a title the question does not name changes nothing
