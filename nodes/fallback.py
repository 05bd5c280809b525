"""fallback: the answer when search found nothing (seed: handleFallbackResponse).

fixed: the request's fallback response (or fallback.yaml's) goes out at once; model: the model
answers freely with the fallback prompt, streamed with the same truncation rules as an answer.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragline import prompts
from ragline.contracts import events
from ragline.contracts.context import RunContext, context_of
from ragline.contracts.request import FallbackStrategy
from ragline.contracts.state import ChatResponse, PipelineState
from ragline.generation.answer import (
    assistant_message,
    chat_options,
    model_error_update,
    stream_answer,
)
from ragline.generation.message_stream import AnswerChunks
from ragline.generation.messages import fallback_template, fixed_response, placeholder_values
from ragline.models.chat import ChatModelError
from ragline.services import services_of


async def fallback(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Answer 'nothing found' with the fixed text or a free model answer, as the request says."""
    request, turn, context = state["request"], state["turn"], context_of(runtime)
    if context.is_cancelled():
        return {}  # stopped while searching: no answer, as for a stop anywhere before the answer
    if request.fallback_strategy == FallbackStrategy.FIXED:
        text = fixed_response(request)
        events.emit(context, events.answer(turn, text, done=True))
        AnswerChunks(turn).answer(text)
        response = ChatResponse(content=text, finish_reason="stop", fallback=True)
    else:
        prompt = prompts.render(request.fallback_prompt or fallback_template(request).text("prompt"), **placeholder_values(state))
        client = services_of(runtime).chat(request.chat_model)
        try:
            response = await stream_answer(
                client, [{"role": "user", "content": prompt}], chat_options(request, local=client.is_local), turn, context, fallback=True
            )
        except ChatModelError as exc:
            return model_error_update(turn, context, exc)
    message = assistant_message(turn, response, plain=bool(state.get("plain_reply")), metadata=context.answer_metadata())
    return {"chat_response": response, "error": None, "messages": [message]}
