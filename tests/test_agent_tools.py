"""ragline/agent_tools.py inside LangChain's own agent (create_agent), with a scripted
tool-calling model for the agent and a real knowledge base (Chroma, bm25s, the local e5 embedder)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver

from ragline.agent_tools import RaglineRetriever, ragline_tool, search_tool
from ragline.contracts.access import AccessRule, Principal
from ragline.services import Services
from tests.knowledge_base import create_knowledge_base
from tests.scripted_model import Reply

PAIRING = "To pair the Aurora sensor, hold its button until the light blinks blue. Pairing takes up to three minutes."
WARRANTY = "The warranty lasts two years. Batteries are not covered by the warranty."


class ToolCallingModel(BaseChatModel):
    """The agent's own model, scripted: it calls the tools it is told to, then answers."""

    replies: Iterator[AIMessage]

    @property
    def _llm_type(self) -> str:
        return "scripted-tool-calling"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=next(self.replies))])

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingModel:
        return self


def _calls(*steps: tuple[str, dict]) -> Iterator[AIMessage]:
    for index, (tool, args) in enumerate(steps):
        yield AIMessage(content="", tool_calls=[{"name": tool, "args": args, "id": f"call-{index}", "type": "tool_call"}])
    yield AIMessage(content="Done: it takes up to three minutes.")


@pytest.fixture
def services(fresh_data_dir, scripted_model):
    services = Services.from_settings()
    create_knowledge_base(services, "manuals", {"Pairing": PAIRING, "Warranty": WARRANTY})
    yield services
    asyncio.run(services.aclose())


async def test_the_retriever_returns_passages_as_documents_with_their_citation_data(services):
    documents = await RaglineRetriever(services=services, knowledge_bases=["manuals"]).ainvoke("How long does pairing take?")
    assert documents and "three minutes" in documents[0].page_content
    first = documents[0].metadata
    assert first["title"] == "Pairing" and first["chunk_id"] == documents[0].id and first["score"] > 0
    assert {"knowledge_id", "knowledge_base_id", "source"} <= set(first)


async def test_an_agent_calls_the_tools_and_ragline_events_reach_its_stream(services, scripted_model):
    scripted_model.on(lambda body: True, Reply(chunks=["Pairing takes", " up to three minutes", ' <ref id="c1"/>', "."]))
    tools = [ragline_tool(services, knowledge_bases=["manuals"]), search_tool(services, knowledge_bases=["manuals"])]
    model = ToolCallingModel(replies=_calls(("ask_knowledge_base", {"query": "How long does pairing take?"}),
                                             ("search_knowledge_base", {"query": "warranty batteries"})))
    agent = create_agent(model, tools=tools, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "agent-1"}}
    custom, tokens = [], []
    async for _namespace, mode, item in agent.astream({"messages": [("user", "How long does pairing take?")]}, config,
                                                      stream_mode=["custom", "messages", "updates"], subgraphs=True):
        if mode == "custom":
            custom.append(item)
        elif mode == "messages" and item[1].get("langgraph_node") == "chat_completion_stream":
            tokens.append(item[0].content)

    kinds = [event["response_type"] for event in custom]
    assert {"references", "answer"} <= set(kinds)  # Ragline's own events, in the agent's stream
    assert "".join(tokens) == "Pairing takes up to three minutes."  # its answer's tokens, tags out

    messages = (await agent.aget_state(config)).values["messages"]
    ask, search = [m for m in messages if isinstance(m, ToolMessage)]
    assert ask.content.startswith("Pairing takes up to three minutes[1].") and "[1] Pairing" in ask.content
    assert ask.artifact["citations"][0]["title"] == "Pairing" and ask.artifact["references"]
    assert "Batteries are not covered" in search.content
    found = search.artifact[0]  # a Document, as the agent's saver hands it back
    assert (found.metadata if hasattr(found, "metadata") else found["metadata"])["title"] == "Warranty"
    assert messages[-1].content == "Done: it takes up to three minutes."


def test_the_tool_schema_is_one_query():
    tool = ragline_tool(Services(), knowledge_bases=["manuals"])
    assert set(tool.tool_call_schema.model_json_schema()["properties"]) == {"query"}


async def test_the_retriever_and_the_answer_tool_read_as_their_user(services, scripted_model):
    """A document restricted to a group is found by a retriever and a tool made for a user in it,
    and by neither for a user outside it (the model is not even given its passage)."""
    stack = services.retrieval
    warranty = next(d for d in stack.catalog.list_knowledge(stack.knowledge_bases.resolve("manuals", Principal.operator_of("default")).id)
                    if d.title == "Warranty")
    stack.knowledge_bases.set_document_access(warranty.id, Principal.operator_of("default"), AccessRule(groups=["support"]))
    question = "Are batteries covered by the warranty?"
    inside = await RaglineRetriever(services=services, knowledge_bases=["manuals"], user_id="sam", groups=["support"]).ainvoke(question)
    outside = await RaglineRetriever(services=services, knowledge_bases=["manuals"], user_id="eve").ainvoke(question)
    assert any("Batteries are not covered" in d.page_content for d in inside)
    assert all(d.metadata["knowledge_id"] != warranty.id for d in outside)
    scripted_model.on(lambda body: True, Reply.text("I cannot tell."))
    await ragline_tool(services, knowledge_bases=["manuals"], user_id="eve").ainvoke({"query": question})
    assert "Batteries are not covered" not in str(scripted_model.requests)
