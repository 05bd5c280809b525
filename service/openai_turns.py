"""One OpenAI chat completion as one Ragline turn: the request mapped onto a PipelineRequest, the
turn's events (read from the StreamManager, as the native SSE routes read them) turned into
answer and reasoning text without citation tags, and what the final chunk or message carries.

- model ids: `ragline` is the default pipeline; `ragline/kb/<name or id>` answers over that
  knowledge base (resolved by name first, then id, among the bases the caller's tenant reads);
  `assistant:<id>` runs with that assistant of the tenant (service/assistant_service.py): what
  `ragline.request` sets must be among its overridable settings, and the sampling options
  (temperature, max_tokens, ...), which OpenAI clients send unasked, apply only when it lets a
  turn set `summary` (else its own win). Anything else is ModelNotFound.
- the question is the last message, which must be the user's; its image parts become the
  question's images. Earlier user and assistant messages are the conversation (openai_sessions.py);
  system and developer messages are not forwarded (Ragline's own prompts and citation protocol
  govern the answer), nor are tool messages.
- the answer: Ragline's `<kb .../>` / `<web .../>` tags are removed, or become `[n]` footnotes when
  asked (citations/plain.py); references always travel as data (service/mcp_tools.py's shape).
- usage: tokens counted with the answering model's tokenizer (exact for the local model,
  litellm's token_counter for providers): prompt = the text of the messages the client sent,
  completion = the answer and reasoning text it received. The passages Ragline added are not
  counted: the client never sent them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ragline import plain_errors
from ragline.checkpoints.streams import StreamManager
from ragline.citations.plain import PlainText
from ragline.contracts.events import ResponseType
from ragline.contracts.request import PipelineRequest
from ragline.contracts.state import ErrorKind
from ragline.retrieval.errors import KnowledgeBaseAccessError, KnowledgeBaseNotFoundError
from ragline.service.access import InvalidRequestError, NotFoundError, Principal
from ragline.service.mcp_tools import AnswerReference, Seen, fold
from ragline.service.openai_sessions import Turn
from ragline.service.openai_wire import ASSISTANT_MODEL_PREFIX, KB_MODEL_PREFIX, PIPELINE_MODEL, ChatCompletionRequest
from ragline.service.registry import RunRecord

if TYPE_CHECKING:
    from ragline.models.local_engine import LocalEngines

WAIT_SLICE_S = 1.0  # one blocking read of the stream; a quiet stream gets a heartbeat between reads
PER_QUESTION = ("query", "images")


class ModelNotFound(NotFoundError):
    """A model id this caller cannot name (OpenAI's 404 model_not_found)."""


class BadRequest(InvalidRequestError):
    """A request body Ragline cannot answer; `param` names the field, as OpenAI's errors do."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


# --- the model ---


def names_knowledge_base(model: str) -> bool:
    return model.startswith(KB_MODEL_PREFIX)


def assistant_of(model: str) -> str | None:
    """The assistant id an `assistant:<id>` model names, None for any other model."""
    return (model.removeprefix(ASSISTANT_MODEL_PREFIX).strip() or None) if model.startswith(ASSISTANT_MODEL_PREFIX) else None


def knowledge_base_of(model: str, stack: Any | None, who: Principal) -> str | None:
    """The knowledge base id a model id selects (None: the default pipeline); ModelNotFound else.
    `stack` (the RetrievalStack) is needed only for a knowledge-base model."""
    if model == PIPELINE_MODEL:
        return None
    name = model.removeprefix(KB_MODEL_PREFIX).strip()
    if not names_knowledge_base(model) or not name or stack is None:
        raise ModelNotFound(f"The model `{model}` does not exist; GET /v1/models lists the models you can use.")
    try:
        return stack.knowledge_bases.resolve(name, who).id
    except (KnowledgeBaseNotFoundError, KnowledgeBaseAccessError):  # another tenant's base reads as missing
        raise ModelNotFound(f"The model `{model}` does not exist; GET /v1/models lists the models you can use.") from None


# --- the request ---


@dataclass(frozen=True)
class Question:
    text: str
    images: list[str]
    earlier: list[Turn]  # the conversation before the question, as the client sent it

    def conversation_after(self, answer: str) -> list[Turn]:
        """The conversation the client will send back next time: this one, the question, the answer."""
        return [*self.earlier, ("user", self.text), ("assistant", answer)]


def question_of(body: ChatCompletionRequest) -> Question:
    last = body.messages[-1]
    if last.role != "user":
        raise BadRequest("the last message must be the user's question", param=f"messages.{len(body.messages) - 1}.role")
    for index, message in enumerate(body.messages):
        if (kind := message.unsupported_part()) is not None:
            raise BadRequest(f"content parts of type {kind!r} are not supported (text and image_url are)", param=f"messages.{index}.content")
    earlier: list[Turn] = [(m.role, m.text()) for m in body.messages[:-1] if m.role in ("user", "assistant") and m.text().strip()]
    return Question(text=last.text(), images=last.image_urls(), earlier=earlier)


def pipeline_request(body: ChatCompletionRequest, question: Question, kb_id: str | None) -> PipelineRequest:
    """The turn's PipelineRequest: `ragline.request` settings, the sampling options, the question."""
    settings = dict(body.ragline.request) if body.ragline else {}
    if given := [name for name in PER_QUESTION if name in settings]:
        raise BadRequest(f"ragline.request may not set {', '.join(given)}: they come from the messages", param="ragline.request")
    summary = settings.pop("summary", None) or {}
    if not isinstance(summary, dict) or not isinstance(settings.get("knowledge_base_ids") or [], list):
        raise BadRequest("ragline.request.summary is an object and knowledge_base_ids a list", param="ragline.request")
    summary = dict(summary)
    sampling = {"temperature": body.temperature, "top_p": body.top_p, "seed": body.seed,
                "max_tokens": body.max_completion_tokens or body.max_tokens}
    summary.update({name: value for name, value in sampling.items() if value is not None})
    if kb_id is not None:
        settings["knowledge_base_ids"] = [kb_id, *[k for k in settings.get("knowledge_base_ids") or [] if k != kb_id]]
    try:
        return PipelineRequest.model_validate({**settings, "summary": summary, "query": question.text,
                                               "images": [{"url": url} for url in question.images]})
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error.get("loc", ()))
        param = {"query": "messages", "images": "messages"}.get(where.split(".")[0], f"ragline.request.{where}" if where else None)
        raise BadRequest(plain_errors.describe(error), param=param) from None


