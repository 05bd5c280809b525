"""`ragline mcp` as an MCP client starts it (a subprocess speaking MCP on stdio), with the official
`mcp` client SDK: the tools are listed, search and ask answer from a real knowledge base in the
data directory (local e5 embeddings; the scripted model answers), and the key the command is
given decides the tenant: the second tenant sees nothing of the first's."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.api.test_mcp import call, refused
from tests.scripted_model import Reply

ROOT = Path(__file__).resolve().parents[1]
KEYS = {"key-a": "acme", "key-b": "globex"}
WARRANTY = "The Borealis kettle has a warranty of two years. Keep the receipt to claim the warranty."
DESCALING = "Descale the Borealis kettle every month with citric acid to remove limescale."


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("mcp-stdio")


@pytest.fixture(scope="module")
def kettle(data_dir: Path) -> dict[str, str]:
    """acme's knowledge base "kettle" with two documents, written where `ragline mcp` will read it."""
    from ragline.services import Services
    from ragline.settings import Settings

    async def build() -> dict[str, str]:
        services = Services(Settings(data_dir=data_dir, redis_url=None))
        try:
            kb = services.retrieval.knowledge_bases.create("kettle", "acme")
            warranty = await services.ingestion.ingest_text(kb.id, WARRANTY, "Warranty", tenant_id="acme")
            await services.ingestion.ingest_text(kb.id, DESCALING, "Descaling", tenant_id="acme")
            return {"kb": kb.id, "warranty": warranty.id}
        finally:
            await services.aclose()

    return asyncio.run(build())


@asynccontextmanager
async def ragline_mcp(data_dir: Path, scripted: Any, key: str | None, keys: dict[str, str] | None = KEYS) -> AsyncIterator[ClientSession]:
    env = {
        "RAGLINE_DATA_DIR": str(data_dir),
        "RAGLINE_CHAT_MODEL": "openai/scripted", "RAGLINE_CHAT_API_BASE": scripted.base_url, "RAGLINE_CHAT_API_KEY": "k",
        "RAGLINE_CHECKPOINTER": "memory", "RAGLINE_STREAM_MANAGER": "memory",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        **({"RAGLINE_API_KEYS": json.dumps(keys)} if keys else {}),
        **({"RAGLINE_MCP_API_KEY": key} if key else {}),
    }
    command = StdioServerParameters(command=sys.executable, args=["-m", "ragline", "mcp"], env=env, cwd=ROOT)
    async with stdio_client(command) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session




async def test_tools_search_and_ask_over_stdio(data_dir, kettle, scripted_model):
    scripted_model.on(lambda body: True, Reply(chunks=["The warranty lasts two years", ' <ref id="c1"/>', "."]))
    async with ragline_mcp(data_dir, scripted_model, "key-a") as session:
        assert {tool.name for tool in (await session.list_tools()).tools} == {"list_knowledge_bases", "search", "ask", "read_document"}
        assert [kb["name"] for kb in (await call(session, "list_knowledge_bases"))["knowledge_bases"]] == ["kettle"]
        found = await call(session, "search", query="how long is the warranty", knowledge_bases=["kettle"], top_k=2)
        answer = await call(session, "ask", question="How long is the warranty of the kettle?", knowledge_bases=["kettle"])
        page = await call(session, "read_document", knowledge_base="kettle", document_id=kettle["warranty"])
    top = found["passages"][0]
    assert (top["document_id"], top["knowledge_base_id"], top["title"]) == (kettle["warranty"], kettle["kb"], "Warranty")
    assert answer["answer"].startswith("The warranty lasts two years") and answer["answer"].endswith("[1].") and "<kb" not in answer["answer"]
    assert answer["references"][0]["number"] == 1 and answer["references"][0]["knowledge_base_id"] == kettle["kb"]
    assert any(m["role"] == "user" for m in scripted_model.requests[-1]["messages"])  # the answer came from the model, through the pipeline
    assert page["chunks"][0]["content"] == WARRANTY and page["next_offset"] is None


async def test_the_second_tenants_key_sees_nothing_of_the_first(data_dir, kettle, scripted_model):
    async with ragline_mcp(data_dir, scripted_model, "key-b") as session:
        assert (await call(session, "list_knowledge_bases"))["knowledge_bases"] == []
        messages = [
            await refused(session, "search", query="warranty", knowledge_bases=[kettle["kb"]]),
            await refused(session, "read_document", knowledge_base=kettle["kb"], document_id=kettle["warranty"]),
            await refused(session, "ask", question="How long is the warranty?", knowledge_bases=[kettle["kb"]]),
        ]
    assert all("does not exist" in m or "not found" in m for m in messages), messages
    assert not scripted_model.requests  # no turn ran for the refused ask


def test_without_a_key_when_keys_are_configured_it_exits_with_a_one_line_error(data_dir):
    import subprocess

    env = {**os.environ, "RAGLINE_DATA_DIR": str(data_dir), "RAGLINE_API_KEYS": json.dumps(KEYS)}
    env.pop("RAGLINE_MCP_API_KEY", None)
    for args in ((), ("--api-key", "wrong")):
        result = subprocess.run([sys.executable, "-m", "ragline", "mcp", *args], env=env, cwd=ROOT, capture_output=True, text=True,
                                stdin=subprocess.DEVNULL, timeout=120)
        assert result.returncode == 2 and result.stderr.startswith("ragline mcp:") and "Traceback" not in result.stderr
        assert result.stdout == ""  # nothing on the protocol's stream
