"""Which models a request may name: a server-side allow list, per tenant (seed: the agent's model config).

A model string is where the server connects (litellm routes `ollama/x` to localhost:11434,
`openai/x` to an API), so a client never chooses it freely: the configured models are always
allowed, plus `allowed_models`, or the tenant's own list in `tenant_models`.
"""

from __future__ import annotations

from ragline.contracts.request import AgentConfig, PipelineRequest
from ragline.service.access import InvalidRequestError
from ragline.settings import Settings

MODEL_FIELDS = ("chat_model", "query_understand_model", "vlm_model", "rerank_model")


def allowed_models(settings: Settings, tenant_id: str) -> set[str]:
    configured = {settings.chat_model, settings.query_understand_model, settings.vlm_model, settings.rerank_model}
    extra = settings.tenant_models.get(tenant_id, settings.allowed_models)
    return {model for model in (*configured, *extra) if model}


def check_models(request: PipelineRequest | AgentConfig, settings: Settings, tenant_id: str) -> None:
    """InvalidRequestError naming the first model the tenant may not use (of a request, or of an
    assistant's configuration)."""
    allowed = allowed_models(settings, tenant_id)
    for field in MODEL_FIELDS:
        model = getattr(request, field)
        if model is not None and model not in allowed:
            raise InvalidRequestError(f"{field} {model!r} is not available; this service allows: {', '.join(sorted(allowed))}")
