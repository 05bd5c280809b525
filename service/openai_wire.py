"""OpenAI's chat-completions wire format, as far as Ragline's OpenAI-compatible door reads and writes it.

Requests are validated by pydantic; fields OpenAI defines that Ragline has no use for
(`frequency_penalty`, `logit_bias`, `tools`, ...) are accepted and ignored, since every client
sends some of them, but the ones Ragline reads are checked. Responses are built as plain dicts:
a chunk is made for every batch of answer text, and a model per chunk would cost more than the
rest of the relay.

Ragline's own additions are documented fields OpenAI clients ignore: `ragline` in the request
(footnotes, an explicit session, PipelineRequest settings), and `references` and `ragline`
(session and message ids) on the final chunk and the non-streamed message.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_MESSAGES = 1_000  # a conversation the client replays whole; only the last rounds reach the model
PIPELINE_MODEL = "ragline"  # the default pipeline: pure chat, or whatever `ragline.request` selects
KB_MODEL_PREFIX = "ragline/kb/"  # ragline/kb/<knowledge base name or id>
ASSISTANT_MODEL_PREFIX = "assistant:"  # assistant:<id>, a stored assistant of the caller's tenant


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ImageUrl(_Lenient):
    url: str = Field(max_length=20_000_000)


class ContentPart(_Lenient):
    type: str = Field(max_length=50)
    text: str | None = None
    image_url: ImageUrl | None = None


class ChatMessage(_Lenient):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part.text or "" for part in self.content or [] if part.type == "text")

    def image_urls(self) -> list[str]:
        if not isinstance(self.content, list):
            return []
        return [part.image_url.url for part in self.content if part.type == "image_url" and part.image_url is not None]

    def unsupported_part(self) -> str | None:
        """The type of a content part Ragline cannot read (audio, files), if any."""
        if not isinstance(self.content, list):
            return None
        return next((part.type for part in self.content if part.type not in ("text", "image_url")), None)


class StreamOptions(_Lenient):
    include_usage: bool = False


class RaglineOptions(BaseModel):
    """Ragline's extension of the request body (`extra_body={"ragline": {...}}` in the openai SDK)."""

    model_config = ConfigDict(extra="forbid")

    footnotes: bool | None = Field(None, description="Citations as [n] footnotes in the text (default: removed; the X-Ragline-Footnotes header too).")
    session_id: str | None = Field(None, min_length=1, max_length=200, description="Continue this Ragline session (as the X-Ragline-Session header).")
    request: dict[str, Any] = Field(default_factory=dict, description="PipelineRequest settings of the turn (all but query and images).")


class ChatCompletionRequest(_Lenient):
    model: str = Field(min_length=1, max_length=500)
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    n: int | None = Field(None, ge=1, le=1, description="Ragline writes one answer per request.")
    user: str | None = Field(None, max_length=256)
    ragline: RaglineOptions | None = None

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def chunk(completion: str, model: str, created: int, delta: dict[str, Any], finish_reason: str | None = None,
          **extra: Any) -> dict[str, Any]:
    return {"id": completion, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}], **extra}


def usage_chunk(completion: str, model: str, created: int, usage: dict[str, int]) -> dict[str, Any]:
    """The last chunk under `stream_options.include_usage`: no choices, only the usage."""
    return {"id": completion, "object": "chat.completion.chunk", "created": created, "model": model, "choices": [], "usage": usage}


def completion(completion_id_: str, model: str, created: int, message: dict[str, Any], finish_reason: str,
               usage: dict[str, int], **extra: Any) -> dict[str, Any]:
    return {"id": completion_id_, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
            "usage": usage, **extra}


def model_card(model_id: str, created: int, owned_by: str, **extra: Any) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": created, "owned_by": owned_by, **extra}


def error_body(message: str, *, type_: str, code: str | None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def now() -> int:
    return int(time.time())
