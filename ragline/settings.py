"""Process-wide settings, read once from the environment (prefix RAGLINE_) or a .env file.

Per-request knobs live in `ragline.contracts.state.PipelineRequest`; these are the deployment's
choices: which models, where data lives, which engines back the stores.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ragline import defaults

LOCAL_CHAT_MODEL = "ragline/qwen2.5-coder-1.5b-instruct"
LOCAL_EMBEDDING_MODEL = "ragline/multilingual-e5-small"


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ragline"


class RetrievalFields(BaseModel):
    """The retrieval knobs: part of Settings, and handed to the retrieval stack as RetrievalConfig."""

    chroma_url: str | None = Field(None, description="Chroma server URL (HTTP client); default: Redis with redis_url, else a folder under data_dir.")
    redis_url: str | None = Field(None, description="Redis 8 (search + JSON modules) shared by replicas: checkpoints, event streams, leases, sessions, jobs, and the catalog, vectors and keywords (nothing of them on local disk).")
    fusion: Literal["zscore", "rrf"] = Field("zscore", description="zscore: weighted z-scores (measured best here); rrf: the seed's weighted RRF.")
    fusion_vector_weight: float = Field(defaults.ZSCORE_VECTOR_WEIGHT, ge=0, description="z-score fusion: weight of the vector side.")
    fusion_keyword_weight: float = Field(defaults.ZSCORE_KEYWORD_WEIGHT, ge=0, description="z-score fusion: weight of the keyword side.")
    fusion_vector_std_floor: float = Field(defaults.ZSCORE_VECTOR_STD_FLOOR, ge=0, description="z-score fusion: the vector side's standard deviation counts as at least this (cosine units): closer similarities are noise, not margins.")
    rrf_k: int = Field(defaults.RRF_K, ge=1, description="Reciprocal-rank-fusion constant.")
    rrf_vector_weight: float = Field(defaults.RRF_VECTOR_WEIGHT, ge=0, description="Weight of the vector ranks.")
    rrf_keyword_weight: float = Field(defaults.RRF_KEYWORD_WEIGHT, ge=0, description="Weight of the keyword ranks.")
    bm25_k1: float = Field(defaults.BM25_K1, gt=0)
    bm25_b: float = Field(defaults.BM25_B, ge=0, le=1)
    store_group_timeout_s: float = Field(defaults.STORE_GROUP_TIMEOUT_S, gt=0)
    hnsw_ef_search: int = Field(defaults.HNSW_EF_SEARCH, ge=10, description="Chroma HNSW search breadth.")
    hnsw_max_neighbors: int = Field(defaults.HNSW_MAX_NEIGHBORS, ge=4, description="Chroma HNSW M of new collections.")
    feedback_docs: int = Field(defaults.FEEDBACK_DOCS, ge=0, description="Hybrid: fused hits whose vectors refine the query vector (0 = off).")
    feedback_weight: float = Field(defaults.FEEDBACK_WEIGHT, ge=0, description="Hybrid: Rocchio beta, the weight of the hits' mean vector.")


class TenantWebSearch(BaseModel):
    """One tenant's web search provider (seed: the WebSearchProviderID allowed for a tenant)."""

    provider: Literal["duckduckgo", "searxng"] = Field(description="The provider this tenant's questions search the web with.")
    searxng_url: str | None = Field(None, description="This tenant's SearXNG instance; unset uses web_search_searxng_url.")


