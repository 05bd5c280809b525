"""Reading a request's body and query into pydantic models; every failure is a 4xx with a message."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from ragline.api.errors import (
    ApiError,
    PayloadTooLarge,
    Unprocessable,
    validation_message,
)

Model = TypeVar("Model", bound=BaseModel)

MAX_JSON_BYTES = 1024 * 1024  # a question with its options is far smaller; uploads use multipart


async def json_body(request: Request, *, optional: bool = False) -> Any:
    raw = await request.body()
    if len(raw) > MAX_JSON_BYTES:
        raise PayloadTooLarge(f"the JSON body is larger than {MAX_JSON_BYTES} bytes")
    if not raw.strip():
        if optional:
            return {}
        raise ApiError("a JSON body is required")
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(f"the body is not valid JSON: {exc}") from None


def parse(model: type[Model], data: Any) -> Model:
    if not isinstance(data, dict):
        raise Unprocessable("the body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise Unprocessable(validation_message(exc)) from None


async def body(request: Request, model: type[Model], *, optional: bool = False) -> Model:
    return parse(model, await json_body(request, optional=optional))


def query(request: Request, model: type[Model]) -> Model:
    params: dict[str, Any] = {}
    for key in request.query_params:
        values = request.query_params.getlist(key)
        params[key] = values if len(values) > 1 else values[0]
    params.pop("api_key", None)
    return parse(model, params)


def path(request: Request, name: str) -> str:
    return str(request.path_params[name])
