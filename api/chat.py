"""Answer routes: knowledge-chat and chat (start a run, stream it), continue-stream, stop.

A POST starts the turn as a background run and answers with SSE read from the StreamManager;
the run goes on if the client leaves. The same POST sent again with Last-Event-ID (what a
fetch-based EventSource does on reconnect) resumes that answer's stream instead of asking again.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ragline.api import inputs, knowledge
from ragline.api.errors import ApiError, NotFound, Unprocessable
from ragline.api.host import HttpHost, host_of
from ragline.api.openapi import doc
from ragline.api.schemas import (
    ApprovalRequest,
    ApprovalResult,
    ChatRequest,
    ContinueQuery,
    InjectRequest,
    InjectResult,
    PendingApprovals,
    StopRequest,
    StopResult,
    WaitingCall,
)
from ragline.api.sse import follow, last_event_id, sse_response
from ragline.contracts.request import PipelineRequest
from ragline.service.access import ConflictError, Principal
from ragline.service.assistants import Assistant
from ragline.service.registry import Decision, RunRecord

TAG = "chat"
SSE_ERRORS = (400, 401, 403, 404, 409, 422)


async def _stream_exists(svc: HttpHost, session_id: str, message_id: str) -> bool:
    if await svc.backend.streams.read(session_id, message_id):
        return True
    record = await svc.backend.registry.get(message_id)
    return record is not None and record.session_id == session_id


async def _resume(svc: HttpHost, session_id: str, message_id: str, after: str | None, *, coalesce_replay: bool) -> Response:
    if not await _stream_exists(svc, session_id, message_id):
        raise NotFound("no event stream for this message (unknown, or expired an hour after it ended)")
    frames = follow(
        svc.backend.streams, session_id, message_id, after=after, coalesce_replay=coalesce_replay, heartbeat_s=svc.settings.sse_heartbeat_s
    )
    return sse_response(frames)


async def _authorize_knowledge(svc: HttpHost, who: Principal, request: PipelineRequest) -> None:
    kb_ids = [*request.knowledge_base_ids, *(t.knowledge_base_id for t in request.search_targets)]
    if kb_ids or request.knowledge_ids:
        await knowledge.authorize_search(await svc.stack(), who, kb_ids, list(request.knowledge_ids))


async def turn_request(svc: HttpHost, who: Principal, data: Any) -> tuple[PipelineRequest, Assistant | None]:
    """The turn's request from its JSON body; with `assistant_id`, that assistant's latest version
    under what the body sets itself (service/assistant_service.py)."""
    if not isinstance(data, dict):
        raise Unprocessable("the body must be a JSON object")
    own = {key: value for key, value in data.items() if key != "assistant_id"}
    assistant_id = data.get("assistant_id")
    if assistant_id is None:
        return inputs.parse(PipelineRequest, own), None
    if not isinstance(assistant_id, str) or not assistant_id.strip():
        raise Unprocessable("assistant_id must be an assistant's id (see GET /api/v1/assistants)")
    turn = await svc.assistants.turn(who, assistant_id, own)
    return turn.request, turn.assistant


async def _answer(request: Request, *, knowledge: bool) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    session = await svc.conversations.owned(who, inputs.path(request, "session_id"))
    resume = last_event_id(request, svc.backend.streams)
    if resume is not None:
        return await _resume(svc, session.id, resume[0], resume[1], coalesce_replay=False)
    pipeline_request, assistant = await turn_request(svc, who, await inputs.json_body(request))
    if not knowledge and pipeline_request.uses_knowledge:
        raise ApiError("the chat route answers without knowledge bases or web search; use knowledge-chat")
    await _authorize_knowledge(svc, who, pipeline_request)
    record = await svc.runs.submit(who, session, pipeline_request, assistant)
    return await _resume(svc, session.id, record.assistant_message_id, None, coalesce_replay=False)


@doc("Ask a question over knowledge bases; the answer streams as SSE", TAG, body=ChatRequest, sse=True, errors=SSE_ERRORS)
async def knowledge_chat(request: Request) -> Response:
    """Events: agent_query first (session and assistant message ids), progress cards
    (tool_call/tool_result), references before the answer, thinking/answer deltas, complete last;
    session_title for a session without a title. Every frame has an `id:` for Last-Event-ID."""
    return await _answer(request, knowledge=True)


@doc("Chat without knowledge (pure chat pipeline); SSE like knowledge-chat", TAG, body=ChatRequest, sse=True, errors=SSE_ERRORS)
async def chat(request: Request) -> Response:
    return await _answer(request, knowledge=False)


@doc("Follow an answer: replay it (deltas coalesced) then live until complete", TAG, query=ContinueQuery, sse=True, errors=SSE_ERRORS)
async def continue_stream(request: Request) -> Response:
    """With Last-Event-ID the stream continues right after that event, without a replay."""
    svc = host_of(request)
    who = svc.authenticate(request)  # takes ?api_key= too (auth.QUERY_KEY_ROUTES)
    session = await svc.conversations.readable(who, inputs.path(request, "session_id"))
    query = inputs.query(request, ContinueQuery)
    resume = last_event_id(request, svc.backend.streams)
    message_id = query.message_id or (resume[0] if resume else None)
    if message_id is None:
        running = await svc.backend.registry.running_in(session.id)
        if running is None:
            raise ConflictError("nothing is being generated in this session; name a message_id")
        message_id = running.assistant_message_id
    if resume is not None and resume[0] == message_id:
        return await _resume(svc, session.id, message_id, resume[1], coalesce_replay=False)
    return await _resume(svc, session.id, message_id, None, coalesce_replay=True)


async def _running(svc: HttpHost, session_id: str, message_id: str | None, refusal: str) -> RunRecord:
    """The session's running answer (the one named, if a message id is given); ConflictError(refusal) when there is none."""
    record = await svc.backend.registry.running_in(session_id)
    if record is None or (message_id is not None and record.assistant_message_id != message_id):
        raise ConflictError(refusal)
    return record


