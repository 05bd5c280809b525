"""The direct OpenAI-compatible reader keeps every promise of models/chat.py, against a real
loopback HTTP server that streams: deltas, reasoning and <think> splitting, usage, one StreamEnd,
retries only before the first delta, errors that say whether they are transient, the timeout as
the longest silence, and a stopped answer closing the provider's connection.
"""

from __future__ import annotations

import asyncio
import gzip
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragline.models.chat import ChatClient, ChatModelError, ChatOptions, StreamEnd
from ragline.models.openai_stream import EVENT_MAX, SSEDataParser, parse_chunk, serves_directly
from ragline.models.retry import RetryPolicy
from tests.models.loopback_provider import LoopbackProvider, Script, answer, delta, error, sse

POLICY = RetryPolicy(retries=2, base_s=0.5, max_s=8.0, retry_after_max_s=30.0)
HANG_GUARD_S = 20  # a test that waits this long found a hang, not a slow provider
QUESTION = [{"role": "user", "content": "q"}]



def _client(provider: LoopbackProvider, timeout: float = 5.0) -> ChatClient:
    return ChatClient("openai/local-qwen", provider.base_url, "secret", timeout=timeout, retry=POLICY)


async def _stream(client: ChatClient, options: ChatOptions = ChatOptions()) -> list[object]:
    async def run() -> list[object]:
        return [item async for item in client.stream(QUESTION, options)]

    return await asyncio.wait_for(run(), HANG_GUARD_S)


def _text(items: list[object], kind: str = "answer") -> str:
    return "".join(getattr(i, "text", "") for i in items if getattr(i, "kind", None) == kind)


# --- which models take the direct path ---


def test_only_openai_compatible_servers_are_read_directly():
    assert serves_directly("openai/scripted", "http://127.0.0.1:9/v1")
    assert serves_directly("openai/Qwen/Qwen3-8B", "http://vllm:8000/v1")
    assert not serves_directly("openai/scripted", None)  # OpenAI's own API: litellm maps per-model parameters
    assert not serves_directly("openai/gpt-4o-mini", "https://proxy.example/v1")
    assert not serves_directly("openai/o3-mini", "https://proxy.example/v1")
    assert not serves_directly("ollama/llama3", "http://127.0.0.1:11434")
    assert not serves_directly("ragline/qwen2.5-coder-0.5b", None)


# --- a whole answer ---


