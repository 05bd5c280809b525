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


@pytest.mark.local_model
def test_a_start_two_prompts_shared_is_restored_for_the_next_and_answers_the_same():
    """Questions whose contexts begin with the same passage: once two of them have run, the third
    restores the system prompt and the passage instead of prefilling them, and answers exactly as
    a fully prefilled call does."""
    from ragline.models.prompt_cache import SHARED_MIN_TOKENS
    from ragline.services import Services
    from ragline.settings import LOCAL_CHAT_MODEL, get_settings

    engine = Services(get_settings()).local_engines.chat(LOCAL_CHAT_MODEL)
    system = {"role": "system", "content": "You answer questions about the Aurora weather station in one short sentence. " * 4}
    specs = ("Battery life of the outdoor sensor is about 18 months with lithium AA cells and 12 months with alkaline "
             "cells. The sensor sends a reading every 16 seconds on 868 MHz (Europe) or 915 MHz (North America). ") * 2
    warranty = "Northwind Instruments gives a two-year warranty on the console and the sensor; batteries are not covered. " * 2

    def ask(passage: str, question: str) -> tuple[str, int]:
        messages = [system, {"role": "user", "content": f"Retrieved contexts:\n{passage}\n\nQuestion: {question}"}]
        (result,) = list(engine.generate(messages, {"temperature": 0, "max_tokens": 24}, stream=False))
        return result["choices"][0]["message"]["content"], engine.recent_calls[-1].cached_tokens

    _, fixed = ask(specs, "How long do lithium cells last?")
    ask(warranty, "Are batteries covered?")
    ask(specs, "Which frequency is used in Europe?")  # shares the system prompt and the specs passage with the first
    ask(warranty, "How long is the warranty?")  # the KV cache now holds another start
    answer, cached = ask(specs, "Which frequency is used in North America?")
    assert cached >= fixed + SHARED_MIN_TOKENS  # the specs passage came restored, not prefilled

    llm = engine.get()
    with engine.generate_lock:  # the same call prefilled whole, for comparison
        llm.reset()
        llm._ctx.kv_cache_clear()
        messages = [system, {"role": "user", "content": f"Retrieved contexts:\n{specs}\n\nQuestion: Which frequency is used in North America?"}]
        whole = llm.create_chat_completion(messages=messages, temperature=0, max_tokens=24)["choices"][0]["message"]["content"]
        llm.reset()
        llm._ctx.kv_cache_clear()
    assert answer == whole and "915" in answer
