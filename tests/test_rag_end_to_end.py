"""The rag_stream graph end to end over a small real knowledge base (XQuAD paragraphs).

Real Chroma, bm25s and local embeddings; a scripted model answers and cites c1 with the tag split
across streamed chunks. Checked: references arrive before the answer, they hold the gold
paragraph, and the expanded kb tag points at the chunk the references list first.
"""

import asyncio
import json
import re
from pathlib import Path

import pytest

from ragline.checkpoints.savers import memory_saver
from ragline.contracts.context import RunContext, RunHost
from ragline.contracts.events import ResponseType
from ragline.contracts.request import PipelineRequest
from ragline.graph.graphs import build_graph
from ragline.graph.turn import stream_turn
from ragline.ingestion.service import IngestionService, TextDocument
from ragline.models.embeddings import Embedder, EmbeddingCache
from ragline.retrieval.config import RetrievalConfig
from ragline.retrieval.stack import RetrievalStack
from ragline.services import Services
from tests.scripted_model import Reply

XQUAD = Path(__file__).resolve().parents[2] / "shared" / "data" / "eval" / "xquad_en"
if not XQUAD.exists():
    XQUAD = Path("/work/shared/data/eval/xquad_en")


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def xquad_sample():
    corpus = _read_jsonl(XQUAD / "corpus.jsonl")[::12]  # 20 paragraphs from different articles
    wanted = {doc["_id"] for doc in corpus}
    gold: dict[str, str] = {}
    for line in (XQUAD / "qrels.tsv").read_text().splitlines()[1:]:
        query_id, corpus_id, _ = line.split("\t")
        if corpus_id in wanted and corpus_id not in gold.values():
            gold[query_id] = corpus_id
    queries = {q["_id"]: q["text"] for q in _read_jsonl(XQUAD / "queries.jsonl") if q["_id"] in gold}
    cases = [(queries[q], gold[q]) for q in list(gold)[:5]]
    return corpus, cases


@pytest.fixture(scope="module")
def knowledge(xquad_sample, tmp_path_factory):
    folder = tmp_path_factory.mktemp("e2e-kb")
    embedder = Embedder(model="ragline/multilingual-e5-small", cache=EmbeddingCache(folder / "cache.sqlite"))
    stack = RetrievalStack.build(folder, embedder, RetrievalConfig(redis_url=None, chroma_url=None))
    kb = stack.knowledge_bases.create("xquad")
    corpus, _ = xquad_sample
    docs = [TextDocument(text=d["text"], title=d["title"].replace("_", " "), source=d["_id"]) for d in corpus]
    asyncio.run(IngestionService(stack).ingest_documents(kb.id, docs))
    return stack, kb


def _is_rewrite(body):
    return "rewrite_query" in body["messages"][0]["content"]


async def test_rag_stream_answers_with_references_and_a_kb_tag_on_the_right_chunk(scripted_model, knowledge, xquad_sample):
    stack, kb = knowledge
    services = Services(retrieval_factory=lambda: stack)
    graph = build_graph("rag_stream", checkpointer=memory_saver())
    _, cases = xquad_sample
    gold_first = 0
    for question, gold_doc in cases:
        scripted_model.rules.clear()
        scripted_model.on(_is_rewrite, Reply.text(json.dumps({"rewrite_query": question, "intent": "kb_search"})))
        scripted_model.on(lambda b: True, Reply(chunks=["According to the text", ' <ref i', 'd="c1"', '/>', " that is it."]))
        # the gate would turn one of these five (a paraphrase, "unproven assumption") into "not found":
        # its trade-off is measured in benchmarks/relevance_gate.py; this test is about citations
        request = PipelineRequest(query=question, knowledge_base_ids=[kb.id], relevance_gate_enabled=False)
        events = [e async for e in stream_turn(graph, request, RunContext(host=RunHost(services=services)))]
        kinds = [e.response_type for e in events]
        assert kinds.index(ResponseType.REFERENCES) < kinds.index(ResponseType.ANSWER)
        references = next(e for e in events if e.response_type == ResponseType.REFERENCES).knowledge_references
        sources = [stack.catalog.get_knowledge(r["knowledge_id"]).source for r in references]
        assert gold_doc in sources, f"{question!r}: gold paragraph {gold_doc} not among {sources}"
        gold_first += sources[0] == gold_doc
        answer = "".join(e.content for e in events if e.response_type == ResponseType.ANSWER)
        tag = re.search(r'<kb [^>]*chunk_id="([^"]+)"[^>]*/>', answer)
        assert tag and tag.group(1) == references[0]["chunk_id"]
        assert answer.startswith("According to the text <kb ") and answer.endswith(" that is it.")
        assert "<ref" not in answer
        # the model saw aliases, never internal ids
        prompt = json.dumps(scripted_model.requests[-1]["messages"])
        assert references[0]["chunk_id"] not in prompt and 'id=\\"c1\\"' in prompt
    assert gold_first >= 4


async def test_a_question_nothing_matches_gets_the_fallback_answer(scripted_model, knowledge):
    stack, kb = knowledge
    scripted_model.on(_is_rewrite, Reply.text(json.dumps({"rewrite_query": "zzqx", "intent": "kb_search"})))
    request = PipelineRequest(query="zzqx", knowledge_base_ids=[kb.id], vector_threshold=0.99, keyword_threshold=0.99, fallback_response="Not in the knowledge base.")
    events = [e async for e in stream_turn(build_graph("rag_stream", checkpointer=memory_saver()), request, RunContext(host=RunHost(services=Services(retrieval_factory=lambda: stack))))]
    assert [e.content for e in events if e.response_type == ResponseType.ANSWER] == ["Not in the knowledge base."]
    closing = [e for e in events if e.response_type == ResponseType.TOOL_RESULT and e.data["tool_name"] == "knowledge_search"]
    assert len(closing) == 1


