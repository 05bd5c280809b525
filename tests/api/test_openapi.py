"""The OpenAPI document: valid OpenAPI 3.1, every SSE event type described for the event-stream
routes, and the events the service really sends match it (no event without data among them)."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema
from schemathesis.specs.openapi.definitions import OPENAPI_31_VALIDATOR

from ragline.api.app import ROUTES
from ragline.api.stream_schema import RESPONSE_TYPES
from ragline.contracts.events import ResponseType
from tests.api.live import new_session
from tests.scripted_model import Reply

SSE_ROUTES = {(method.lower(), route.path_format) for route in ROUTES for method in (route.methods or ()) - {"HEAD"}
              if getattr(getattr(route.endpoint, "api_doc", None), "sse", False)}


async def document(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    return response.json()


def event_schema(doc: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    return doc["paths"][path][method]["responses"]["200"]["content"]["text/event-stream"]["schema"]


def validator(doc: dict[str, Any], ref: str) -> jsonschema.Draft202012Validator:
    """A validator of `ref` whose "#/components/..." references resolve inside the document."""
    return jsonschema.Draft202012Validator({**doc, "$ref": ref})


async def test_the_document_is_valid_openapi_3_1(client):
    doc = await document(client)
    errors = [f"{list(e.instance_path)}: {e.message}" for e in OPENAPI_31_VALIDATOR.iter_errors(doc)][:5]
    assert not errors, errors


async def test_every_event_stream_route_describes_its_events_and_every_response_type(client):
    doc = await document(client)
    assert len(SSE_ROUTES) >= 4, SSE_ROUTES  # knowledge-chat, chat, continue-stream, job events
    for method, path in SSE_ROUTES:
        schema = event_schema(doc, method, path)
        assert schema["required"] == ["data"] and schema["properties"]["data"]["contentMediaType"] == "application/json"
        assert "retry:" in schema["description"]
        expected = "JobRecord" if path.endswith("/events") else "StreamResponse"
        assert schema["properties"]["data"]["contentSchema"] == {"$ref": f"#/components/schemas/{expected}"}, path
    stream = doc["components"]["schemas"]["StreamResponse"]
    assert stream["properties"]["response_type"] == {"$ref": "#/components/schemas/ResponseType"}
    kinds = doc["components"]["schemas"]["ResponseType"]
    described = {one["const"]: one["description"] for one in kinds["oneOf"]}
    assert set(described) == set(kinds["enum"]) == {kind.value for kind in ResponseType}
    assert all(len(text) > 20 for text in described.values())
    assert set(RESPONSE_TYPES) == set(ResponseType)


async def test_the_dify_route_documents_difys_error_shape(client):
    doc = await document(client)
    errors = doc["paths"]["/retrieval"]["post"]["responses"]
    assert errors["403"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/RetrievalError"}
    assert set(doc["components"]["schemas"]["RetrievalError"]["properties"]) == {"error_code", "error_msg"}


def blocks(raw: str) -> list[list[str]]:
    """The stream's blocks (lines up to a blank line), as an EventSource parser sees them."""
    return [block.split("\n") for block in raw.replace("\r\n", "\n").split("\n\n") if block]


def events_of(raw: str) -> list[dict[str, Any]]:
    """Every event a client such as httpx-sse dispatches: any block with a field (not only comments)."""
    events = []
    for block in blocks(raw):
        fields = [line.partition(":") for line in block if line and not line.startswith(":")]
        if fields:
            event: dict[str, Any] = {"data": "\n".join(value.removeprefix(" ") for name, _, value in fields if name == "data")}
            event |= {name: value.removeprefix(" ") for name, _, value in fields if name in ("id", "event", "retry")}
            events.append(event)
    return events


async def test_the_answer_stream_has_no_event_without_data_and_matches_the_document(client, scripted_model):
    import json

    scripted_model.on(lambda b: True, Reply.text("Paris is the capital.", chunk_delay=0.02))
    doc = await document(client)
    sid = await new_session(client, title="t")
    async with client.stream("POST", f"/api/v1/sessions/{sid}/chat", json={"query": "Capital of France?"}) as response:
        assert response.status_code == 200
        raw = (await response.aread()).decode()
    events = events_of(raw)
    assert events and all(event["data"] for event in events), [e for e in events if not e["data"]]
    assert raw.startswith("retry: ") and events[0]["retry"].isdigit()  # the reconnect delay rides on the first event
    assert [e for e in events if "retry" in e] == events[:1]
    frame = validator(doc, "#/paths/" + "~1api~1v1~1sessions~1{session_id}~1chat/post/responses/200/content/text~1event-stream/schema")
    stream_response = validator(doc, "#/components/schemas/StreamResponse")
    for event in events:
        frame.validate({**event, "retry": int(event["retry"])} if "retry" in event else event)
        stream_response.validate(json.loads(event["data"]))
    kinds = [json.loads(e["data"])["response_type"] for e in events]
    assert kinds[0] == "agent_query" and kinds[-1] == "complete" and "answer" in kinds


async def test_a_stream_that_is_quiet_at_first_still_sends_no_event_without_data():
    from ragline.api.sse import follow
    from ragline.checkpoints.streams import MemoryStreamManager

    streams = MemoryStreamManager()
    writes = []
    async for write in follow(streams, "s", "m", heartbeat_s=0.01):
        writes.append(write)
        if len(writes) == 2:  # two pings, then the first event arrives
            await streams.append("s", "m", {"response_type": "complete"})
    raw = "".join(writes)
    assert writes[:2] == [": ping\n\n", ": ping\n\n"]
    assert [e["data"] for e in events_of(raw)] == ['{"response_type":"complete"}']
    assert events_of(raw)[0]["retry"].isdigit()


def test_schemathesis_validates_a_real_answer_stream_against_the_document(server, scripted_model):
    """schemathesis reads an event-stream response's schema as each event's, and the data's
    contentSchema as the event's JSON: a real answer conforms (a response_type left out of the
    document would fail here)."""
    import schemathesis
    from schemathesis.specs.openapi.checks import response_schema_conformance

    scripted_model.on(lambda b: True, Reply.text("Paris.", chunk_delay=0.01))
    sid = httpx.post(f"{server.url}/api/v1/sessions", json={"title": "t"}).json()["id"]
    schema = schemathesis.openapi.from_url(f"{server.url}/api/v1/openapi.json")
    case = schema["/api/v1/sessions/{session_id}/chat"]["POST"].Case(path_parameters={"session_id": sid}, body={"query": "Capital?"})
    response = case.call(base_url=server.url)
    assert response.status_code == 200 and '"response_type":"answer"' in response.text
    case.validate_response(response, checks=[response_schema_conformance])  # the test server has no keys: skip the auth checks
