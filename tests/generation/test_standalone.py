import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragline.generation.standalone import stands_on_its_own

# follow-ups over the sample manual, as people type them, each labelled by reading it
STANDS = [
    "How do I reset the rainfall total?",
    "Which Wi-Fi networks does the console support?",
    "How long is the warranty on the console?",
    "How long do the outdoor sensor batteries last?",
    "What does a fall of more than 3 hPa in three hours mean?",
    "Why does the console show dashes instead of outdoor readings?",
    "Is there a reset button on the console?",
    "What is the capital of France?",
    "How long does pairing take, and how long do repairs take?",
    "电池能用多久？",
    "保修期是多长时间？",
    "电池在保修范围内吗？",
    "室外传感器应该安装在离地面多高的地方？",
]
REFERS_BACK = [
    "And how long does it last?",
    "What is its radio range through walls?",
    "And how often does it upload them to the cloud?",
    "What about a rise?",
    "How many people live there?",
    "How much does it cost?",
    "What should I use instead?",
    "Tell me more about pairing",
    "Translate your answer into Chinese",
    "Can you translate the answer into Chinese?",
    "Please summarize what you said about the battery.",
    "Why?",
    "Warranty?",
    "Can you say that in one sentence?",
    "它能用多久？",
    "能用多久？",
    "那保修呢？",
    "这个怎么重置？",
]
OTHER_LANGUAGES = ["Wie lange hält die Batterie?", "Сколько это стоит?", "¿Cuánto dura la batería?", "Combien de temps dure la batterie?"]

PRONOUNS = ["it", "its", "they", "them", "their", "this", "that", "these", "those", "he", "she", "her", "his"]
ZH_POINTERS = ["它", "这个", "那个", "该", "其"]
NOUNS = ["battery", "console", "sensor", "warranty", "antenna", "display", "mast", "adapter", "firmware", "gauge"]


@pytest.mark.parametrize("question", STANDS)
def test_a_follow_up_that_names_its_subject_stands_on_its_own(question):
    assert stands_on_its_own(question)


@pytest.mark.parametrize("question", REFERS_BACK)
def test_a_follow_up_that_refers_back_needs_the_rewrite(question):
    assert not stands_on_its_own(question)


@pytest.mark.parametrize("question", OTHER_LANGUAGES)
def test_a_language_the_rule_does_not_know_is_always_rewritten(question):
    assert not stands_on_its_own(question)


@given(st.sampled_from([q for q in STANDS if q.isascii()]), st.sampled_from(PRONOUNS), st.integers(min_value=0, max_value=20))
def test_a_pronoun_anywhere_makes_a_standalone_question_refer_back(question, pronoun, position):
    words = question.split()
    words.insert(position % (len(words) + 1), pronoun)
    assert not stands_on_its_own(" ".join(words))


@given(st.sampled_from([q for q in STANDS if q.isascii()]), st.sampled_from(["And", "and", "But", "So", "What about", "How about", "Also"]))
def test_an_elliptical_opening_makes_a_standalone_question_refer_back(question, opening):
    assert not stands_on_its_own(f"{opening} {question[0].lower()}{question[1:]}")


@given(st.sampled_from(STANDS + REFERS_BACK), st.sampled_from([str.upper, str.lower, str.title, lambda q: f"  {q}  ", lambda q: q.rstrip("?？") + "??"]))
def test_case_spacing_and_question_marks_never_change_the_decision(question, change):
    assert stands_on_its_own(change(question)) == stands_on_its_own(question)


@given(st.lists(st.sampled_from(["what", "how", "is", "it", "does", "the", "do", "can", "you", "long", "much", "why", "about", "more"]), min_size=1, max_size=8))
def test_a_question_of_question_words_only_names_no_subject(words):
    assert not stands_on_its_own(" ".join(words) + "?")


@given(st.sampled_from(NOUNS), st.sampled_from(NOUNS), st.sampled_from(["How long does the {} {} last?", "Where is the {} of the {}?", "How do I clean the {} {}?"]))
def test_two_nouns_of_its_own_make_a_subject_and_a_pronoun_in_their_place_does_not(first, second, template):
    assert stands_on_its_own(template.format(first, second))
    assert not stands_on_its_own(template.format("its", second))


@given(st.sampled_from([q for q in STANDS if not q.isascii()]), st.sampled_from(ZH_POINTERS))
def test_a_chinese_pointer_or_a_trailing_ne_makes_a_standalone_question_refer_back(question, pointer):
    assert not stands_on_its_own(pointer + question)
    assert not stands_on_its_own(question.rstrip("？") + "呢？")


@given(st.text(alphabet=st.characters(min_codepoint=0x0410, max_codepoint=0x044F), min_size=1, max_size=30), st.sampled_from(STANDS))
def test_any_cyrillic_in_a_question_sends_it_to_the_rewrite(cyrillic, question):
    assert not stands_on_its_own(f"{question} {cyrillic}")