@doc("Tell a running agent-mode answer something (owner only): its next step reads it (user_message_injected)", TAG,
     body=InjectRequest, response=InjectResult, errors=(401, 403, 404, 409, 422))
async def inject(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    session = await svc.conversations.owned(who, inputs.path(request, "session_id"))
    body = await inputs.body(request, InjectRequest)
    record = await _running(svc, session.id, body.message_id, "nothing is being generated in this session to tell; ask a new question instead")
    await svc.runs.inject(record, body.content)
    return JSONResponse(InjectResult(message_id=record.assistant_message_id).model_dump(), status_code=202)


@doc("Approve or deny a tool call an agent-mode answer waits on (owner only; tool_approval_required): it runs, or the agent is "
     "told it was denied", TAG, body=ApprovalRequest, response=ApprovalResult, errors=(401, 403, 404, 409, 422))
async def approve(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    session = await svc.conversations.owned(who, inputs.path(request, "session_id"))
    body = await inputs.body(request, ApprovalRequest)
    record = await _running(svc, session.id, body.message_id, "nothing is being generated in this session, so no tool call waits for approval")
    await svc.runs.decide(record, body.tool_call_id, Decision(body.approved, body.reason))
    result = ApprovalResult(message_id=record.assistant_message_id, tool_call_id=body.tool_call_id, approved=body.approved)
    return JSONResponse(result.model_dump(), status_code=202)


@doc("The tool calls the running agent-mode answer waits on (owner only): what a client that reconnects must still "
     "approve or deny", TAG, response=PendingApprovals, errors=(401, 403, 404))
async def approvals(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    session = await svc.conversations.owned(who, inputs.path(request, "session_id"))
    record = await svc.backend.registry.running_in(session.id)
    if record is None:
        return JSONResponse(PendingApprovals(message_id=None, calls=[]).model_dump())
    decided = await svc.backend.registry.decisions(record.message_id)
    calls = [WaitingCall(tool_call_id=call_id, decided=decision is not None) for call_id, decision in decided.items()]
    return JSONResponse(PendingApprovals(message_id=record.assistant_message_id, calls=calls).model_dump())


@doc("Stop an answer being generated (owner only); the partial answer is kept", TAG, body=StopRequest, response=StopResult, errors=(401, 403, 404, 409, 422))
async def stop(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    session = await svc.conversations.owned(who, inputs.path(request, "session_id"))
    body = await inputs.body(request, StopRequest, optional=True)
    if body.message_id is None:
        record = await svc.backend.registry.running_in(session.id)
        if record is None:
            raise ConflictError("nothing is being generated in this session")
    else:
        record = await svc.backend.registry.get(body.message_id)
        if record is None or record.session_id != session.id:
            if await svc.backend.streams.read(session.id, body.message_id):
                return JSONResponse(StopResult(message_id=body.message_id, stopped=False).model_dump())
            raise NotFound("no such answer in this session")
    await svc.runs.stop(record)
    return JSONResponse(StopResult(message_id=record.assistant_message_id, stopped=True).model_dump())
