"""Images through the whole graph with a scripted vision model (issue 14, "done when").

Caption path: the answering model has no vision, so a vision model describes the attached image
during query understanding; the answer reads that description, the user message keeps it as its
image's caption, and the next round replays it. Context-image path: the answering model sees, so
the image of the retrieved screenshot chunk and the user's own image are sent with the question.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragline.checkpoints.savers import memory_saver
from ragline.contracts.context import RunContext, RunHost
from ragline.contracts.request import PipelineRequest
from ragline.graph.graphs import build_graph
from ragline.graph.turn import stream_turn
from ragline.services import Services
from tests.api.live import embedded_services, memory_settings
from tests.ingestion.image_fixtures import screenshot_png
from tests.scripted_model import Reply, ScriptedModel

SCREEN = ["Error E42: anemometer bearing worn", "Replace the bearing with part AB-7"]
GAUGE = "data:image/png;base64," + base64.b64encode(screenshot_png(["WIND 12 m/s"], size=(300, 80))).decode()
DESCRIPTION = "A wind gauge display reading 12 m/s"


def is_rewrite(body: dict[str, Any]) -> bool:
    return "response_format" in body  # the structured rewrite + intent call; answers have none


def rewrite_reply(query: str) -> Reply:
    return Reply.text(f'{{"rewrite_query": "{query}", "intent": "kb_search", "image_description": "{DESCRIPTION}"}}')


def image_urls(message: dict[str, Any]) -> list[str]:
    content = message["content"]
    return [p["image_url"]["url"] for p in content if p.get("type") == "image_url"] if isinstance(content, list) else []


def services_for(root: Path, scripted: ScriptedModel, embedder: Any, **settings: Any) -> Services:
    return embedded_services(root, memory_settings(scripted, data_dir=root, **settings), embedder)


async def ask(graph: Any, core: Services, request: PipelineRequest, session: str) -> list[Any]:
    return [event async for event in stream_turn(graph, request, RunContext(session_id=session, host=RunHost(services=core)))]


@pytest.fixture
def scripted(scripted_server: ScriptedModel) -> Iterator[ScriptedModel]:
    scripted_server.reset()
    yield scripted_server


async def test_a_model_without_vision_reads_the_vision_models_description_which_the_history_replays(tmp_path, scripted, embedder):
    core = services_for(tmp_path, scripted, embedder, vlm_model="openai/scripted-vlm", vlm_api_base=scripted.base_url,
                        vlm_api_key="scripted-key")
    kb = core.retrieval.knowledge_bases.create("gauges", "default")
    await core.ingestion.ingest_text(kb.id, "The wind gauge shows the wind speed in m/s; above 10 m/s, fold the mast.", title="Gauge")
    scripted.on(is_rewrite, rewrite_reply("What does the wind gauge show?"))
    scripted.on(lambda body: True, Reply.text("It shows 12 m/s."))
    graph = build_graph("ragline", checkpointer=memory_saver())
    question = PipelineRequest(query="What does the wind gauge show?", knowledge_base_ids=[kb.id], images=[{"url": GAUGE}])
    await ask(graph, core, question, "s-caption")

    rewrite, answer = scripted.requests
    assert rewrite["model"] == "scripted-vlm" and image_urls(rewrite["messages"][-1]) == [GAUGE]
    assert answer["model"] == "scripted" and not image_urls(answer["messages"][-1])  # the answering model gets text only
    assert DESCRIPTION in answer["messages"][-1]["content"]
    state = await graph.aget_state({"configurable": {"thread_id": "s-caption"}})
    [question] = [m for m in state.values["messages"] if m.type == "human"]
    assert question.additional_kwargs["images"] == [{"url": GAUGE, "caption": DESCRIPTION}]  # UpdateMessageImages

    scripted.reset()
    scripted.on(is_rewrite, Reply.text('{"rewrite_query": "Is 12 m/s strong wind?", "intent": "chitchat"}'))
    scripted.on(lambda body: True, Reply.text("Moderate."))
    await ask(graph, core, PipelineRequest(query="Is that strong?", knowledge_base_ids=[kb.id]), "s-caption")
    assert f"What does the wind gauge show?\n[image: {DESCRIPTION}]" in scripted.requests[0]["messages"][-1]["content"]  # the rewrite's conversation


async def test_a_vision_model_sees_the_retrieved_screenshot_and_the_users_image(tmp_path, scripted, embedder):
    core = services_for(tmp_path, scripted, embedder, vision_models=["openai/scripted"])
    kb = core.retrieval.knowledge_bases.create("screens", "default")
    screen = tmp_path / "screen.png"
    screen.write_bytes(screenshot_png(SCREEN))
    knowledge = await core.ingestion.ingest_file(kb.id, screen)
    [chunk] = core.retrieval.catalog.chunks_of(knowledge.id)
    # a second document: with one alone the relevance gate has no other hit to stand out from
    await core.ingestion.ingest_text(kb.id, "The rain gauge empties itself every morning at six.", title="Rain gauge")
    scripted.on(is_rewrite, rewrite_reply("What does error E42 mean?"))
    scripted.on(lambda body: True, Reply.text("The bearing is worn."))

    request = PipelineRequest(query="What does error E42 mean?", knowledge_base_ids=[kb.id], images=[{"url": GAUGE}])
    await ask(build_graph("ragline", checkpointer=memory_saver()), core, request, "s-vision")

    rewrite, answer = scripted.requests
    assert rewrite["model"] == "scripted" and image_urls(rewrite["messages"][-1]) == [GAUGE]  # the chat model sees: no VLM needed
    content = answer["messages"][-1]["content"]
    stored = "data:image/png;base64," + base64.b64encode(screen.read_bytes()).decode()
    assert image_urls(answer["messages"][-1]) == [stored, GAUGE]  # retrieved images first, then the user's
    label = content[1]["text"]
    assert label.startswith("Image 1, from c1 (res://") and chunk.id not in label  # aliased like the passage it came from
    assert "Error E42" in content[0]["text"] and DESCRIPTION not in content[0]["text"]  # a seeing model gets no description