class McpServer(BaseModel):
    """One MCP server whose tools agent-mode assistants may use. The operator lists them
    (agent_mcp_servers); an assistant names one, so a client never chooses where Ragline connects."""

    model_config = ConfigDict(extra="forbid")

    transport: Literal["streamable_http", "stdio"] = Field(description="streamable_http: a URL; stdio: a command Ragline starts.")
    url: str | None = Field(None, description="streamable_http: the server's MCP endpoint.")
    headers: dict[str, str] = Field(default_factory=dict, description="streamable_http: headers of every request (e.g. the server's Authorization).")
    command: str | None = Field(None, description="stdio: the program to start, e.g. npx or python.")
    args: list[str] = Field(default_factory=list, description="stdio: its arguments.")
    env: dict[str, str] = Field(default_factory=dict, description="stdio: environment variables it gets besides a minimal default.")
    tenants: list[str] = Field(default_factory=list, description="Tenants whose assistants may name it; empty: every tenant.")
    timeout_s: float = Field(defaults.AGENT_MCP_TIMEOUT_S, gt=0, description="Longest wait to connect, list the tools, or run one call.")
    oauth: bool = Field(False, description="streamable_http: each user authorizes Ragline at the server's OAuth authorization server (MCP OAuth); their turn waits for it (mcp_oauth_required).")
    oauth_scope: str | None = Field(None, max_length=500, description="oauth: the scope to ask for; unset takes what the server advertises.")

    @model_validator(mode="after")
    def _where(self) -> McpServer:
        if self.transport == "streamable_http" and not (self.url or "").startswith(("http://", "https://")):
            raise ValueError("a streamable_http MCP server needs an http(s) url")
        if self.transport == "stdio" and not self.command:
            raise ValueError("a stdio MCP server needs a command")
        if self.oauth and self.transport != "streamable_http":
            raise ValueError("MCP OAuth needs a streamable_http server")
        return self


# lower-case letters, digits and hyphens: a tool is offered as <server>__<tool>, so a name never holds "_"
McpServerName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]{0,31}$")]