def assistant_settings(body: ChatCompletionRequest, question: Question, overridable: list[str]) -> dict[str, Any]:
    """What an OpenAI request sets itself in a turn with an assistant (which checks each setting):
    `ragline.request`, the question, and the sampling options when the assistant allows `summary`."""
    settings = dict(body.ragline.request) if body.ragline else {}
    if given := [name for name in PER_QUESTION if name in settings]:
        raise BadRequest(f"ragline.request may not set {', '.join(given)}: they come from the messages", param="ragline.request")
    sampling = {name: value for name, value in {"temperature": body.temperature, "top_p": body.top_p, "seed": body.seed,
                                                "max_tokens": body.max_completion_tokens or body.max_tokens}.items() if value is not None}
    if sampling and "summary" in overridable:
        summary = settings.get("summary") or {}
        if not isinstance(summary, dict):
            raise BadRequest("ragline.request.summary is an object", param="ragline.request")
        settings["summary"] = {**summary, **sampling}
    return {**settings, "query": question.text, "images": [{"url": url} for url in question.images]}


# --- the answer ---

# a turn's error event by its code: the question refused is the client's (400), a model or store
# that failed is upstream of Ragline (502), anything else is Ragline's own failure (500)
_FAILURES = {
    ErrorKind.INVALID_INPUT.value: (400, "invalid_request_error"),
    ErrorKind.INPUT_REFUSED.value: (400, "invalid_request_error"),
    ErrorKind.MODEL_CALL.value: (502, "server_error"),
    ErrorKind.GET_CHAT_MODEL.value: (502, "server_error"),
    ErrorKind.RERANK.value: (502, "server_error"),
    ErrorKind.RETRIEVAL.value: (502, "server_error"),
}


@dataclass(frozen=True)
class TurnFailure:
    message: str
    status: int
    type: str
    code: str



@dataclass
class Delta:
    """Text that arrived in one read of the stream."""

    content: str = ""
    reasoning: str = ""


