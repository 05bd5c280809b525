"""Remote providers that fail: the real litellm path against the scripted loopback server.

Each client (chat, embeddings, rerank) retries a 429 after its Retry-After and a 5xx or a refused
connection with jittered exponential backoff, exactly as often as the policy says (the server
counts the calls, so a retry by the SDK under ours would show), and never a 4xx, a timeout or a
malformed reply. A chat stream is retried only until its first delta went out.
"""

from __future__ import annotations

import asyncio

import pytest

from ragline.models.chat import ChatClient, ChatModelError, StreamEnd
from ragline.models.embeddings import Embedder, EmbeddingError
from ragline.models.rerank import Reranker, RerankError
from ragline.models.retry import RetryPolicy
from tests.scripted_model import Reply, _free_port

POLICY = RetryPolicy(retries=2, base_s=0.5, max_s=8.0, retry_after_max_s=30.0)
HANG_GUARD_S = 20  # a test that waits this long found a hang, not a slow provider
QUESTION = [{"role": "user", "content": "q"}]



@pytest.fixture(params=[True, False], ids=["direct", "litellm"])
def chat_path(request: pytest.FixtureRequest) -> bool:
    """Both ways to an OpenAI-compatible server keep the same promises: models/openai_stream.py,
    and litellm (which every other provider goes through)."""
    return request.param


def _chat(server, timeout: float = 5.0, direct: bool | None = None) -> ChatClient:
    return ChatClient("openai/scripted", server.base_url, "k", timeout=timeout, retry=POLICY, direct=direct)


async def _streamed(client: ChatClient) -> tuple[str, list[object]]:
    """The answer text of a stream, and the items seen before it ended or failed."""
    seen: list[object] = []

    async def run() -> None:
        async for item in client.stream(QUESTION):
            seen.append(item)

    await asyncio.wait_for(run(), HANG_GUARD_S)
    return "".join(getattr(i, "text", "") for i in seen), seen


# --- the policy itself ---