class Settings(BaseSettings, RetrievalFields):
    model_config = SettingsConfigDict(env_prefix="RAGLINE_", env_file=".env", extra="ignore")

    data_dir: Path = Field(default_factory=_default_data_dir, description="Where models, indexes and caches live.")

    chat_model: str = Field(LOCAL_CHAT_MODEL, description="litellm model string for answers, e.g. openai/gpt-4o-mini, ollama/qwen2.5.")
    chat_api_base: str | None = Field(None, description="Base URL of an OpenAI-compatible server for the chat model.")
    chat_api_key: str | None = Field(None, description="API key for the chat model (else the provider's own env var).")
    chat_direct: bool = Field(True, description="Read an OpenAI-compatible server (openai/<model> with an api_base) directly, not through litellm: a small fraction of litellm's CPU per streamed chunk.")
    context_token_budget: int | None = Field(None, ge=0, description="Tokens of retrieved passages one answer may carry (0: no limit). Default: a small budget for the local model, none for remote models.")
    first_turn_intent: Literal["exemplars", "model"] = Field("exemplars", description="How a first-turn text question's intent is found: embedded exemplars (no model call; nothing to rewrite) or the rewrite call.")
    query_understand_model: str | None = Field(None, description="Optional small model for rewrite + intent; falls back to the chat model.")
    followup_rewrite: Literal["when_needed", "always"] = Field("when_needed", description="A follow-up that stands on its own (names its subject, refers to nothing earlier) goes like a first turn, without the rewrite call; 'always': every follow-up is rewritten by the model.")

    embedding_model: str = Field(LOCAL_EMBEDDING_MODEL, description="litellm model string for embeddings.")
    embedding_api_base: str | None = None
    embedding_api_key: str | None = None
    embedding_batch_size: int = Field(defaults.EMBEDDING_BATCH_SIZE, ge=1, description="Texts per embedding call.")
    image_embedding_model: str | None = Field(None, description="litellm multimodal embedding model that embeds stored images (as data: URLs) and questions for image recall; none: images are found by their OCR and caption text only.")
    image_embedding_api_base: str | None = None
    image_embedding_api_key: str | None = None

    rerank_model: str | None = Field(None, description="litellm rerank model (cohere/..., jina_ai/...); none by default.")
    rerank_api_base: str | None = None
    rerank_api_key: str | None = None
    rerank_sees_images: bool | None = Field(None, description="The rerank model scores pictures (a multimodal reranker, e.g. jina_ai/jina-reranker-m0): image-vector hits are sent as their images; none: only rerank models known to be multimodal.")

    # remote providers: per-call timeouts and retries (the local models run in-process and need neither)
    chat_timeout_s: float = Field(defaults.CHAT_TIMEOUT_S, gt=0, description="Longest wait for a remote chat provider to connect, reply, or send the next chunk of a stream.")
    agent_max_rounds: int = Field(defaults.AGENT_MAX_ROUNDS, ge=1, description="Agent mode: model calls that may ask for tools in one turn; then the model answers with what it has.")
    agent_max_tool_calls: int = Field(defaults.AGENT_MAX_TOOL_CALLS, ge=1, description="Agent mode: tool calls in one turn, all rounds together; then the model answers with what it has.")
    agent_context_tokens: int = Field(defaults.AGENT_CONTEXT_TOKENS, ge=256, description="Agent mode: the loop's prompt budget in tokens; past AGENT_COMPACT_SHARE of it the earlier tool rounds are summarised.")
    agent_approval_timeout_s: float = Field(defaults.AGENT_APPROVAL_TIMEOUT_S, gt=0, description="Agent mode: how long a tool call waits for the user's approval (tool_approval_required) before it is denied.")
    agent_mcp_servers: dict[McpServerName, McpServer] = Field(default_factory=dict, description='Agent mode: the MCP servers assistants may name (their tools become the agent\'s), as JSON: {"orders": {"transport": "streamable_http", "url": "https://..."}, "files": {"transport": "stdio", "command": "python", "args": ["server.py"]}}.')
    embedding_timeout_s: float = Field(defaults.EMBEDDING_TIMEOUT_S, gt=0, description="Longest wait for one remote embedding call.")
    rerank_timeout_s: float = Field(defaults.RERANK_TIMEOUT_S, gt=0, description="Longest wait for one rerank call; slower ones fall back to search scores.")
    provider_retries: int = Field(defaults.PROVIDER_RETRIES, ge=0, description="Retries of a remote model call after a 429, a 5xx or a refused connection (never after 4xx, a timeout, or streamed text).")
    provider_retry_base_s: float = Field(defaults.PROVIDER_RETRY_BASE_S, ge=0, description="Exponential backoff base: retry n waits base*2^n, jittered into [half, full].")
    provider_retry_max_s: float = Field(defaults.PROVIDER_RETRY_MAX_S, ge=0, description="Longest backoff between two calls.")
    provider_retry_after_max_s: float = Field(defaults.PROVIDER_RETRY_AFTER_MAX_S, ge=0, description="A 429's Retry-After is honoured up to this long; a longer one fails the call at once.")

    vlm_model: str | None = Field(None, description="litellm vision model that captions document images at ingestion (openai/gpt-4o-mini, ollama/llava); none: OCR only, offline.")
    vlm_api_base: str | None = None
    vlm_api_key: str | None = None
    vision_models: list[str] = Field(default_factory=list, description='Answering models that see images although litellm does not know it (an OpenAI-compatible server\'s model), e.g. ["openai/my-vlm"]; they get the question\'s images and up to 3 retrieved images.')

    local_chat_context: int = Field(defaults.LOCAL_CHAT_CONTEXT, ge=512, description="Context window of the local llama.cpp model.")
    local_chat_threads: int | None = Field(None, description="CPU threads for llama.cpp (default: the cores free at each call, see models/cpu.py).")
    local_chat_batch: int = Field(defaults.LOCAL_CHAT_BATCH, ge=8, description="Prompt tokens llama.cpp evaluates per batch.")
    local_chat_extra_buffers: bool | None = Field(
        None, description="llama.cpp's extra weight buffers (repacked weights, AMX kernels). Default: on, except on CPUs that "
        "advertise AMX, where the virtual machines Ragline is tested on kill the process at the first AMX instruction (SIGILL).")
    local_prompt_cache: bool = Field(True, description="Keep the KV state of fixed prompt prefixes (system prompt, citation protocol), in memory and under the models directory (prompt-kv/).")
    local_models_dir: Path | None = Field(None, description="Where the local models are assembled and their prompt cache kept; default: data_dir/models. Several data directories can share one.")

    # web search + web_fetch (ragline.web)
    web_search_provider: str = Field("duckduckgo", description="Web search provider: duckduckgo (HTML, no key) or searxng (JSON).")
    web_search_duckduckgo_url: str = Field("https://html.duckduckgo.com/html/", description="DuckDuckGo HTML endpoint (tests point it at loopback).")
    web_search_searxng_url: str | None = Field(None, description="Base URL of a SearXNG instance with the JSON format enabled.")
    tenant_web_search: dict[str, TenantWebSearch] = Field(default_factory=dict, description='Per-tenant provider replacing web_search_provider, as JSON: {"acme": {"provider": "searxng", "searxng_url": "https://..."}}.')
    web_search_max_results: int = Field(defaults.WEB_SEARCH_MAX_RESULTS, ge=1, le=50, description="Web results taken per question.")
    web_fetch_allow_private: bool = Field(False, description="Let web_fetch reach private, loopback and link-local addresses (intranets, tests).")
    web_fetch_allowed_networks: list[str] = Field(default_factory=list, description="Private networks web_fetch may reach (CIDR, e.g. 10.1.2.0/24) without allowing all.")

    # entity graph (ragline.entities)
    graph_bolt_url: str | None = Field(None, description="Bolt URL of a Neo4j (or Bolt-compatible) server; unset keeps the graph in DuckDB.")
    graph_bolt_user: str | None = Field(None, description="Neo4j user; unset connects without authentication.")
    graph_bolt_password: str | None = None
    graph_bolt_database: str | None = Field(None, description="Neo4j database name; unset uses the server default.")

    # long-term memory (ragline.memory)
    memory_store: Literal["sqlite", "memory", "redis"] | None = Field(None, description="Long-term memory store: sqlite (a file under data_dir), memory (lost on exit) or redis (redis_url, shared by replicas); default: redis when redis_url is set, else sqlite.")
    chat_history_index: bool = Field(False, description="Index every answered turn into the caller's chat-history knowledge base (a request's chat_history_index overrides).")
    memory_min_score: float = Field(defaults.MEMORY_MIN_SCORE, ge=0, le=1, description="Similarity a memory needs to be recalled (tuned for multilingual-e5-small).")

    # --- the HTTP service (`ragline serve`) ---
    host: str = Field("127.0.0.1", description="Address `ragline serve` listens on.")
    port: int = Field(8000, ge=1, le=65535, description="Port `ragline serve` listens on.")
    public_url: str | None = Field(None, pattern=r"^https?://[^\s/]+(/[^\s]*)?$", description="The address browsers reach Ragline at (where an MCP server's authorization sends them back); default http://host:port.")
    header_timeout_s: float = Field(defaults.HEADER_TIMEOUT_S, gt=0, description="A request's headers must all arrive within this many seconds (408 and the close otherwise).")
    body_idle_timeout_s: float = Field(defaults.BODY_IDLE_TIMEOUT_S, gt=0, description="A request body may go this long without a byte before its connection is closed.")
    checkpointer: Literal["memory", "sqlite", "redis"] | None = Field(None, description="Where runs are checkpointed; default: redis when redis_url is set, else sqlite under data_dir.")
    stream_manager: Literal["memory", "redis"] | None = Field(None, description="Where run events are kept for SSE resume; default: redis with the redis checkpointer, else in-process.")
    durability: Literal["sync", "async", "exit"] = Field("sync", description="LangGraph checkpoint durability; sync survives a hard crash mid-run.")
    api_keys: dict[str, str | dict[str, Any]] | None = Field(None, description='API key -> tenant, "tenant/user", or an object (tenant, user, groups, knowledge_bases, read_only, expires_at, name, assert_user; api/auth.py KeySpec) as JSON, e.g. {"k1": "acme"}; none configured = dev mode, one tenant "default".')
    api_keys_file: Path | None = Field(None, description="A JSON file of API keys in the same shape as api_keys.")
    mcp_oauth_issuer: str | None = Field(None, pattern=r"^https?://[^\s]+$", description="MCP OAuth at /mcp: the authorization server whose access tokens /mcp takes beside API keys (advertised in /.well-known/oauth-protected-resource/mcp); set with mcp_oauth_introspection_url.")
    mcp_oauth_introspection_url: str | None = Field(None, pattern=r"^https?://[^\s]+$", description="The issuer's token introspection endpoint (RFC 7662): a token is active for the user in its sub (or username) claim.")
    mcp_oauth_client_id: str | None = Field(None, description="Ragline's client id at the introspection endpoint (HTTP basic auth); unset: none sent.")
    mcp_oauth_client_secret: str | None = None
    mcp_oauth_tenant: str = Field("default", min_length=1, description="The tenant an MCP OAuth user acts in.")
    mcp_oauth_groups_claim: str = Field("groups", min_length=1, description="The introspection claim that lists the user's groups (restricted documents follow them).")

    @model_validator(mode="after")
    def _mcp_oauth_whole(self) -> Settings:
        if bool(self.mcp_oauth_issuer) != bool(self.mcp_oauth_introspection_url):
            raise ValueError("MCP OAuth at /mcp needs both RAGLINE_MCP_OAUTH_ISSUER and RAGLINE_MCP_OAUTH_INTROSPECTION_URL")
        return self

    allowed_models: list[str] = Field(default_factory=list, description='Models a request may name besides the configured ones (chat, query understanding, rerank), e.g. ["openai/gpt-4o-mini"]; a request can never name another.')
    tenant_models: dict[str, list[str]] = Field(default_factory=dict, description='Per-tenant allow lists replacing allowed_models for that tenant, as JSON: {"acme": ["openai/gpt-4o"]}.')
    rate_limit_per_minute: int = Field(defaults.RATE_LIMIT_PER_MINUTE, ge=0, description="Requests per API key and minute (0: no limit); over it, 429 with Retry-After.")
    rate_limit_burst: int = Field(defaults.RATE_LIMIT_BURST, ge=1, description="Requests an API key may send at once before the per-minute rate applies.")
    max_streams_per_key: int = Field(defaults.MAX_STREAMS_PER_KEY, ge=0, description="Answers one API key may stream at once (0: no limit); over it, 429.")
    generate_titles: bool = Field(True, description="Generate a session title from the first question (session_title event).")
    run_lease_ttl_s: float = Field(defaults.RUN_LEASE_TTL_S, gt=0, description="A run whose holder stops heartbeating is taken over after this long.")
    run_start_slots: int = Field(defaults.RUN_START_SLOTS, ge=0, description="Turns a process starts at a time: a turn holds a slot until its answer streams (or run_start_hold_s), so a burst of new turns waits its turn instead of stalling answers in flight (0: no limit).")
    run_start_hold_s: float = Field(defaults.RUN_START_HOLD_S, gt=0, description="Longest a starting turn holds its slot: one waiting on a slow remote model lets the next start.")
    stop_poll_s: float = Field(defaults.STOP_POLL_S, gt=0, description="Period of the stop watcher.")
    sse_heartbeat_s: float = Field(defaults.SSE_HEARTBEAT_S, gt=0, description="Comment frame interval on quiet SSE streams.")

    # --- ingestion jobs (uploads return 202 with a job; `ragline worker` runs them when redis_url is set) ---
    job_workers: int = Field(defaults.JOB_WORKERS, ge=1, description="Ingestion jobs one process runs at once (in `ragline serve` without Redis; per `ragline worker` with it).")
    serve_runs_jobs: bool = Field(True, description="With Redis, `ragline serve` also runs ingestion jobs, so uploads never wait for a worker that was not started; set false when dedicated `ragline worker`s do them and chat must not share a process with ingestion.")
    job_timeout_s: int = Field(defaults.JOB_TIMEOUT_S, ge=1, description="Longest one ingestion job may run before it fails.")
    job_heartbeat_s: int = Field(defaults.JOB_HEARTBEAT_S, ge=1, description="A running job that stays silent this long is taken to be on a dead worker and retried.")
    job_stall_s: float = Field(defaults.JOB_STALL_S, gt=0, description="A job embedding or indexing without progress this long is taken for stuck: its heartbeat stops, and the queue retries it (the log shows where it waited).")
    worker_nice: int = Field(defaults.WORKER_NICE, ge=0, le=19, description="CPU niceness `ragline worker` runs at: on a host that also serves answers, ingestion takes only the CPU they leave (0: equal share).")
    job_sweep_s: int = Field(defaults.JOB_SWEEP_S, ge=1, description="How often workers look for jobs whose worker died.")
    job_retries: int = Field(defaults.JOB_RETRIES, ge=1, description="Attempts of one job across worker deaths.")

    @property
    def models_dir(self) -> Path:
        return self.local_models_dir or self.data_dir / "models"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
