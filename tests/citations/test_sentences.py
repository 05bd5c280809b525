"""Sentence ends for attribution: where a sentence's citations go, the same streamed or whole."""

from hypothesis import given, settings
from hypothesis import strategies as st

from ragline.citations.sentences import sentence_ends


def split(text: str) -> list[str]:
    ends, _ = sentence_ends(text, final=True)
    pieces, start = [], 0
    for end in [*ends, len(text)]:
        pieces.append(text[start:end])
        start = end
    return [piece for piece in pieces if piece.strip()]


def streamed_ends(text: str, cuts: list[int]) -> list[int]:
    """Scan `text` as it would arrive, cut at `cuts`, resuming where each scan stopped."""
    ends: list[int] = []
    resume = 0
    for cut in sorted(set(cuts)):
        found, resume = sentence_ends(text[:cut], resume, final=False)
        ends += found
    found, _ = sentence_ends(text, resume, final=True)
    return ends + found


def test_a_sentence_ends_after_its_period_question_or_exclamation_mark():
    assert split("Pairing takes three minutes. Is it paired? Yes!") == ["Pairing takes three minutes.", " Is it paired?", " Yes!"]


def test_decimals_file_names_and_abbreviations_do_not_end_a_sentence():
    text = "It reads 3.5 hPa from config.yaml, e.g. the value Dr. Smith saw in the U.S. Army base. Next."
    assert split(text) == ["It reads 3.5 hPa from config.yaml, e.g. the value Dr. Smith saw in the U.S. Army base.", " Next."]


def test_a_lower_case_word_after_a_period_continues_the_sentence():
    assert split("It weighs approx. five grams... or less. Done.") == ["It weighs approx. five grams... or less.", " Done."]


def test_an_ordered_list_marker_is_not_a_sentence_and_a_newline_ends_one():
    assert split("1. Insert the batteries\n2. Plug in the console.") == ["1. Insert the batteries", "\n2. Plug in the console."]


def test_chinese_sentences_end_without_a_space():
    assert split("室外传感器应安装在一点五米高。保修期是两年！好吗？") == ["室外传感器应安装在一点五米高。", "保修期是两年！", "好吗？"]


def test_closing_quotes_and_the_models_citation_after_the_period_stay_with_the_sentence():
    text = 'He said "pair it." Then wait. <kb chunk_id="x"/> Done'
    assert split(text) == ['He said "pair it."', ' Then wait. <kb chunk_id="x"/>', " Done"]


def test_a_possible_end_at_the_end_of_the_text_is_left_undecided_until_more_arrives():
    assert sentence_ends("It is 3.", final=False) == ([], 7)
    assert sentence_ends("It is 3.5 now. ", final=False) == ([], 13)
    assert sentence_ends("It is 3.5 now. T", final=False) == ([14], 16)
    assert sentence_ends("It is 3.5 now", final=True) == ([], 13)


FRAGMENTS = st.sampled_from(
    ["Pairing takes 3.5 min", ". ", "! ", "? ", "e.g. ", "Dr. ", "U.S. ", "...", "…", "。", "！", "\n", "1. ", " ",
     '"', ")", "**", "a", "The", "x", '<kb chunk_id="c"/>', "<k", "<", "b ", "保修期", "wait"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(FRAGMENTS, max_size=25).map("".join), st.lists(st.integers(min_value=0, max_value=200), max_size=12))
def test_sentences_end_in_the_same_places_however_the_text_is_cut(text, cuts):
    assert streamed_ends(text, [c for c in cuts if c <= len(text)]) == sentence_ends(text, final=True)[0]