async def test_a_stream_gives_deltas_thinking_usage_and_exactly_one_stream_end():
    reasoning = sse(delta(reasoning="weigh it"))
    script = answer("<thi", "nk>hmm</think>Par", "is", usage={"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5})
    script.pieces.insert(0, reasoning)
    script.pieces.insert(-1, sse(delta(finish="stop")))  # a vendor that says "done" twice
    async with LoopbackProvider([script]).running() as provider:
        items = await _stream(_client(provider), ChatOptions(temperature=0.2, max_tokens=9))
    ends = [i for i in items if isinstance(i, StreamEnd)]
    assert ends == [StreamEnd("stop", {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5})] and items[-1] is ends[0]
    assert _text(items, "thinking") == "weigh ithmm" and _text(items) == "Paris"
    sent = provider.requests[0]
    assert sent["model"] == "local-qwen" and sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert (sent["temperature"], sent["max_tokens"]) == (0.2, 9)
    assert provider.headers[0]["authorization"] == "Bearer secret"


async def test_frames_split_anywhere_and_crlf_line_ends_read_the_same():
    body = b"".join(sse(delta(w)) for w in ["Zürich ", "是 ", "a city"]).replace(b"\n", b"\r\n") + sse(delta(finish="stop"))
    pieces: list[bytes | float] = [body[i : i + 1] for i in range(len(body))]  # one byte per HTTP chunk, é and 是 split too
    async with LoopbackProvider([Script(pieces)]).running() as provider:
        items = await _stream(_client(provider))
    assert _text(items) == "Zürich 是 a city" and isinstance(items[-1], StreamEnd) and items[-1].finish_reason == "stop"


async def test_a_stream_compressed_by_a_proxy_is_read_decompressed():
    body = b"".join(sse(delta(w)) for w in ["gz", "ip"]) + sse(delta(finish="stop"))
    script = Script([gzip.compress(body)], headers={"content-encoding": "gzip"})
    async with LoopbackProvider([script]).running() as provider:
        items = await _stream(_client(provider))
    assert _text(items) == "gzip"


async def test_a_whole_reply_without_streaming_reads_content_reasoning_and_usage():
    reply = {"choices": [{"message": {"content": "<think>a</think>Yes", "reasoning_content": "b"}, "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
    async with LoopbackProvider([Script([json.dumps(reply).encode()], content_type="application/json")]).running() as provider:
        result = await _client(provider).chat(QUESTION)
    assert (result.content, result.thinking, result.finish_reason) == ("Yes", "ba", "stop")
    assert result.usage["total_tokens"] == 2 and provider.requests[0]["stream"] is False


def _no_proxy_env(monkeypatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


async def test_requests_go_through_the_environments_proxy_read_once_per_client(monkeypatch):
    _no_proxy_env(monkeypatch)
    async with LoopbackProvider([answer("via"), answer("proxy")]).running() as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        client = ChatClient("openai/m", "http://model.invalid/v1", "secret", timeout=5.0, retry=POLICY)
        first = await _stream(client)
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # not read again for each request
        second = await _stream(client)
    assert (_text(first), _text(second)) == ("via", "proxy")
    assert proxy.request_lines[0].startswith("POST http://model.invalid/v1/chat/completions ")


def test_netrc_credentials_are_used_only_when_no_api_key_is_sent(monkeypatch, tmp_path):
    from ragline.models.openai_stream import env_route

    _no_proxy_env(monkeypatch)
    netrc = tmp_path / "netrc"
    netrc.write_text("machine models.example login ann password s3cret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    assert env_route("https://models.example/v1/chat/completions", has_key=False).auth.login == "ann"
    assert env_route("https://models.example/v1/chat/completions", has_key=True).auth is None  # aiohttp refuses both
    assert env_route("https://other.example/v1", has_key=False).auth is None
    monkeypatch.setenv("NO_PROXY", "models.example")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert env_route("https://models.example/v1", has_key=True).proxy is None
    assert str(env_route("https://other.example/v1", has_key=True).proxy) == "http://proxy.example:3128"


# --- failures before the first delta: retried as the policy says ---


async def test_a_429_before_the_first_delta_is_retried_after_its_retry_after(waits):
    async with LoopbackProvider([error(429, headers={"Retry-After": "3"}), answer("fine")]).running() as provider:
        items = await _stream(_client(provider))
    assert _text(items) == "fine" and waits == [3.0] and len(provider.requests) == 2


async def test_a_500_before_the_first_delta_is_retried_then_fails_as_transient(waits):
    async with LoopbackProvider([error(500, "overloaded")]).running() as provider:
        with pytest.raises(ChatModelError, match="overloaded") as failure:
            await _stream(_client(provider))
    assert failure.value.transient and len(provider.requests) == 3 and len(waits) == 2


async def test_a_400_is_never_retried(waits):
    async with LoopbackProvider([error(400, "bad request")]).running() as provider:
        with pytest.raises(ChatModelError, match="bad request") as failure:
            await _stream(_client(provider))
    assert not failure.value.transient and len(provider.requests) == 1 and waits == []


async def test_a_stream_cut_before_its_first_delta_is_opened_again(waits):
    cut = Script([b": keep-alive\n\n"], cut=True)
    async with LoopbackProvider([cut, answer("whole")]).running() as provider:
        items = await _stream(_client(provider))
    assert _text(items) == "whole" and len(provider.requests) == 2 and len(waits) == 1


# --- failures after a delta went out: the error ends the answer, nothing is repeated ---


@pytest.mark.parametrize("script", [
    Script([sse(delta("Paris ")), sse(delta("is "))], cut=True),
    Script([sse(delta("Paris ")), sse(delta("is "))]),  # a clean end with no finish reason and no [DONE]
], ids=["connection dropped", "ended without finish or DONE"])
async def test_a_stream_cut_short_after_deltas_ends_in_a_mid_stream_error(waits, script):
    async with LoopbackProvider([script]).running() as provider:
        seen: list[object] = []
        with pytest.raises(ChatModelError, match="mid-stream") as failure:
            async for item in _client(provider).stream(QUESTION):
                seen.append(item)
    assert _text(seen) == "Paris is " and not failure.value.transient and len(provider.requests) == 1 and waits == []


async def test_malformed_json_in_the_stream_fails_once_and_is_not_transient(waits):
    async with LoopbackProvider([Script([sse(delta("ok ")), b"data: {not json\n\n"])]).running() as provider:
        with pytest.raises(ChatModelError) as failure:
            await _stream(_client(provider))
    assert not failure.value.transient and len(provider.requests) == 1 and waits == []


async def test_an_error_object_inside_the_stream_ends_it_with_its_message(waits):
    inline = sse({"error": {"message": "context length exceeded", "code": 400}})
    async with LoopbackProvider([Script([sse(delta("a")), inline])]).running() as provider:
        with pytest.raises(ChatModelError, match="context length exceeded"):
            await _stream(_client(provider))


async def test_silence_longer_than_the_timeout_ends_the_stream_without_retry(waits):
    async with LoopbackProvider([Script([sse(delta("first")), 5.0, sse(delta(finish="stop"))])]).running() as provider:
        with pytest.raises(ChatModelError, match="mid-stream.*timed out") as failure:
            await _stream(_client(provider, timeout=0.3))
    assert not failure.value.transient and len(provider.requests) == 1 and waits == []


async def test_a_stopped_answer_closes_the_provider_connection():
    async with LoopbackProvider([Script([sse(delta("first ")), 30.0, sse(delta(finish="stop"))])]).running() as provider:
        items = _client(provider).stream(QUESTION)
        first = await asyncio.wait_for(anext(items), HANG_GUARD_S)
        await items.aclose()  # type: ignore[attr-defined]  # what a stopped answer does
        await asyncio.wait_for(provider.client_closed.wait(), HANG_GUARD_S)
    assert getattr(first, "text", "") == "first "


# --- the frame parser ---

_line_end = st.sampled_from([b"\n", b"\r\n", b"\r"])
_text_line = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]), max_size=20).map(str.encode)


@st.composite
def _events(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    """A byte stream of events with comments and other fields, and the data it carries. One line end
    per stream: a CR line end followed by an LF one would read, rightly, as one CRLF."""
    stream, expected = b"", []
    end = draw(_line_end)
    for _ in range(draw(st.integers(0, 6))):
        lines = draw(st.lists(_text_line, min_size=1, max_size=3))
        for line in lines:
            if draw(st.booleans()):
                stream += b":" + draw(_text_line) + end  # a comment
            if draw(st.booleans()):
                stream += b"event: message" + end
            space = b" " if line.startswith(b" ") else draw(st.sampled_from([b" ", b""]))  # the first space is the separator's
            stream += b"data:" + space + line + end
        stream += end  # the blank line that dispatches
        expected.append(b"\n".join(lines))
    return stream, expected


@given(_events(), st.lists(st.integers(0, 400), max_size=12))
def test_the_parser_yields_each_event_s_data_however_the_bytes_are_split(events, cuts):
    stream, expected = events
    bounds = sorted({min(c, len(stream)) for c in cuts})
    parser, got = SSEDataParser(), []
    for start, end in zip([0, *bounds], [*bounds, len(stream)], strict=True):
        got += parser.feed(stream[start:end])
    got += parser.close()
    assert got == expected


@given(_events(), _text_line)
def test_an_event_without_its_blank_line_is_dropped_at_the_end(events, tail):
    stream, expected = events
    parser = SSEDataParser()
    assert parser.feed(stream + b"data: " + tail + b"\n") + parser.close() == expected


@pytest.mark.parametrize("flood", [b"data: " + b"x" * EVENT_MAX, b"data: xx\n" * (EVENT_MAX // 3)], ids=["one endless line", "no blank line"])
def test_an_event_that_never_ends_is_refused_instead_of_kept_growing(flood):
    parser = SSEDataParser()
    with pytest.raises(ValueError, match="longer than"):
        for start in range(0, len(flood), 65536):
            parser.feed(flood[start : start + 65536])


@given(st.binary(max_size=40))
def test_a_chunk_that_is_not_a_json_object_is_a_json_error(payload):
    try:
        body = json.loads(payload)
    except ValueError:
        body = None
    if isinstance(body, dict):
        return  # a JSON object (rarely drawn): parsed, not refused
    with pytest.raises(json.JSONDecodeError):
        parse_chunk(payload)


async def test_services_close_the_connection_pools_their_chat_models_opened(scripted_model):
    import asyncio

    from ragline.models.openai_stream import OpenAIStreamClient
    from ragline.services import Services
    from tests.scripted_model import Reply

    scripted_model.on(lambda body: True, Reply(chunks=["a"]))
    client = OpenAIStreamClient(scripted_model.base_url, "k", 5)
    [chunk async for chunk in client.stream({"model": "scripted", "messages": [{"role": "user", "content": "q"}]})]
    session = client._sessions[asyncio.get_running_loop()]
    assert not session.closed
    await Services().aclose()
    assert session.closed  # else aiohttp prints "Unclosed client session" when the process ends


def test_a_pool_no_host_closed_goes_quietly_with_its_loop(scripted_server):
    """A graph hosted by Studio, a script: nobody calls Services.aclose. aiohttp would then print
    "Unclosed client session" when the process ends; the pool is closed with its loop instead."""
    import subprocess
    import sys

    from tests.scripted_model import Reply

    scripted_server.reset()
    scripted_server.on(lambda body: True, Reply(chunks=["a"]))
    script = (
        "import asyncio\n"
        "from ragline.models.openai_stream import OpenAIStreamClient\n"
        "async def main():\n"
        f"    client = OpenAIStreamClient({scripted_server.base_url!r}, 'k', 5)\n"
        "    body = {'model': 'scripted', 'messages': [{'role': 'user', 'content': 'q'}]}\n"
        "    print([chunk async for chunk in client.stream(body)][0][1])\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "a", done.stderr
    assert "Unclosed" not in done.stderr, done.stderr
