"""Reading a request's body and query into pydantic models; every failure is a 4xx with a message.

Bodies are bounded before they are read whole: a declared Content-Length over the limit is
refused at once, and a streamed body is counted as it arrives. JSON nested deeper than any of our
bodies is refused, and large bodies are parsed off the event loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from ragline import defaults
from ragline.api.errors import (
    ApiError,
    ClientGone,
    PayloadTooLarge,
    Unprocessable,
    UnsupportedMediaType,
    validation_message,
)

Model = TypeVar("Model", bound=BaseModel)
T = TypeVar("T")

MAX_JSON_BYTES = defaults.JSON_BODY_MAX_BYTES
MAX_JSON_DEPTH = defaults.JSON_MAX_DEPTH


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, refused (413) as soon as it is known to exceed `limit` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the body is larger than {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"the body is larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def depth_of(value: Any, limit: int) -> int:
    """How deeply containers nest in `value` (iteratively; stops counting past `limit`)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict | list):
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


def decode_json(raw: bytes) -> Any:
    try:
        data = json.loads(raw)
    except RecursionError:
        raise ApiError(f"the JSON body nests deeper than {MAX_JSON_DEPTH} levels") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(f"the body is not valid JSON: {exc}") from None
    if depth_of(data, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise ApiError(f"the JSON body nests deeper than {MAX_JSON_DEPTH} levels")
    return data


async def json_body(request: Request, *, optional: bool = False) -> Any:
    raw = await read_body(request, MAX_JSON_BYTES)
    if not raw.strip():
        if optional:
            return {}
        raise ApiError("a JSON body is required")
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        # a browser sends text/plain across sites without asking first: such a body is never taken as JSON
        raise UnsupportedMediaType(f"send the body as application/json, not {media or 'without a content type'}")
    if len(raw) > defaults.JSON_OFF_LOOP_BYTES:
        return await asyncio.to_thread(decode_json, raw)
    return decode_json(raw)


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


async def while_connected(request: Request, work: Awaitable[T]) -> T:
    """Run `work`, cancelling it if the client leaves first (an abandoned upload stops indexing)."""
    task = asyncio.ensure_future(work)
    while True:
        done, _ = await asyncio.wait({task}, timeout=defaults.DISCONNECT_POLL_S)
        if done:
            return task.result()
        if await request.is_disconnected():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise ClientGone("the client left; the work was cancelled")


def path(request: Request, name: str) -> str:
    return str(request.path_params[name])


# NUL and the other control characters go; line breaks and tabs become spaces. Bidirectional
# controls go too: U+202E shows "invoice\u202efdp.exe" as "invoiceexe.pdf" in every list.
_BIDI = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_CONTROL = {**dict.fromkeys([*range(0x00, 0x20), 0x7F, *_BIDI]), **dict.fromkeys(map(ord, "\t\n\r\v\f"), " ")}


def plain_text(value: str) -> str:
    """A one-line field (a title) without control characters; runs of whitespace become one space."""
    return " ".join(value.translate(_CONTROL).split())


def file_name(raw: str) -> str:
    """The uploaded file's own name: no folders (either slash), no control characters, no dot
    names, at most FILE_NAME_MAX_CHARS characters with its extension kept; ApiError otherwise."""
    name = plain_text(raw.replace("\\", "/").rsplit("/", 1)[-1]).lstrip(".").strip()
    if not name:
        raise ApiError(f"the file name {raw[:80]!r} cannot be used; name the file, e.g. faq.csv")
    if len(name) > defaults.FILE_NAME_MAX_CHARS:
        stem, dot, suffix = name.rpartition(".")
        keep = suffix[:16] if dot else ""
        name = (stem if dot else name)[: defaults.FILE_NAME_MAX_CHARS - len(keep) - 1].rstrip() + (f".{keep}" if keep else "")
    return name