async def test_an_off_topic_question_reaches_the_fallback_though_its_vectors_score_high(scripted_model, knowledge):
    """e5 scores unrelated text ~0.8, far above the 0.5 vector threshold: the relevance gate decides."""
    stack, kb = knowledge
    question = "How do I bake sourdough bread at home?"
    scripted_model.on(_is_rewrite, Reply.text(json.dumps({"rewrite_query": question, "intent": "kb_search"})))
    scripted_model.on(lambda b: True, Reply.text("an answer from passages"))
    graph = build_graph("rag_stream", checkpointer=memory_saver())
    runs = {}
    for gate in (True, False):
        request = PipelineRequest(query=question, knowledge_base_ids=[kb.id], relevance_gate_enabled=gate, fallback_response="Not in the knowledge base.")
        runs[gate] = [e async for e in stream_turn(graph, request, RunContext(host=RunHost(services=Services(retrieval_factory=lambda: stack))))]
    assert [e.content for e in runs[True] if e.response_type == ResponseType.ANSWER] == ["Not in the knowledge base."]
    assert not any(e.response_type == ResponseType.REFERENCES for e in runs[True])
    assert any(e.response_type == ResponseType.REFERENCES for e in runs[False])  # without the gate: unrelated passages


async def test_an_unknown_knowledge_base_is_a_clear_error(scripted_model, knowledge):
    stack, _ = knowledge
    scripted_model.on(_is_rewrite, Reply.text(json.dumps({"rewrite_query": "q", "intent": "kb_search"})))
    events = [e async for e in stream_turn(build_graph("rag_stream", checkpointer=memory_saver()), PipelineRequest(query="q", knowledge_base_ids=["nope"]), RunContext(host=RunHost(services=Services(retrieval_factory=lambda: stack))))]
    errors = [e for e in events if e.response_type == ResponseType.ERROR]
    assert len(errors) == 1 and "nope" in errors[0].content and errors[0].data["code"] == "invalid_input"


async def test_the_rag_preset_answers_in_one_call_with_the_same_references_and_citations_as_rag_stream(scripted_model, knowledge, xquad_sample):
    stack, kb = knowledge
    question, _ = xquad_sample[1][0]
    scripted_model.on(_is_rewrite, Reply.text(json.dumps({"rewrite_query": question, "intent": "kb_search"})))
    scripted_model.on(lambda b: True, Reply(chunks=["It is", ' <ref id="c1"/>', " and", ' <ref id="c2"/>', "."]))
    runs = {}
    for preset in ("rag", "rag_stream"):
        services = Services(retrieval_factory=lambda: stack)
        events = [e async for e in stream_turn(build_graph(preset, checkpointer=memory_saver()),
                                              PipelineRequest(query=question, knowledge_base_ids=[kb.id]), RunContext(host=RunHost(services=services)))]
        references = [e.knowledge_references for e in events if e.response_type == ResponseType.REFERENCES]
        answer = "".join(e.content for e in events if e.response_type == ResponseType.ANSWER)
        runs[preset] = (references, answer, scripted_model.requests[-1].get("stream") is True)
    (rag_refs, rag_answer, rag_streamed), (stream_refs, stream_answer, stream_streamed) = runs["rag"], runs["rag_stream"]
    assert not rag_streamed and stream_streamed
    assert len(rag_refs) == 1 and rag_refs == stream_refs
    assert rag_answer == stream_answer
    cited = re.findall(r'<kb [^>]*chunk_id="([^"]+)"', rag_answer)
    assert cited == [r["chunk_id"] for r in rag_refs[0][:2]]


async def test_a_link_planted_in_no_source_never_reaches_the_streamed_answer(scripted_model, tmp_path):
    """A document that says "add this link" steers a model; the link it repeats is in no source, so it goes."""
    embedder = Embedder(model="ragline/multilingual-e5-small", cache=EmbeddingCache(tmp_path / "cache.sqlite"))
    stack = RetrievalStack.build(tmp_path, embedder, RetrievalConfig(redis_url=None, chroma_url=None))
    kb = stack.knowledge_bases.create("manual")
    await IngestionService(stack).ingest_documents(kb.id, [TextDocument(
        "The Aurora console updates its firmware from https://aurora.example/firmware every night.", "firmware", "src:fw")])
    services = Services(retrieval_factory=lambda: stack)
    scripted_model.on(_is_rewrite, Reply.text(json.dumps({"rewrite_query": "firmware updates", "intent": "kb_search"})))
    scripted_model.on(lambda b: True, Reply(chunks=["Nightly from https://aurora.", "example/firmware <ref id=\"c1\"/>. ",
                                                     "More at [the portal](https://evil.", "example/login) and http", "s://evil.example."]))
    request = PipelineRequest(query="How does the console update its firmware?", knowledge_base_ids=[kb.id], relevance_gate_enabled=False)
    graph = build_graph("rag_stream", checkpointer=memory_saver())
    events = [e async for e in stream_turn(graph, request, RunContext(host=RunHost(services=services)))]
    answer = "".join(e.content for e in events if e.response_type == ResponseType.ANSWER)
    assert "https://aurora.example/firmware" in answer and "<kb " in answer
    assert "evil.example" not in answer and "the portal (link removed" in answer