@dataclass
class DoorTurn:
    """Follows one turn's events until `complete`, yielding its new text without citation tags."""

    streams: StreamManager
    record: RunRecord
    footnotes: bool = False
    seen: Seen = field(default_factory=Seen)
    _plain: PlainText = field(init=False)
    _answer_raw: str = ""  # the tagged answer already turned into text
    _reasoning_sent: int = 0
    error_code: str | None = None  # the `code` of the turn's error event

    def __post_init__(self) -> None:
        self._plain = PlainText(footnotes=self.footnotes)

    async def deltas(self) -> AsyncIterator[Delta | None]:
        """One Delta per read of the stream that brought text; None after a quiet slice (a heartbeat)."""
        after: str | None = None
        while not self.seen.transcript.complete:
            entries = await self.streams.wait(self.record.session_id, self.record.assistant_message_id, after, WAIT_SLICE_S)
            if not entries:
                yield None
                continue
            for entry in entries:
                self.seen.add(entry.event)
                if entry.event.get("response_type") == ResponseType.ERROR.value:
                    self.error_code = str((entry.event.get("data") or {}).get("code") or "internal")
            after = entries[-1].id
            delta = self._take()
            if delta.content or delta.reasoning:
                yield delta

    def _take(self) -> Delta:
        """What the transcript gained since the last read. A `replace` that extends what was sent (a
        run resumed on another replica) goes on from there. One that changes it (grounding, a
        generation redone) cannot take back what a streaming client shows: the whole new answer
        follows after a blank line, and it alone is the turn's text (`text`, the non-streamed reply)."""
        transcript = self.seen.transcript
        delta = Delta()
        answer = transcript.answer
        if answer != self._answer_raw:
            if answer.startswith(self._answer_raw):
                delta.content = self._plain.feed(answer[len(self._answer_raw) :])[0]
            else:
                self._plain = PlainText(footnotes=self.footnotes)
                delta.content = "\n\n" + self._plain.feed(answer)[0]
            self._answer_raw = answer
        if len(transcript.thinking) > self._reasoning_sent:
            delta.reasoning = transcript.thinking[self._reasoning_sent :]
            self._reasoning_sent = len(transcript.thinking)
        return delta

    @property
    def text(self) -> str:
        return self._plain.text

    @property
    def reasoning(self) -> str:
        return self.seen.transcript.thinking

    @property
    def failure(self) -> TurnFailure | None:
        """What refused or failed a turn that ended without an answer."""
        if self.seen.error is None or self.seen.transcript.answer:
            return None
        status, kind = _FAILURES.get(self.error_code or "", (500, "server_error"))
        return TurnFailure(self.seen.error or "the pipeline failed", status, kind, self.error_code or "internal")

    @property
    def finish_reason(self) -> str:
        return "length" if self.seen.truncated else "stop"

    def references(self) -> list[dict[str, Any]]:
        """Cited sources in footnote order (`number` is their [n]), then the passages retrieved but not cited."""
        cited: list[AnswerReference] = fold(self.seen, self.record, footnotes=self.footnotes).references
        return [reference.model_dump() for reference in cited]

    def ids(self) -> dict[str, Any]:
        return {"session_id": self.record.session_id, "message_id": self.record.assistant_message_id,
                "stopped": self.seen.transcript.stopped}


# --- usage ---


def _count(engines: LocalEngines, model: str, texts: list[str]) -> list[int]:
    """Tokens of each text as `model` reads them (blocking: litellm's first import takes seconds)."""
    from ragline.models.retry import import_litellm

    if model.startswith("ragline/"):
        return engines.chat(model).count_tokens(texts)
    litellm = import_litellm()
    return [litellm.token_counter(model=model, text=text) if text else 0 for text in texts]


async def usage(engines: LocalEngines, model: str, prompt: list[str], completion: list[str]) -> dict[str, int]:
    sizes = await asyncio.to_thread(_count, engines, model, [*prompt, *completion])
    prompt_tokens, completion_tokens = sum(sizes[: len(prompt)]), sum(sizes[len(prompt) :])
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens}


def prompt_texts(body: ChatCompletionRequest) -> list[str]:
    return [message.text() for message in body.messages]
