import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragline.models.prompt_cache import MIN_PREFIX_TOKENS, PrefixCache, common_prefix

tokens = st.lists(st.integers(0, 5), max_size=20)


@given(tokens, tokens)
def test_the_common_prefix_is_the_longest_shared_start(first, second):
    prefix = common_prefix(first, second)
    assert first[: len(prefix)] == prefix == second[: len(prefix)]
    rest = len(prefix)
    assert rest == min(len(first), len(second)) or first[rest] != second[rest]


@pytest.mark.local_model
def test_a_follow_up_restores_the_system_prompt_state_and_stores_no_conversation(tmp_path):
    """Earlier rounds between the system prompt and the question are prefilled like the question:
    a prefix holding them would be stored for one call, and miss the system prompt's own state."""
    from ragline.services import Services
    from ragline.settings import LOCAL_CHAT_MODEL, get_settings

    engine = Services(get_settings()).local_engines.chat(LOCAL_CHAT_MODEL)
    llm = engine.get()
    system = {"role": "system", "content": "You answer questions about the Aurora weather station in one short sentence. " * 4}
    first = [system, {"role": "user", "content": "What batteries does the outdoor sensor use?"}]
    follow_up = [system, {"role": "user", "content": "What batteries does the outdoor sensor use?"},
                 {"role": "assistant", "content": "Two AA batteries."}, {"role": "user", "content": "And how long do they last?"}]
    other = [system, {"role": "user", "content": "How long is the warranty?"},
             {"role": "assistant", "content": "Two years."}, {"role": "user", "content": "Does it cover batteries?"}]
    with engine.generate_lock:
        cache = PrefixCache(llm, tmp_path, "test-model")
        system_tokens = cache.prime(first)
        assert system_tokens >= MIN_PREFIX_TOKENS
        llm.reset()
        llm._ctx.kv_cache_clear()
        assert cache.prime(follow_up) == system_tokens and cache.prime(other) == system_tokens
        llm.reset()
        llm._ctx.kv_cache_clear()
        for question in ("室外传感器用什么电池？", "①", " leading space"):  # whatever the first characters
            assert cache.prime([system, {"role": "user", "content": question}]) == system_tokens, question
        llm.reset()
        llm._ctx.kv_cache_clear()
    assert len(list(tmp_path.glob("*.kv"))) == 1  # the system prompt's state only
