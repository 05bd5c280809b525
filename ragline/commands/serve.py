"""`ragline serve`: the HTTP service (Starlette under uvicorn).

Settings come from the environment (RAGLINE_*): RAGLINE_REDIS_URL switches checkpoints, event
streams and runs to Redis so that several replicas share them; RAGLINE_API_KEYS or
RAGLINE_API_KEYS_FILE map API keys to tenants. With no key configured the service runs in dev
mode (one tenant, no key needed) and refuses to listen beyond loopback unless --insecure-dev.
--sample indexes the bundled sample knowledge base for every tenant before listening.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from ragline.commands import running
from ragline.commands.running import say_error
from ragline.contracts.access import Principal
from ragline.services import Services


def _index_sample(services: Services, tenants: list[str]) -> None:
    """The sample knowledge base indexed for each tenant (idempotent)."""
    from ragline.ingestion.sample import ensure_sample_kb

    async def ensure_all() -> None:
        for tenant in tenants:
            await ensure_sample_kb(services.retrieval, tenant_id=tenant)

    print("ragline serve: indexing the sample knowledge base ...", file=sys.stderr, flush=True)
    running.run(ensure_all())  # before uvicorn's loop starts; the stack keeps no loop-bound state


WARM_UP_QUESTION = "How long does pairing the Aurora sensor take?"  # the README's question, on the sample


def _warm_up(services: Services, sample_tenant: str | None) -> None:
    """The local model's one-time work before the port opens, so ready means ready: assembling and
    loading the GGUF, the embedder, and (with --sample) one real turn that fills the answer
    prompt's fixed-prefix cache. A remote model needs none of it."""
    import time

    if not services.chat().is_local:
        return
    started = time.perf_counter()
    print("ragline serve: loading the local model (one-time: the model, the embedder, the prompt cache) ...",
          file=sys.stderr, flush=True)
    running.run(_first_turn(services, sample_tenant))  # Ctrl-C here ends at once, not after the model call
    print(f"ragline serve: local model ready in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)


async def _first_turn(services: Services, sample_tenant: str | None) -> None:
    from ragline.checkpoints.savers import memory_saver
    from ragline.contracts.request import PipelineRequest, SummaryConfig
    from ragline.evaluation.answers import ask, warm_up
    from ragline.graph.graphs import build_graph
    from ragline.ingestion.sample import SAMPLE_KB_NAME

    await warm_up(services)
    if sample_tenant is None:
        return
    kb = await asyncio.to_thread(services.retrieval.knowledge_bases.get_by_name, SAMPLE_KB_NAME, Principal.operator_of(sample_tenant))
    request = PipelineRequest(query=WARM_UP_QUESTION, knowledge_base_ids=(kb.id,), summary=SummaryConfig(max_tokens=1))
    await ask(build_graph("ragline", checkpointer=memory_saver()), services, request, sample_tenant)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from ragline.api.app import create_app
    from ragline.api.auth import KeyRing
    from ragline.api.guards import is_loopback_host
    from ragline.api.read_deadlines import ReadDeadlines
    from ragline.settings import get_settings

    settings = get_settings()
    host = args.host or settings.host
    port = args.port or settings.port
    try:
        keyring = KeyRing.from_settings(settings)
    except (OSError, ValueError) as exc:
        say_error(f"bad API key settings: {exc}")
        return 2
    if keyring.dev_mode:
        if not is_loopback_host(host) and not args.insecure_dev:
            say_error(f"no API keys configured (RAGLINE_API_KEYS / RAGLINE_API_KEYS_FILE); refusing to listen "
                      f"on {host} without them. Configure keys, bind 127.0.0.1, or pass --insecure-dev.")
            return 2
        print("ragline serve: dev mode, no API keys: every request acts as tenant 'default'", file=sys.stderr)
    services = Services.from_settings(settings)  # the composition root of the service
    tenants = keyring.tenants() or ["default"]
    if args.sample:
        try:
            _index_sample(services, tenants)
        except (OSError, RuntimeError, ValueError) as exc:  # EmbeddingError and RetrievalError among them
            print(f"ragline serve: could not index the sample knowledge base: {exc}", file=sys.stderr)
            return 2
    try:
        _warm_up(services, tenants[0] if args.sample else None)
    except Exception as exc:  # the model's own error comes again, in words, with the first question
        print(f"ragline serve: the local model did not warm up: {exc}", file=sys.stderr)
    from ragline.logs import configure

    configure(args.log_level, json_lines=args.log_format == "json")
    uvicorn.run(
        create_app(settings, services=services, loopback_only=keyring.dev_mode and is_loopback_host(host)),
        host=host,
        port=port,
        log_level=args.log_level,
        log_config=None,  # ours: JSON lines with request, session and message ids
        timeout_graceful_shutdown=3,  # open SSE streams must not hold a restart for long
        http=ReadDeadlines.configured(header_s=settings.header_timeout_s, body_idle_s=settings.body_idle_timeout_s),
    )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("serve", help="run the HTTP service: sessions, SSE answers, knowledge bases")
    parser.add_argument("--host", help="address to listen on (default: RAGLINE_HOST or 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (default: RAGLINE_PORT or 8000)")
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    parser.add_argument("--log-format", default="json", choices=["json", "text"], help="json: one object per line with request, session and message ids")
    parser.add_argument("--sample", action="store_true", help="index the bundled sample knowledge base (every tenant) before listening")
    parser.add_argument("--insecure-dev", action="store_true", help="allow dev mode (no API keys) on a non-loopback address")
    parser.set_defaults(func=run)
