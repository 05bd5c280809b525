"""What the OpenAPI document says about a `text/event-stream` response: one server-sent event.

An event-stream route's 200 answers frames `id: <message id>:<entry id>`, `event: message`,
`data: <one JSON event>`; the first frame also carries `retry: <ms>`, the reconnect delay, and a
quiet stream gets `: ping` comments, which are no events. OpenAPI 3.1 has no keyword for the
items of a stream (3.2's `itemSchema`), and schemathesis reads the `schema` of an event-stream
response as the schema of each event: so `schema` describes one event, its `data` a JSON string
(`contentMediaType`) of the route's event model (`contentSchema`), e.g. StreamResponse with every
response_type described below.
"""

from __future__ import annotations

from typing import Any

from ragline.contracts.events import ResponseType

_NOT_SENT = "Ragline's pipelines do not send it today."

RESPONSE_TYPES: dict[ResponseType, str] = {
    ResponseType.AGENT_QUERY: "The first event of a turn: the question was accepted. content is the question; session_id, "
                              "assistant_message_id and data.request_id name the turn; data.title_pending tells that a "
                              "session_title event will follow complete.",
    ResponseType.THINKING: "A delta of the model's reasoning, shown apart from the answer; done=true closes it.",
    ResponseType.ANSWER: "A delta of the answer text, appended to what came before (data.replace: it replaces it); done=true on "
                         "the last one; data.truncated when the output limit cut the answer.",
    ResponseType.REFERENCES: "The knowledge references the answer may cite (knowledge_references), sent before the answer; each "
                             "passage's location holds its PDF pages, heading path and start/end offsets in its document's text "
                             "(GET .../documents/{id}/text).",
    ResponseType.TOOL_CALL: "A tool or progress window opened: data.tool_name (query_understand, knowledge_search, ...), "
                            "data.tool_call_id, data.arguments.",
    ResponseType.TOOL_RESULT: "The tool or progress window data.tool_call_id closed: data.success, with data.output or data.error.",
    ResponseType.COMMAND_OUTPUT: f"Output of a command an agent tool runs (the seed's protocol). {_NOT_SENT}",
    ResponseType.INSTALL_OUTPUT: f"Output of a package install an agent tool runs (the seed's protocol). {_NOT_SENT}",
    ResponseType.REFLECTION: "Agent mode's note on its own run (content; done=true): a limit was reached (data.limit, data.value) and "
                             "the model now answers with what it found.",
    ResponseType.SESSION_TITLE: "The generated title of a new session (content); done=true. It may come shortly after complete.",
    ResponseType.ERROR: "The turn failed: content is the message, data.code its kind; done=true when it ends the turn.",
    ResponseType.COMPLETE: "The end of the turn (done=true); data.stopped when the user stopped it.",
    ResponseType.TOOL_APPROVAL_REQUIRED: "Agent mode: a call to a tool the assistant marks as needing approval waits "
                                         "(data.tool_call_id, data.tool_name, data.arguments); decide it with POST "
                                         ".../sessions/{id}/approvals. The run waits for agent_approval_timeout_s, then denies it.",
    ResponseType.TOOL_APPROVAL_RESOLVED: "Agent mode: the call data.tool_call_id was approved (it runs now) or denied (data.approved, "
                                         "data.reason); a denied call's tool_result is a failure with that reason.",
    ResponseType.MCP_OAUTH_REQUIRED: "Agent mode: an MCP server the assistant names (marked oauth in agent_mcp_servers) needs the "
                                     "user's authorization first (data.server, data.authorization_url: the user opens it). The "
                                     "turn waits until the browser comes back to .../mcp/oauth/callback, at most "
                                     "agent_approval_timeout_s; done=true.",
    ResponseType.MCP_OAUTH_RESOLVED: "Agent mode: the user granted access to data.server (its tools are offered now) or did not "
                                     "(data.authorized, data.reason: the turn goes on without them); done=true.",
    ResponseType.MEMORY_RECALLED: "The caller's long-term memories recalled for this turn (data.memories), so a client can show them.",
    ResponseType.ARTIFACTS_PENDING: f"Files an agent made are being prepared (the seed's protocol). {_NOT_SENT}",
    ResponseType.USER_MESSAGE_INJECTED: "Agent mode took in a message the user sent while it worked (POST .../sessions/{id}/inject); "
                                        "content is the message, which the model reads at this step.",
    ResponseType.CONTEXT_COMPACTED: "Agent mode summarised its earlier tool rounds to fit its prompt budget (data.rounds, "
                                    "data.tokens_before, data.tokens_after).",
    ResponseType.INSTALL_PROMPT: f"An agent asks to install a package (the seed's protocol). {_NOT_SENT}",
    ResponseType.STOP: "The user stopped the run (POST .../stop); done=true; complete with data.stopped follows.",
}


def response_type_schema() -> dict[str, Any]:
    """The enum, and each value with its description (`oneOf` of `const`s: JSON Schema has no
    per-value description; `x-enum-descriptions` is the generators' spelling of the same)."""
    values = [kind.value for kind in ResponseType]
    return {
        "type": "string",
        "description": "What the event is; each value is described in oneOf.",
        "enum": values,
        "oneOf": [{"const": kind.value, "description": RESPONSE_TYPES.get(kind, kind.value)} for kind in ResponseType],
        "x-enum-descriptions": [RESPONSE_TYPES.get(kind, kind.value) for kind in ResponseType],
    }


def event_schema(data_ref: str, *, what: str) -> dict[str, Any]:
    """One server-sent event of an event-stream response; `data_ref` is its data's JSON schema."""
    return {
        "type": "object",
        "title": "ServerSentEvent",
        "description": f"One server-sent event: `id: <message id>:<entry id>`, `event: message`, `data: <{what} JSON>`. "
                       "The first event also carries `retry: <ms>` (the reconnect delay); `: ping` comments keep a quiet "
                       "stream open and are no events. Resume with the Last-Event-ID header.",
        "properties": {
            "id": {"type": "string", "description": "<message id>:<entry id>, for Last-Event-ID."},
            "event": {"type": "string", "const": "message"},
            "data": {"type": "string", "contentMediaType": "application/json", "contentSchema": {"$ref": data_ref},
                     "description": f"A {what} as JSON (fields that are not set are left out)."},
            "retry": {"type": "integer", "minimum": 0, "description": "Reconnect delay in milliseconds (first event only)."},
        },
        "required": ["data"],
    }
