"""Process-wide settings, read once from the environment (prefix RAGLINE_) or a .env file.

Per-request knobs live in `ragline.graph.state.PipelineRequest`; these are the deployment's
choices: which models, where data lives, which engines back the stores.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

LOCAL_CHAT_MODEL = "ragline/qwen2.5-coder-0.5b-instruct"
LOCAL_EMBEDDING_MODEL = "ragline/multilingual-e5-small"


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ragline"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAGLINE_", env_file=".env", extra="ignore")

    data_dir: Path = Field(default_factory=_default_data_dir, description="Where models, indexes and caches live.")

    chat_model: str = Field(LOCAL_CHAT_MODEL, description="litellm model string for answers, e.g. openai/gpt-4o-mini, ollama/qwen2.5.")
    chat_api_base: str | None = Field(None, description="Base URL of an OpenAI-compatible server for the chat model.")
    chat_api_key: str | None = Field(None, description="API key for the chat model (else the provider's own env var).")
    query_understand_model: str | None = Field(None, description="Optional small model for rewrite + intent; falls back to the chat model.")

    embedding_model: str = Field(LOCAL_EMBEDDING_MODEL, description="litellm model string for embeddings.")
    embedding_api_base: str | None = None
    embedding_api_key: str | None = None
    embedding_batch_size: int = Field(32, ge=1, description="Texts per embedding call.")

    rerank_model: str | None = Field(None, description="litellm rerank model (cohere/..., jina_ai/...); none by default.")
    rerank_api_base: str | None = None
    rerank_api_key: str | None = None

    local_chat_context: int = Field(4096, ge=512, description="Context window of the local llama.cpp model.")
    local_chat_threads: int | None = Field(None, description="CPU threads for llama.cpp (default: all cores).")

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
