"""End to end with the real local model: no network, no API key."""

import os
import subprocess
import sys

import pytest

from ragline.contracts.events import ResponseType
from ragline.contracts.request import PipelineRequest
from ragline.services import Services
from ragline.settings import LOCAL_CHAT_MODEL, Settings, get_settings
from tests.nodes.helpers import answer_text, node_runtime, of_type, run_turn

pytestmark = pytest.mark.local_model

OFFLINE = {"no_proxy": "", "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}  # any network use fails fast


def _engines():
    """The local engines of a root built from this test session's settings."""
    return Services(get_settings()).local_engines


def _client():
    return Services(get_settings()).chat(LOCAL_CHAT_MODEL)


def _local_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGLINE_CHAT", "OPENAI"))}
    return {**env, **OFFLINE}


def test_ragline_ask_names_paris_with_the_local_model():
    result = subprocess.run(
        [sys.executable, "-m", "ragline", "ask", "What is the capital of France?"],
        capture_output=True, text=True, env=_local_env(), timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "Paris" in result.stdout


async def test_local_model_streams_a_chinese_answer(monkeypatch):
    monkeypatch.delenv("RAGLINE_CHAT_MODEL", raising=False)
    events = await run_turn("chat_stream", PipelineRequest(query="法国的首都是哪里？", summary={"max_tokens": 40, "temperature": 0}))
    assert "巴黎" in answer_text(events)
    assert len(of_type(events, ResponseType.ANSWER)) > 2  # streamed in pieces, not at once


async def test_local_model_follows_the_rewrite_json_instruction():
    from ragline.contracts.state import HistoryTurn, TurnIds
    from ragline.nodes.query_understand import query_understand

    state = {
        "request": PipelineRequest(query="How many people live there?", chat_model=LOCAL_CHAT_MODEL),
        "turn": TurnIds("s", "r", "u", "a"),
        "history": [HistoryTurn("r0", "Tell me about Paris.", "Paris is the capital of France.")],
    }
    update = await query_understand(state, node_runtime())
    assert "Paris" in update["rewrite_query"]


def test_ragline_ask_answers_from_the_sample_knowledge_base_with_the_local_model():
    result = subprocess.run(
        [sys.executable, "-m", "ragline", "ask", "--sample", "--timings", "How long does pairing the sensor take?"],
        capture_output=True, text=True, env=_local_env(), timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "three minutes" in result.stdout.lower() or "3 minutes" in result.stdout.lower()
    timings = next(line for line in result.stderr.splitlines() if line.startswith("timings"))
    assert "model calls 1," in timings  # a first-turn question: no rewrite call, only the answer
    assert "first model call" in timings and "first answer token" in timings


def test_the_local_answer_path_never_imports_litellm():
    """litellm takes seconds to import; `ragline ask` on the embedded default must not pay for it."""
    code = (
        "import asyncio, sys\n"
        "from ragline.models.chat import ChatOptions\n"
        "from ragline.models.embeddings import Embedder\n"
        "from ragline.services import Services\n"
        "from ragline.settings import LOCAL_CHAT_MODEL, LOCAL_EMBEDDING_MODEL, Settings\n"
        "async def main():\n"
        "    await Embedder(LOCAL_EMBEDDING_MODEL).embed_query('battery')\n"
        "    await Services(Settings()).chat(LOCAL_CHAT_MODEL).chat([{'role': 'user', 'content': 'hi'}], ChatOptions(max_tokens=2))\n"
        "    print('litellm' in sys.modules)\n"
        "asyncio.run(main())\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_local_env(), timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


async def test_litellm_still_reaches_the_local_model_as_the_ragline_provider():
    import litellm

    from ragline.models.local_provider import register_local_provider

    register_local_provider(_engines())
    response = await litellm.acompletion(model=LOCAL_CHAT_MODEL, messages=[{"role": "user", "content": "Say OK."}], max_tokens=4, temperature=0)
    assert response.choices[0].message.content


def test_a_fixed_prefix_is_evaluated_once_and_restored_with_the_same_answer(tmp_path):
    from ragline.models.prompt_cache import MIN_PREFIX_TOKENS, PrefixCache

    engine = _engines().chat(LOCAL_CHAT_MODEL)
    llm = engine.get()
    system = {"role": "system", "content": "You are a terse assistant for the Aurora weather station. " * 6}
    ask = [system, {"role": "user", "content": "Name one thing a weather station measures."}]
    greedy = {"temperature": 0, "max_tokens": 12}
    with engine.generate_lock:
        llm.reset()
        llm._ctx.kv_cache_clear()
        cold = llm.create_chat_completion(messages=ask, **greedy)["choices"][0]["message"]["content"]
        first = PrefixCache(llm, tmp_path, "test-model")
        prefix = first.fixed_prefix(ask)
        assert len(prefix) >= MIN_PREFIX_TOKENS
        assert llm.input_ids[: len(prefix)].tolist() == prefix  # a prefix of the real prompt: live after the cold call
        llm.reset()
        llm._ctx.kv_cache_clear()  # so that it is evaluated and stored
        assert first.prime(ask) == len(prefix) and list(tmp_path.glob("*.kv"))
        llm.reset()
        llm._ctx.kv_cache_clear()
        second = PrefixCache(llm, tmp_path, "test-model")  # a new process: only the file is left
        assert second.prime(ask) == len(prefix) and llm.n_tokens == len(prefix)
        restored = llm.create_chat_completion(messages=ask, **greedy)["choices"][0]["message"]["content"]
    assert restored == cold


async def test_the_engine_counts_cached_prompt_tokens_on_the_second_answer():
    from ragline.models.chat import ChatOptions

    client = _client()
    system = {"role": "system", "content": "You answer questions about the Aurora weather station in one short sentence. " * 4}
    for question in ("What does it measure?", "Where is it made?"):
        await client.chat([system, {"role": "user", "content": question}], ChatOptions(max_tokens=4, temperature=0))
    last = _engines().chat(LOCAL_CHAT_MODEL).recent_calls[-1]
    assert last.cached_tokens > 0 and last.prompt_tokens > last.cached_tokens


async def test_the_local_model_counts_its_own_tokens():
    english, chinese = await _client().count_tokens(["The outdoor sensor runs on two AA batteries.", "极光气象站可以测量温度"])
    assert 6 <= english <= 14 and 3 <= chinese <= 12


async def test_an_unknown_local_model_is_a_clear_error_not_a_default():
    from ragline.models.chat import ChatModelError

    with pytest.raises(ChatModelError, match="unknown local chat model ragline/qwen9-huge.*ragline/qwen2.5-coder-1.5b-instruct"):
        await Services(get_settings()).chat("ragline/qwen9-huge").chat([{"role": "user", "content": "hi"}])


async def test_a_local_model_without_a_root_is_a_clear_error():
    from ragline.models.chat import ChatClient, ChatModelError

    with pytest.raises(ChatModelError, match="local engines of a Services"):
        await ChatClient(LOCAL_CHAT_MODEL).chat([{"role": "user", "content": "hi"}])


def test_each_root_runs_the_local_model_as_its_own_settings_say(tmp_path):
    """A Services built from other settings governs its engine (no process-wide settings read);
    roots configured alike share one, so the weights load once."""
    base = {"data_dir": tmp_path, "local_models_dir": tmp_path / "models"}
    small, large = Services(Settings(**base, local_chat_context=1024)), Services(Settings(**base, local_chat_context=2048))
    small_engine, large_engine = small.local_engines.chat(LOCAL_CHAT_MODEL), large.local_engines.chat(LOCAL_CHAT_MODEL)
    assert (small_engine.config.context, large_engine.config.context) == (1024, 2048)
    assert small_engine.config.models_dir == tmp_path / "models"
    assert Services(Settings(**base, local_chat_context=1024)).local_engines is small.local_engines
    assert small.chat(LOCAL_CHAT_MODEL).engines is small.local_engines


@pytest.mark.parametrize(("setting", "amx", "extra"), [(None, True, False), (None, False, True), (True, True, True), (False, False, False)])
def test_extra_weight_buffers_are_off_on_cpus_that_advertise_amx_unless_set(monkeypatch, setting, amx, extra):
    import ragline.models.local_engine as engine

    monkeypatch.setattr(engine, "advertises_amx", lambda: amx)
    assert engine.extra_buffers(setting) is extra


def test_the_model_loads_without_extra_buffers_on_an_amx_cpu(monkeypatch):
    """Loaded with them, llama.cpp's AMX kernels die with SIGILL on this project's test machines."""
    import llama_cpp.llama_cpp as low_level

    import ragline.models.local_engine as engine

    monkeypatch.setattr(engine, "advertises_amx", lambda: True)
    fresh = engine.LocalChatEngine(engine.QWEN_CODER_15B, engine.LocalChatConfig.from_settings(get_settings()))
    try:
        assert fresh.get().model_params.use_extra_bufts is False
    finally:
        fresh.close()
    assert low_level.llama_model_default_params().use_extra_bufts is True  # llama.cpp's own default, restored
