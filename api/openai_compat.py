"""The OpenAI-compatible door: `GET /v1/models`, `GET /v1/models/{model}`, `POST /v1/chat/completions`.

HTTP only: the body is read and bounded as everywhere (api/inputs.py), the caller is the API key's
tenant (`Authorization: Bearer <key>`), the turn runs through the RunManager exactly as a
knowledge-chat POST's does (allow list, knowledge authorization, session, stop), and the
concurrent-stream and rate limits of the key apply (api/guards.py). What a request means and how
events become chunks lives in service/openai_turns.py and service/openai_sessions.py.

Errors have OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, so the openai SDK
raises its own exceptions (NotFoundError for an unknown model, AuthenticationError, ...). A
streamed answer that fails after the 200 sends one `data: {"error": ...}` frame, as OpenAI does.
A client that leaves a stream (a stop button) stops the turn; the partial answer is saved.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ragline import defaults
from ragline.api import inputs, knowledge
from ragline.api.errors import handle_error
from ragline.api.guards import api_key_of
from ragline.api.host import HttpHost, host_of
from ragline.api.openapi import doc
from ragline.api.sse import HEADERS
from ragline.contracts.request import PipelineRequest
from ragline.service.access import NotFoundError, Principal
from ragline.service.assistants import Assistant
from ragline.service.key_limits import Limiter
from ragline.service.openai_sessions import DoorSessions, MemoryIndex, RedisIndex
from ragline.service.openai_turns import (
    BadRequest,
    DoorTurn,
    ModelNotFound,
    Question,
    assistant_of,
    assistant_settings,
    knowledge_base_of,
    names_knowledge_base,
    pipeline_request,
    prompt_texts,
    question_of,
    usage,
)
from ragline.service.openai_wire import (
    ASSISTANT_MODEL_PREFIX,
    KB_MODEL_PREFIX,
    PIPELINE_MODEL,
    ChatCompletionRequest,
    chunk,
    completion,
    completion_id,
    error_body,
    model_card,
    now,
    usage_chunk,
)
from ragline.service.registry import RunRecord

TAG = "openai"
SESSION_HEADER = "x-ragline-session"
FOOTNOTES_HEADER = "x-ragline-footnotes"
STARTED = int(time.time())  # the `created` of the pipeline model
_TYPES = {401: "invalid_request_error", 403: "permission_error", 404: "invalid_request_error", 409: "conflict_error",
          429: "rate_limit_error", 503: "service_unavailable"}
_CODES = {401: "invalid_api_key"}


# --- errors in OpenAI's shape ---


async def openai_error(request: Request, exc: Exception) -> JSONResponse:
    """The service's own mapping (status, message: api/errors.py), in OpenAI's shape."""
    if isinstance(exc, ModelNotFound):
        return JSONResponse(error_body(str(exc), type_="invalid_request_error", code="model_not_found", param="model"), status_code=404)
    if isinstance(exc, BadRequest):
        return JSONResponse(error_body(str(exc), type_="invalid_request_error", code="invalid_request", param=exc.param), status_code=400)
    if isinstance(exc, ValidationError):  # the body did not validate: OpenAI answers 400, naming the field
        error = exc.errors()[0]
        param = ".".join(str(part) for part in error.get("loc", ()))
        return JSONResponse(error_body(f"{param}: {error.get('msg', 'invalid value')}" if param else error.get("msg", "invalid"),
                                       type_="invalid_request_error", code="invalid_request", param=param or None), status_code=400)
    ours = await handle_error(request, exc)
    status = ours.status_code
    status = 400 if status == 422 else status  # OpenAI calls every refused body a 400
    said = json.loads(bytes(ours.body))["error"]
    kind = _TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    return JSONResponse(error_body(said["message"], type_=kind, code=_CODES.get(status, said["code"])), status_code=status)


def _caller(request: Request) -> tuple[HttpHost, Principal]:
    svc = host_of(request)
    return svc, svc.authenticate(request)


def door_sessions(request: Request, svc: HttpHost) -> DoorSessions:
    """One per app, made on first use: the conversation index lives in Redis when sessions do."""
    door = getattr(request.app.state, "openai_sessions", None)
    if door is None:
        shared = svc.backend.redis is not None and svc.backend.describe()["checkpointer"] == "redis"
        door = DoorSessions(svc.conversations, RedisIndex(svc.backend.redis) if shared else MemoryIndex())
        request.app.state.openai_sessions = door
    return door


# --- models ---


async def _model_cards(svc: HttpHost, who: Principal) -> list[dict[str, Any]]:
    cards = [model_card(PIPELINE_MODEL, STARTED, "ragline", description="The default pipeline (pure chat unless ragline.request names knowledge)")]
    stack = await svc.stack()
    for kb in sorted(stack.knowledge_bases.list(who), key=lambda kb: kb.name):
        cards.append(model_card(f"{KB_MODEL_PREFIX}{kb.name}", int(kb.created_at.timestamp()), kb.tenant_id,
                                knowledge_base_id=kb.id, description=kb.description))
    return [*cards, *[_assistant_card(a) for a in await _assistants(svc, who)]]


def _assistant_card(assistant: Assistant) -> dict[str, Any]:
    return model_card(f"{ASSISTANT_MODEL_PREFIX}{assistant.id}", int(assistant.created_at.timestamp()), assistant.tenant_id,
                      name=assistant.name, description=assistant.description, assistant_version=assistant.version)


async def _assistants(svc: HttpHost, who: Principal) -> list[Assistant]:
    """The tenant's assistants, page by page."""
    found: list[Assistant] = []
    page_size = defaults.SESSION_MAX_PAGE_SIZE
    while True:
        items, total = await svc.assistants.list(who, len(found) // page_size + 1, page_size)
        found += items
        if not items or len(found) >= total:
            return found


async def _assistant(svc: HttpHost, who: Principal, model: str, assistant_id: str) -> Assistant:
    try:
        return await svc.assistants.get(who, assistant_id)
    except NotFoundError:  # another tenant's assistant reads as missing too
        raise ModelNotFound(f"The model `{model}` does not exist; GET /v1/models lists the models you can use.") from None


@doc("OpenAI-compatible: the models a client may name (the pipeline, one per readable knowledge base, one per assistant)", TAG,
     errors=(401,))
async def list_models(request: Request) -> Response:
    """`ragline` is the default pipeline; `ragline/kb/<name>` answers over that knowledge base
    (its id works too: `ragline/kb/<id>`); `assistant:<id>` runs with that assistant."""
    try:
        svc, who = _caller(request)
        return JSONResponse({"object": "list", "data": await _model_cards(svc, who)})
    except Exception as exc:
        return await openai_error(request, exc)


@doc("OpenAI-compatible: one model", TAG, errors=(401, 404))
async def get_model(request: Request) -> Response:
    try:
        svc, who = _caller(request)
        model = inputs.path(request, "model")
        if model == PIPELINE_MODEL:
            return JSONResponse(model_card(PIPELINE_MODEL, STARTED, "ragline"))
        if (assistant_id := assistant_of(model)) is not None:
            return JSONResponse(_assistant_card(await _assistant(svc, who, model, assistant_id)))
        kb_id = knowledge_base_of(model, await svc.stack() if names_knowledge_base(model) else None, who)
        card = next((c for c in await _model_cards(svc, who) if c.get("knowledge_base_id") == kb_id), None)
        if card is None:
            raise ModelNotFound(f"The model `{model}` does not exist")
        return JSONResponse({**card, "id": model})
    except Exception as exc:
        return await openai_error(request, exc)


# --- chat completions ---


def _footnotes(request: Request, body: ChatCompletionRequest) -> bool:
    if body.ragline is not None and body.ragline.footnotes is not None:
        return body.ragline.footnotes
    return request.headers.get(FOOTNOTES_HEADER, "").strip().lower() in ("1", "true", "yes", "on")


async def _start(request: Request) -> tuple[HttpHost, Principal, ChatCompletionRequest, Question, RunRecord, DoorSessions, str]:
    """Everything that can still be refused with an HTTP status, then the turn is started."""
    svc, who = _caller(request)
    data = await inputs.json_body(request)
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    body = ChatCompletionRequest.model_validate(data)
    question = question_of(body)
    turn_request, assistant = await _turn_request(svc, who, body, question)
    await _authorize(svc, who, turn_request)
    door = door_sessions(request, svc)
    explicit = (body.ragline.session_id if body.ragline else None) or request.headers.get(SESSION_HEADER) or None
    session = await door.session_for(who, body.model, question.earlier, question.text, explicit)
    record = await svc.runs.submit(who, session, turn_request, assistant)
    return svc, who, body, question, record, door, turn_request.chat_model or svc.settings.chat_model


async def _turn_request(svc: HttpHost, who: Principal, body: ChatCompletionRequest, question: Question) -> tuple[PipelineRequest, Assistant | None]:
    """The turn's request: from the model (the pipeline, a knowledge base) or from the assistant it names."""
    if (assistant_id := assistant_of(body.model)) is None:
        stack = await svc.stack() if names_knowledge_base(body.model) else None
        return pipeline_request(body, question, knowledge_base_of(body.model, stack, who)), None
    assistant = await _assistant(svc, who, body.model, assistant_id)
    door_name = "the OpenAI-compatible API"
    turn = svc.assistants.prepared(assistant, assistant_settings(body, question, assistant.overridable), door=door_name)
    await svc.assistants.authorized_at_door(who, assistant, door_name)
    return turn.request, turn.assistant


async def _authorize(svc: HttpHost, who: Principal, turn_request: PipelineRequest) -> None:
    kb_ids = [*turn_request.knowledge_base_ids, *(t.knowledge_base_id for t in turn_request.search_targets)]
    if kb_ids or turn_request.knowledge_ids:
        await knowledge.authorize_search(await svc.stack(), who, kb_ids, list(turn_request.knowledge_ids))


@doc("OpenAI-compatible chat completion: one Ragline turn, streamed (SSE chunks) or whole", TAG, body=ChatCompletionRequest,
     errors=(400, 401, 404, 409, 429))
async def chat_completions(request: Request) -> Response:
    """The model selects the knowledge (`ragline`, `ragline/kb/<name or id>`) or an assistant
    (`assistant:<id>`). The conversation is a
    Ragline session: `X-Ragline-Session` names one, else the earlier messages find it (or seed a
    new one). References are on the final chunk / the message (`references`), with `[n]` footnotes
    in the text when `ragline.footnotes` or `X-Ragline-Footnotes: true` asks."""
    slot = StreamSlot(getattr(request.app.state, "limiter", None), api_key_of(request.scope))
    if not await slot.open():
        return JSONResponse(error_body(f"this API key already streams {slot.limit} answers; wait for one to end", type_="rate_limit_error",
                                       code="too_many_streams"), status_code=429, headers={"Retry-After": "1"})
    try:
        svc, who, body, question, record, door, model = await _start(request)
    except Exception as exc:
        await slot.close()
        return await openai_error(request, exc)
    turn = DoorTurn(svc.backend.streams, record, footnotes=_footnotes(request, body))
    headers = {"X-Ragline-Session": record.session_id}
    if body.stream:
        frames = _stream(svc, who, body, question, turn, door, model, slot)
        return StreamingResponse(frames, media_type="text/event-stream", headers={**HEADERS, **headers}, background=BackgroundTask(slot.close))
    try:
        await inputs.while_connected(request, _read_all(turn))
    except BaseException as exc:
        _stop_soon(svc, record)  # the client left (or the server is shutting down): the turn stops, its partial answer is kept
        if isinstance(exc, Exception):
            return await openai_error(request, exc)
        raise
    finally:
        await slot.close()
    if (failure := turn.failure) is not None:
        return JSONResponse(error_body(failure.message, type_=failure.type, code=failure.code), status_code=failure.status)
    await door.remember(who, body.model, question.conversation_after(turn.text), record.session_id)
    message: dict[str, Any] = {"role": "assistant", "content": turn.text, "refusal": None, "references": turn.references()}
    if turn.reasoning:
        message["reasoning_content"] = turn.reasoning
    counted = await usage(svc.core.local_engines, model, prompt_texts(body), [turn.text, turn.reasoning])
    return JSONResponse(completion(completion_id(), body.model, now(), message, turn.finish_reason, counted, ragline=turn.ids()),
                        headers=headers)


@dataclass
class StreamSlot:
    """A completion, streamed or not, is one of its key's concurrent answer streams, as a
    knowledge-chat POST is (the limiter is the app's, shared with the KeyLimits middleware)."""

    limiter: Limiter | None
    key: str | None
    lease: str | None = None

    @property
    def limit(self) -> int:
        return self.limiter.max_streams if self.limiter is not None else 0

    async def open(self) -> bool:
        if self.limiter is None or self.key is None:
            return True
        self.lease = await self.limiter.open_stream(self.key)
        return self.lease is not None

    async def close(self) -> None:
        if self.limiter is not None and self.key is not None and self.lease is not None:
            lease, self.lease = self.lease, None
            await self.limiter.close_stream(self.key, lease)


async def _read_all(turn: DoorTurn) -> None:
    async for _ in turn.deltas():
        pass


async def _stream(svc: HttpHost, who: Principal, body: ChatCompletionRequest, question: Question, turn: DoorTurn,
                  door: DoorSessions, model: str, slot: StreamSlot) -> AsyncIterator[str]:
    """The completion's chunks; the key's stream slot is free before [DONE], so a client that asks
    again as soon as it has read one answer is never refused for it."""
    ident, created = completion_id(), now()
    finished = False
    try:
        yield _data(chunk(ident, body.model, created, {"role": "assistant", "content": ""}))
        async for delta in turn.deltas():
            if delta is None:
                yield ": ping\n\n"  # a quiet turn (search, a slow model): proxies keep the connection
                continue
            said: dict[str, str] = {}
            if delta.reasoning:
                said["reasoning_content"] = delta.reasoning
            if delta.content:
                said["content"] = delta.content
            yield _data(chunk(ident, body.model, created, said))
        finished = True
        if (failure := turn.failure) is not None:
            yield _data(error_body(failure.message, type_=failure.type, code=failure.code))
            await slot.close()
            yield "data: [DONE]\n\n"
            return
        await door.remember(who, body.model, question.conversation_after(turn.text), turn.record.session_id)
        yield _data(chunk(ident, body.model, created, {}, turn.finish_reason, references=turn.references(), ragline=turn.ids()))
        if body.include_usage:
            yield _data(usage_chunk(ident, body.model, created, await usage(svc.core.local_engines, model, prompt_texts(body), [turn.text, turn.reasoning])))
        await slot.close()
        yield "data: [DONE]\n\n"
    finally:
        if not finished:  # the client left mid-answer: nobody reads it any more (OpenAI's streams do not resume)
            _stop_soon(svc, turn.record)


def _data(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False, separators=(',', ':'))}\n\n"


_stopping: set[asyncio.Task[None]] = set()


def _stop_soon(svc: HttpHost, record: RunRecord) -> None:
    """Stop the run from a task of its own: a cancelled response cannot await anything any more."""
    task = asyncio.get_running_loop().create_task(svc.runs.stop(record))
    _stopping.add(task)
    task.add_done_callback(_stopping.discard)