def test_backoff_doubles_from_the_base_within_jitter_and_is_capped():
    policy = RetryPolicy(retries=10, base_s=0.5, max_s=4.0)
    assert [policy.backoff(n, rng=lambda: 1.0) for n in range(5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert [policy.backoff(n, rng=lambda: 0.0) for n in range(3)] == [0.25, 0.5, 1.0]


# --- chat ---


async def test_chat_retries_a_429_after_its_retry_after_and_then_answers(scripted_model, waits, chat_path):
    scripted_model.on(lambda b: True, Reply(status=429, headers={"Retry-After": "3"}), times=1)
    scripted_model.on(lambda b: True, Reply.text("after the wait"))
    result = await _chat(scripted_model, direct=chat_path).chat(QUESTION)
    assert result.content == "after the wait"
    assert len(scripted_model.requests) == 2 and waits == [3.0]


async def test_chat_retries_a_5xx_with_exponential_backoff_then_gives_up(scripted_model, waits, chat_path):
    scripted_model.on(lambda b: True, Reply(status=503, error="overloaded"))
    with pytest.raises(ChatModelError, match="overloaded") as failure:
        await _chat(scripted_model, direct=chat_path).chat(QUESTION)
    assert failure.value.transient
    assert len(scripted_model.requests) == 3  # 1 + POLICY.retries: neither litellm nor the SDK retried as well
    assert len(waits) == 2 and 0.25 <= waits[0] <= 0.5 and 0.5 <= waits[1] <= 1.0


@pytest.mark.parametrize("reply", [Reply(status=400, error="bad request"), Reply(status=401, error="bad key"), Reply(raw="{not json")],
                         ids=["400", "401", "malformed JSON"])
async def test_chat_never_retries_a_refusal_or_a_malformed_reply(scripted_model, waits, reply, chat_path):
    scripted_model.on(lambda b: True, reply)
    with pytest.raises(ChatModelError) as failure:
        await _chat(scripted_model, direct=chat_path).chat(QUESTION)
    assert not failure.value.transient
    assert len(scripted_model.requests) == 1 and waits == []


async def test_a_retry_after_beyond_the_limit_fails_at_once(scripted_model, waits, chat_path):
    scripted_model.on(lambda b: True, Reply(status=429, headers={"Retry-After": "120"}))
    with pytest.raises(ChatModelError):
        await _chat(scripted_model, direct=chat_path).chat(QUESTION)
    assert len(scripted_model.requests) == 1 and waits == []


async def test_a_chat_timeout_fails_once_without_retry(scripted_model, waits, chat_path):
    scripted_model.on(lambda b: True, Reply.text("too late", delay=3))
    with pytest.raises(ChatModelError, match="(?i)timed out"):
        await asyncio.wait_for(_chat(scripted_model, timeout=0.3, direct=chat_path).chat(QUESTION), HANG_GUARD_S)
    assert len(scripted_model.requests) == 1 and waits == []


async def test_a_refused_connection_is_retried(waits, chat_path):
    client = ChatClient("openai/scripted", f"http://127.0.0.1:{_free_port()}/v1", "k", timeout=2, retry=POLICY, direct=chat_path)
    with pytest.raises(ChatModelError) as failure:
        await client.chat(QUESTION)
    assert failure.value.transient and len(waits) == 2


async def test_a_stream_refused_with_503_is_opened_again_before_any_token(scripted_model, waits, chat_path):
    scripted_model.on(lambda b: True, Reply(status=503), times=1)
    scripted_model.on(lambda b: True, Reply.text("second time lucky"))
    text, seen = await _streamed(_chat(scripted_model, direct=chat_path))
    assert text == "second time lucky" and isinstance(seen[-1], StreamEnd)
    assert len(scripted_model.requests) == 2 and len(waits) == 1


async def test_a_stream_cut_before_its_first_token_is_opened_again(scripted_model, waits, chat_path):
    scripted_model.on(lambda b: True, Reply(chunks=["never", " shown"], cut_after=0), times=1)
    scripted_model.on(lambda b: True, Reply.text("whole answer"))
    text, _ = await _streamed(_chat(scripted_model, direct=chat_path))
    assert text == "whole answer" and len(scripted_model.requests) == 2


async def test_a_stream_cut_after_tokens_went_out_is_never_retried(scripted_model, waits, chat_path):
    scripted_model.on(lambda b: True, Reply(chunks=["Paris ", "is ", "the ", "capital."], cut_after=2))
    seen: list[str] = []
    with pytest.raises(ChatModelError, match="mid-stream") as failure:
        async for item in _chat(scripted_model, direct=chat_path).stream(QUESTION):
            seen.append(getattr(item, "text", ""))
    assert "".join(seen) == "Paris is " and not failure.value.transient
    assert len(scripted_model.requests) == 1 and waits == []


async def test_a_stalled_stream_ends_in_an_error_after_the_timeout(scripted_model, waits, chat_path):
    scripted_model.on(lambda b: True, Reply(chunks=["first", " stalls"], chunk_delay=3))
    with pytest.raises(ChatModelError, match="mid-stream"):
        await _streamed(_chat(scripted_model, timeout=0.3, direct=chat_path))
    assert len(scripted_model.requests) == 1 and waits == []


# --- embeddings ---


def _embedder(server, timeout: float = 5.0) -> Embedder:
    return Embedder("openai/scripted-embed", api_base=server.base_url, api_key="k", timeout=timeout, retry=POLICY)


async def test_embeddings_retry_a_429_after_its_retry_after(scripted_model, waits):
    scripted_model.on_embedding(Reply(status=429, headers={"Retry-After": "2"}), times=1)
    vectors = await _embedder(scripted_model).embed_passages(["alpha", "beta"])
    assert len(vectors) == 2 and len(scripted_model.embedding_requests) == 2 and waits == [2.0]


async def test_embeddings_retry_a_5xx_exactly_as_often_as_the_policy_says(scripted_model, waits):
    scripted_model.on_embedding(Reply(status=500))
    with pytest.raises(EmbeddingError):
        await _embedder(scripted_model).embed_query("q")
    assert len(scripted_model.embedding_requests) == 3  # litellm's embedding path would add 2 SDK retries to each


@pytest.mark.parametrize("reply", [Reply(raw="{not json"), Reply(delay=3), Reply(status=400)], ids=["malformed JSON", "timeout", "400"])
async def test_embeddings_fail_once_on_a_malformed_reply_a_timeout_or_a_refusal(scripted_model, waits, reply):
    scripted_model.on_embedding(reply)
    with pytest.raises(EmbeddingError):
        await asyncio.wait_for(_embedder(scripted_model, timeout=0.3).embed_query("q"), HANG_GUARD_S)
    assert len(scripted_model.embedding_requests) == 1 and waits == []


# --- rerank ---


def _reranker(server, timeout: float = 5.0) -> Reranker:
    return Reranker("cohere/scripted-rerank", api_base=server.root_url, api_key="k", timeout=timeout, retry=POLICY)


async def test_rerank_retries_a_503_and_returns_the_model_scores(scripted_model, waits):
    scripted_model.on_rerank(Reply(status=503), times=1)
    scripted_model.on_rerank(Reply(scores=[0.1, 0.9]))
    scores = await _reranker(scripted_model).rerank("q", ["first", "second"])
    assert [(s.index, s.score) for s in scores] == [(1, 0.9), (0, 0.1)]
    assert len(scripted_model.rerank_requests) == 2 and len(waits) == 1


@pytest.mark.parametrize("reply", [Reply(raw="{not json"), Reply(delay=3), Reply(status=422), Reply(scores=[0.5, 0.5, 0.5])],
                         ids=["malformed JSON", "timeout", "422", "scores for documents it was not given"])
async def test_rerank_fails_once_with_a_rerank_error_callers_fall_back_on(scripted_model, waits, reply):
    scripted_model.on_rerank(reply)
    with pytest.raises(RerankError):
        await asyncio.wait_for(_reranker(scripted_model, timeout=0.3).rerank("q", ["first", "second"]), HANG_GUARD_S)
    assert len(scripted_model.rerank_requests) == 1 and waits == []


async def test_rerank_gives_up_after_the_policy_s_retries(scripted_model, waits):
    scripted_model.on_rerank(Reply(status=502))
    with pytest.raises(RerankError):
        await _reranker(scripted_model).rerank("q", ["first"])
    assert len(scripted_model.rerank_requests) == 3 and len(waits) == 2
