"""The OpenAPI document, built from the app's routes and the `@doc` each endpoint carries.

`@doc` only records what an endpoint takes and returns (pydantic models); the document is
assembled once, from the same route list the app serves, so the two never drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel
from starlette.routing import BaseRoute, Route

from ragline.api.stream_schema import event_schema, response_type_schema
from ragline.contracts.events import StreamResponse

Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])


@dataclass(frozen=True)
class ApiDoc:
    summary: str
    tag: str
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    status: int = 200
    sse: bool = False
    events: type[BaseModel] | None = None  # the data of each event of an event stream (default: StreamResponse)
    multipart: tuple[str, ...] = ()  # form fields of a multipart upload
    public: bool = False  # no API key needed
    errors: tuple[int, ...] = field(default=(400, 401, 404, 422))
    error: type[BaseModel] | None = None  # the error body, when not the service's {"error": {code, message}}


def doc(summary: str, tag: str, **kwargs: Any) -> Callable[[Endpoint], Endpoint]:
    def attach(endpoint: Endpoint) -> Endpoint:
        endpoint.api_doc = ApiDoc(summary, tag, **kwargs)  # type: ignore[attr-defined]
        return endpoint

    return attach


_ERROR_SCHEMA = {
    "type": "object",
    "properties": {"error": {"type": "object", "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}},
}


def _schema(model: type[BaseModel], components: dict[str, Any]) -> dict[str, Any]:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, definition in schema.pop("$defs", {}).items():
        components[name] = definition
    components[model.__name__] = schema
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _parameters(route: Route, api: ApiDoc, components: dict[str, Any]) -> list[dict[str, Any]]:
    params = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}} for name in route.param_convertors]
    if api.query is not None:
        for name, info in api.query.model_fields.items():
            schema = api.query.model_json_schema()["properties"][name]
            params.append({"name": name, "in": "query", "required": info.is_required(), "schema": schema, "description": info.description or ""})
    if api.sse:
        params.append({"name": "Last-Event-ID", "in": "header", "required": False, "schema": {"type": "string"},
                       "description": "Resume after this event (EventSource sends it on reconnect)."})
    return params


def _operation(route: Route, method: str, api: ApiDoc, components: dict[str, Any]) -> dict[str, Any]:
    operation: dict[str, Any] = {"summary": api.summary, "tags": [api.tag], "operationId": f"{route.name}_{method}"}
    description = (route.endpoint.__doc__ or "").strip()
    if description:
        operation["description"] = description
    params = _parameters(route, api, components)
    if params:
        operation["parameters"] = params
    if api.body is not None:
        operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": _schema(api.body, components)}}}
    elif api.multipart:
        fields = {name: ({"type": "string", "format": "binary"} if name == "file" else {"type": "string"}) for name in api.multipart}
        operation["requestBody"] = {"required": True, "content": {"multipart/form-data": {"schema": {"type": "object", "properties": fields}}}}
    if api.sse:
        events = api.events or StreamResponse
        content: dict[str, Any] = {"text/event-stream": {"schema": event_schema(_schema(events, components)["$ref"], what=events.__name__)}}
    elif api.response is not None:
        content = {"application/json": {"schema": _schema(api.response, components)}}
    else:
        content = {}
    responses: dict[str, Any] = {str(api.status): {"description": "OK", **({"content": content} if content else {})}}
    error = _schema(api.error, components) if api.error is not None else {"$ref": "#/components/schemas/Error"}
    for status in api.errors:
        responses[str(status)] = {"description": "error", "content": {"application/json": {"schema": error}}}
    operation["responses"] = responses
    if not api.public:
        operation["security"] = [{"ApiKey": []}, {"Bearer": []}]
    return operation


def openapi_document(routes: Sequence[BaseRoute], *, title: str, version: str) -> dict[str, Any]:
    components: dict[str, Any] = {"Error": _ERROR_SCHEMA}
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        api = getattr(getattr(route, "endpoint", None), "api_doc", None)
        if not isinstance(route, Route) or api is None:
            continue
        for method in sorted((route.methods or set()) - {"HEAD"}):
            # path_format: a converter ("{model:path}") is no part of an OpenAPI path template
            paths.setdefault(route.path_format, {})[method.lower()] = _operation(route, method.lower(), api, components)
    if "ResponseType" in components:  # every response_type with its description (api/stream_schema.py)
        components["ResponseType"] = response_type_schema()
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "ApiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                "Bearer": {"type": "http", "scheme": "bearer"},
            },
        },
    }
