"""The immutable request: every knob of one question, as the seed's PipelineRequest.

A request is frozen once built; stages read it and never change it. Each field carries a
description so that LangGraph Studio shows the request as a documented form.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

from ragline import defaults
from ragline.contracts.passages import SearchTarget  # what a turn searches: a retrieval concept the request carries


class FallbackStrategy(StrEnum):
    FIXED = "fixed"  # send the fixed fallback response
    MODEL = "model"  # let the model answer freely with the fallback prompt


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SummaryConfig(_Frozen):
    """Generation options of the answering model (the seed's SummaryConfig)."""

    temperature: float | None = Field(None, ge=0, le=2, description="Sampling temperature of the answer; unset: 0.3 (the seed's default) for remote models, 0 (greedy) for the local model.")
    top_p: float | None = Field(None, gt=0, le=1, description="Nucleus sampling mass; unset leaves the provider default.")
    seed: int | None = Field(None, description="Sampling seed, for reproducible answers where the provider supports it.")
    max_tokens: int | None = Field(None, ge=1, description="Upper bound on answer tokens; unset leaves the provider default.")
    thinking: bool | None = Field(None, description="Ask a reasoning model to think first; unset leaves the provider default.")
    prompt: str | None = Field(None, description="System prompt template replacing system_prompt.yaml; placeholders allowed.")
    context_template: str | None = Field(None, description="Template for the retrieved contexts replacing context_template.yaml.")


class ImageInput(_Frozen):
    url: str = Field(description="An http(s) or data: URL of an image the user attached.")
    caption: str | None = Field(None, description="A description of the image, if known.")

    @field_validator("url")
    @classmethod
    def _fetchable_by_the_model(cls, url: str) -> str:
        # a local:// handle or a file: URL would make the server read its own storage for the caller
        if not url.startswith(("data:", "https://", "http://")):
            raise ValueError("an image URL is a data: URL or an http(s) URL")
        return url


class PipelineRequest(_Frozen):
    """One user question and every setting the pipeline reads while answering it."""

    query: str = Field("", max_length=32_000, description="The user's question.")

    # where to look
    knowledge_base_ids: tuple[str, ...] = Field((), description="Knowledge bases to search as a whole.")
    knowledge_ids: tuple[str, ...] = Field((), description="Documents to search (restricts the knowledge bases).")
    search_targets: tuple[SearchTarget, ...] = Field((), description="Explicit search targets; derived from the ids above when empty.")

    # recall
    vector_threshold: float = Field(defaults.DEFAULT_VECTOR_THRESHOLD, ge=0, le=1, description="Minimum vector similarity of a hit.")
    keyword_threshold: float = Field(defaults.DEFAULT_KEYWORD_THRESHOLD, ge=0, le=1, description="Minimum normalised keyword score of a hit.")
    embedding_top_k: int = Field(defaults.DEFAULT_EMBEDDING_TOP_K, ge=1, le=500, description="Hits kept per search before rerank.")

    # rerank
    rerank_model: str | None = Field(None, description="litellm rerank model; none keeps search scores (the offline default).")
    rerank_top_k: int = Field(defaults.DEFAULT_RERANK_TOP_K, ge=1, le=200, description="Passages kept after rerank and given to the model.")
    rerank_threshold: float = Field(defaults.DEFAULT_RERANK_THRESHOLD, ge=0, le=1, description="Minimum rerank score of a passage.")

    # generation
    chat_model: str | None = Field(None, description="litellm chat model; unset uses the configured default (the local model).")
    summary: SummaryConfig = Field(default_factory=SummaryConfig, description="Answer generation options.")
    query_understand_model: str | None = Field(None, description="Smaller model for rewrite + intent; falls back to the chat model.")

    # when search finds nothing
    fallback_strategy: FallbackStrategy = Field(FallbackStrategy.FIXED, description="fixed: send fallback_response; model: answer freely with fallback_prompt.")
    fallback_response: str | None = Field(None, description="Fixed text when nothing was found; unset uses fallback.yaml.")
    fallback_prompt: str | None = Field(None, description="Prompt for the model fallback; unset uses fallback.yaml.")

    # answer shape
    citations_enabled: bool = Field(True, description="Ask the model to cite sources inline.")
    language: str | None = Field(None, description="Answer language (e.g. English, 中文); unset follows the question.")

    # query understanding
    rewrite_enabled: bool = Field(True, description="Rewrite the question with the conversation and classify its intent.")
    query_expansion_enabled: bool = Field(True, description="Add local keyword variants when recall is low.")
    relevance_gate_enabled: bool = Field(True, description="Drop whole-base hits with no evidence for the question, so an off-topic question gets the fallback.")
    rewrite_prompt_system: str | None = Field(None, description="Override of the rewrite system prompt.")
    rewrite_prompt_user: str | None = Field(None, description="Override of the rewrite user prompt.")
    intent_prompts: dict[str, str] = Field(default_factory=dict, description="System prompt per non-retrieval intent, overriding intent_prompts.yaml.")
    system_prompt_override: str | None = Field(None, description="System prompt for non-retrieval intents, overriding every intent prompt.")

    # FAQ strategy
    faq_priority_enabled: bool = Field(False, description="Put FAQ answers ahead of documents.")
    faq_direct_answer_threshold: float = Field(defaults.DEFAULT_FAQ_DIRECT_ANSWER_THRESHOLD, ge=0, le=1, description="FAQ score marking a context as an exact match.")
    faq_score_boost: float = Field(defaults.DEFAULT_FAQ_SCORE_BOOST, ge=1, description="Multiplier of FAQ scores when FAQ priority is on.")

    # tabular data
    data_analysis_enabled: bool = Field(False, description="Let the model query CSV/Excel hits with DuckDB SQL.")

    # images
    images: tuple[ImageInput, ...] = Field((), description="Images attached to the question.")
    quoted_context: str = Field("", max_length=defaults.QUOTED_CONTEXT_MAX_CHARS,
                                description="The part of an earlier answer the question replies to (seed: QuotedContext); the model reads it after the contexts.")
    vlm_model: str | None = Field(None, description="Vision model for images when the chat model has no vision.")
    chat_model_supports_vision: bool = Field(False, description="The chat model accepts images directly.")

    # web
    web_search_enabled: bool = Field(False, description="Search the web beside the knowledge bases.")
    web_fetch_enabled: bool = Field(False, description="Fetch the full text of the best web hits.")
    web_fetch_top_n: int = Field(defaults.DEFAULT_WEB_FETCH_TOP_N, ge=0, le=20, description="Web hits fetched in full.")

    # conversation
    max_history_rounds: int = Field(defaults.DEFAULT_HISTORY_ROUNDS, le=100, description="Question/answer rounds replayed; <= 0 turns multi-turn off.")
    chat_history_search: bool = Field(False, description="Also search the caller's past conversations (their chat-history knowledge base).")
    chat_history_index: bool | None = Field(None, description="Index this turn's question and answer into the caller's chat-history knowledge base; unset follows the server setting.")

    @model_validator(mode="after")
    def _has_question(self) -> PipelineRequest:
        if not self.query.strip() and not self.images:
            raise ValueError("a request needs a query or at least one image")
        return self

    @property
    def uses_knowledge(self) -> bool:
        """The seed's choice between the pure chat and the RAG pipeline."""
        return bool(self.knowledge_base_ids or self.knowledge_ids or self.search_targets or self.web_search_enabled or self.chat_history_search)


def _agent_config_fields() -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name, info in PipelineRequest.model_fields.items():
        if name in PER_QUESTION_FIELDS:
            continue
        nullable = info.annotation | None  # type: ignore[operator]
        # the request's bounds (rerank_top_k >= 1, ...) hold for a configured value too: an
        # assistant storing an impossible setting is refused when it is made, not at its first turn
        fields[name] = (Annotated[nullable, *info.metadata] if info.metadata else nullable, Field(None, description=info.description))
    return fields


PER_QUESTION_FIELDS = ("query", "images", "quoted_context")  # what every turn sets itself: never an assistant's configuration

# The seed's agent configuration: defaults for every request knob but the question itself,
# set once per assistant (the run context) and overridden by what a request sets explicitly.
# Built from PipelineRequest so the two can never drift apart; Studio shows it as a form.
AgentConfig = create_model(
    "AgentConfig",
    __config__=ConfigDict(frozen=True, extra="forbid"),
    __doc__="Defaults for every request setting; a request's own explicit values win.",
    **_agent_config_fields(),
)


def effective_request(request: PipelineRequest | dict[str, Any], agent: Any = None) -> PipelineRequest:
    """The request of a turn: the agent's defaults, then what the request itself sets.

    Accepts plain JSON (Studio, HTTP) as well as a built request; raises ValidationError on bad input.
    """
    own = request.model_dump(exclude_unset=True) if isinstance(request, PipelineRequest) else dict(request)
    if agent is None:
        return request if isinstance(request, PipelineRequest) else PipelineRequest.model_validate(own)
    agent_defaults = AgentConfig.model_validate(agent).model_dump(exclude_none=True)
    return PipelineRequest.model_validate({**agent_defaults, **own})
