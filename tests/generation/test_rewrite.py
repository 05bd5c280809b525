from ragline import defaults
from ragline.contracts.state import HistoryTurn
from ragline.generation.rewrite import NO_CONVERSATION, conversation_within_budget, cut_to_tokens, estimated_tokens


async def words(texts):
    """One token per word: the rule under test is the budget, not a tokenizer."""
    return [len(text.split()) for text in texts]


def _round(n, answer_words=10):
    return HistoryTurn(f"r{n}", f"question {n}", " ".join(f"a{n}w{i}" for i in range(answer_words)))


async def test_no_history_is_written_as_none():
    assert await conversation_within_budget([], words) == NO_CONVERSATION


async def test_the_newest_rounds_go_in_oldest_first_while_they_fit():
    history = [_round(n) for n in range(5)]  # 12 "tokens" a round
    text = await conversation_within_budget(history, words, budget=30, answer_tokens=50)
    assert "question 0" not in text and "question 1" not in text and "question 2" not in text
    assert text.index("question 3") < text.index("question 4")


async def test_each_earlier_answer_is_cut_to_its_token_share_and_marked():
    history = [_round(0, answer_words=200)]
    text = await conversation_within_budget(history, words, budget=500, answer_tokens=20)
    answer = text.split("Assistant: ")[1]
    assert answer.endswith("…") and "a0w0" in answer and "a0w199" not in answer
    assert len(answer) <= len(history[0].answer) * 20 // 200 + 2


async def test_the_latest_round_always_goes_in_cut_to_the_budget_when_it_alone_is_larger():
    history = [_round(0), HistoryTurn("r1", "question 1 " + "word " * 100, "answer " * 100)]
    text = await conversation_within_budget(history, words, budget=40, answer_tokens=200)
    assert "question 1" in text and "question 0" not in text
    assert sum(await words([text])) <= 40 + 4  # the "User:"/"Assistant:" labels and the cut marks


async def test_the_default_budget_keeps_the_prompt_short_whatever_the_history():
    history = [_round(n, answer_words=300) for n in range(defaults.DEFAULT_HISTORY_ROUNDS)]
    text = await conversation_within_budget(history, words)
    assert sum(await words([text])) <= defaults.REWRITE_HISTORY_TOKENS + 8
    assert f"question {defaults.DEFAULT_HISTORY_ROUNDS - 1}" in text


def test_a_text_within_its_limit_is_not_cut():
    assert cut_to_tokens("two words", 2, 2) == "two words"


async def test_the_estimate_counts_chinese_by_character_and_words_with_slack():
    english, chinese = await estimated_tokens(["How long does the battery last", "电池能用多久"])
    assert 6 <= english <= 9 and chinese == 6
