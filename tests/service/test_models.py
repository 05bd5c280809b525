"""A request names only models the server allows: the client never chooses where the server connects."""

from __future__ import annotations

import pytest

from ragline.contracts.request import PipelineRequest
from ragline.service.access import InvalidRequestError
from ragline.service.models import allowed_models, check_models
from ragline.settings import Settings


def _settings(**overrides) -> Settings:
    return Settings(chat_model="openai/configured", rerank_model=None, query_understand_model=None, **overrides)


@pytest.mark.parametrize("field", ["chat_model", "query_understand_model", "vlm_model", "rerank_model"])
def test_a_model_outside_the_allow_list_is_refused_whichever_field_names_it(field):
    with pytest.raises(InvalidRequestError, match="ollama/llama3"):
        check_models(PipelineRequest(query="q", **{field: "ollama/llama3"}), _settings(), "acme")


def test_the_configured_model_and_the_allowed_ones_pass():
    settings = _settings(allowed_models=["openai/gpt-4o-mini"])
    check_models(PipelineRequest(query="q"), settings, "acme")
    check_models(PipelineRequest(query="q", chat_model="openai/configured"), settings, "acme")
    check_models(PipelineRequest(query="q", chat_model="openai/gpt-4o-mini"), settings, "acme")


def test_a_tenant_list_replaces_the_shared_one_for_that_tenant_only():
    settings = _settings(allowed_models=["openai/gpt-4o-mini"], tenant_models={"acme": ["openai/gpt-4o"]})
    assert allowed_models(settings, "acme") == {"openai/configured", "openai/gpt-4o"}
    assert allowed_models(settings, "globex") == {"openai/configured", "openai/gpt-4o-mini"}
    with pytest.raises(InvalidRequestError):
        check_models(PipelineRequest(query="q", chat_model="openai/gpt-4o-mini"), settings, "acme")
