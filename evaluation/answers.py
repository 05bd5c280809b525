"""`ragline eval --answers`: end-to-end answer quality of the whole graph on a BEIR-layout QA set.

The retrieval evaluation (evaluation/retrieval.py) stops at ranked documents; this one asks each
sampled question through the real `ragline` graph, exactly as `ragline ask` does, and scores what
the user would see: the answer against the gold answers, the passages it cites, whether the turn
ended in the fallback, and how long the first answer token and the whole turn took.

The corpus is indexed through the normal services into a knowledge base of tenant `eval` named
after the data set and a hash of its content and indexing settings, so a rerun finds it and embeds
nothing (`ragline kb list --tenant eval` shows these bases, `kb delete` removes them). Abstention
asks the same questions against a second base built without their gold paragraphs (its vectors
come from the embedding cache) and counts the turns that end in the fallback.

Scoring lives in evaluation/scoring.py; aggregation, baselines and the table in eval_report.py.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ragline.contracts.access import Principal
from ragline.contracts.events import ResponseType, StreamResponse
from ragline.evaluation import scoring
from ragline.evaluation.retrieval import WHOLE_DOCUMENT, BeirSet, doc_text, doc_title, load_beir
from ragline.retrieval.errors import KnowledgeBaseNotFoundError, RetrievalError
from ragline.retrieval.types import ChunkingConfig, KnowledgeBase
from ragline.services import Services

Progress = Callable[[str, int, int], None]  # (stage, done, total)
EVAL_TENANT = "eval"  # keeps evaluation bases out of the default tenant's `kb list`
SOURCE_PREFIX = "beir:"
SHORT_ANSWER_PROMPT = (
    "You answer questions from the retrieved contexts. Reply with the shortest exact phrase from "
    "the sources that answers the question (a name, number, date or a few words copied from the "
    "context): no full sentence, no explanation. If the contexts do not contain the answer, say "
    "that you could not find it in the knowledge base. Answer in {language}."
)


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    answers: tuple[str, ...]
    gold_docs: tuple[str, ...]  # BEIR corpus ids judged relevant


@dataclass(frozen=True)
class QASet:
    """A BEIR set with answers.jsonl; `digest` hashes the corpus, naming the cached knowledge base."""

    beir: BeirSet
    answers: dict[str, tuple[str, ...]]
    digest: str

    @property
    def name(self) -> str:
        return self.beir.name


@dataclass(frozen=True)
class AnswerEvalOptions:
    limit: int = 20
    seed: int = 0
    short_answers: bool = False
    abstention: bool = False
    chunk_size: int = 0  # 0: one chunk per paragraph, as the retrieval evaluation
    tenant: str = EVAL_TENANT

    @property
    def system_prompt(self) -> str | None:
        return SHORT_ANSWER_PROMPT if self.short_answers else None


@dataclass
class Turn:
    """What one question produced, read from the events (and the fallback flag from the final state)."""

    answer: str = ""
    references: list[dict[str, Any]] = field(default_factory=list)
    fallback: bool = False
    error: str | None = None
    first_token_s: float | None = None
    complete_s: float = 0.0


def load_qa_set(data_dir: Path) -> QASet:
    """The BEIR files plus answers.jsonl ({"_id", "answers": [...]}); questions without answers are dropped."""
    path = data_dir / "answers.jsonl"
    if not path.is_file():
        raise RetrievalError(f"{data_dir} has no answers.jsonl: answer evaluation needs {{\"_id\", \"answers\"}} per question")
    beir = load_beir(data_dir)
    answers: dict[str, tuple[str, ...]] = {}
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                golds = tuple(a for a in row["answers"] if isinstance(a, str) and a.strip())
            except (ValueError, KeyError, TypeError):
                raise RetrievalError(f"{path}:{number} is not {{\"_id\", \"answers\": [...]}}") from None
            if golds:
                answers[str(row["_id"])] = golds
    digest = hashlib.sha256((data_dir / "corpus.jsonl").read_bytes()).hexdigest()
    return QASet(beir, answers, digest)


def sample_questions(qa: QASet, limit: int, seed: int) -> list[Question]:
    """`limit` questions with answers and judgments, the same ones for the same seed and files."""
    pool = sorted((q for q in qa.beir.queries if q["_id"] in qa.answers), key=lambda q: q["_id"])
    if not pool:
        raise RetrievalError(f"{qa.name}: no question has both a judgment and an answer")
    picked = random.Random(seed).sample(pool, min(limit, len(pool)))
    return [Question(q["_id"], q["text"], qa.answers[q["_id"]], tuple(sorted(qa.beir.qrels.get(q["_id"], {})))) for q in picked]


def kb_name(qa: QASet, chunking: ChunkingConfig, embedding_model: str, excluded: Iterable[str] = ()) -> str:
    """Data set name + a hash of the corpus, the indexing settings and the paragraphs left out."""
    key = "\n".join([qa.digest, chunking.model_dump_json(), embedding_model, *sorted(excluded)])
    return f"eval-{qa.name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def chunking_for(chunk_size: int) -> ChunkingConfig:
    return ChunkingConfig(chunk_size=chunk_size or WHOLE_DOCUMENT, chunk_overlap=0 if not chunk_size else 80)


async def ensure_kb(services: Services, qa: QASet, options: AnswerEvalOptions, *, excluded: frozenset[str] = frozenset(),
                    progress: Progress | None = None) -> tuple[KnowledgeBase, dict[str, str]]:
    """The cached knowledge base of the corpus (minus `excluded` paragraphs), created and filled
    when missing; unchanged documents are skipped by ingestion, so a rerun embeds nothing.
    Returns the base and the BEIR id of each of its documents."""
    stack = await asyncio.to_thread(lambda: services.retrieval)  # opens Chroma: off the event loop
    chunking = chunking_for(options.chunk_size)
    name = kb_name(qa, chunking, services.settings.embedding_model, excluded)
    try:
        kb = stack.knowledge_bases.get_by_name(name, Principal.operator_of(options.tenant))
    except KnowledgeBaseNotFoundError:
        description = f"answer evaluation of {qa.name}" + (f" without {len(excluded)} gold paragraph(s)" if excluded else "")
        kb = stack.knowledge_bases.create(name, tenant_id=options.tenant, chunking=chunking, tags=["eval"], description=description)
    from ragline.ingestion.service import TextDocument

    docs = [TextDocument(doc_text(d), doc_title(d), f"{SOURCE_PREFIX}{d['_id']}") for d in qa.beir.corpus
            if d["_id"] not in excluded and doc_text(d).strip()]
    stage = (lambda done, total: progress("indexing " + ("abstention set" if excluded else "corpus"), done, total)) if progress else None
    knowledge = await services.ingestion.ingest_documents(kb.id, docs, options.tenant, progress=stage)
    return kb, {k.id: k.source.removeprefix(SOURCE_PREFIX) for k in knowledge}


def build_request(question: Question, kb: KnowledgeBase, options: AnswerEvalOptions) -> Any:
    """The request `ragline ask --kb` would send; the short-answer prompt replaces the system
    prompt on the retrieval path (summary.prompt) and on the others (system_prompt_override)."""
    from ragline.contracts.request import PipelineRequest, SummaryConfig

    prompt = options.system_prompt
    if prompt is None:
        return PipelineRequest(query=question.text, knowledge_base_ids=(kb.id,))
    return PipelineRequest(query=question.text, knowledge_base_ids=(kb.id,), summary=SummaryConfig(prompt=prompt),
                           system_prompt_override=prompt)


def record_event(turn: Turn, event: StreamResponse, elapsed: float) -> None:
    """Fold one event into the turn: answer text, references, first-token and completion times."""
    kind = event.response_type
    if kind == ResponseType.ANSWER and event.content:
        if turn.first_token_s is None:
            turn.first_token_s = elapsed
        turn.answer = event.content if (event.data or {}).get("replace") else turn.answer + event.content
    elif kind == ResponseType.REFERENCES:
        turn.references = list(event.knowledge_references or [])
    elif kind == ResponseType.ERROR:
        turn.error = event.content or "error"
    elif kind == ResponseType.COMPLETE:
        turn.complete_s = elapsed


async def ask(graph: Any, services: Services, request: Any, tenant: str) -> Turn:
    """One question through the graph on a fresh session, as `ragline ask` drives it."""
    from ragline.contracts.context import RunContext, RunHost
    from ragline.graph.turn import stream_turn

    session_id = str(uuid.uuid4())
    context = RunContext(session_id=session_id, tenant_id=tenant, user_id=tenant, host=RunHost(services=services))
    turn = Turn()
    started = time.perf_counter()
    async for event in stream_turn(graph, request, context):
        record_event(turn, event, time.perf_counter() - started)
    if not turn.complete_s:
        turn.complete_s = time.perf_counter() - started
    state = await graph.aget_state({"configurable": {"thread_id": session_id}})
    response = (state.values or {}).get("chat_response")
    turn.fallback = bool(getattr(response, "fallback", False))
    return turn


def cited_texts(turn: Turn, services: Services) -> dict[str, str]:
    """Text of each chunk the answer cites: from the references event, else from the catalog."""
    texts = {str(r.get("chunk_id")): str(r.get("content", "")) for r in turn.references}
    missing = [c.chunk_id for c in scoring.citations(turn.answer) if c.chunk_id not in texts]
    if missing:
        texts.update({chunk_id: chunk.content for chunk_id, chunk in services.retrieval.catalog.get_chunks(missing).items()})
    return texts


def score_row(question: Question, turn: Turn, texts: dict[str, str], beir_id_of: dict[str, str]) -> dict[str, Any]:
    """One report row: the answer, its scores, its citations and the turn's flags and times."""
    shown = scoring.strip_tags(turn.answer)
    cited = scoring.citations(turn.answer)
    cited_passages = [texts.get(c.chunk_id, "") for c in cited]  # a chunk not found holds no gold
    cites = [{"chunk_id": c.chunk_id, "attributed": c.attributed, "found": c.chunk_id in texts,
              "contains_gold": scoring.contains_any(text, question.answers)} for c, text in zip(cited, cited_passages)]
    retrieved = {beir_id_of.get(str(r.get("knowledge_id")), "") for r in turn.references}
    return {
        "id": question.id,
        "question": question.text,
        "gold_answers": list(question.answers),
        "gold_docs": list(question.gold_docs),
        "answer": turn.answer,
        "answer_text": shown,
        "exact_match": scoring.best_exact_match(shown, question.answers),
        "f1": round(scoring.best_f1(shown, question.answers), 4),
        "contains_gold": scoring.contains_any(shown, question.answers),
        "citations": cites,
        "citation_precision": scoring.citation_precision(cited_passages, question.answers),
        "references": len(turn.references),
        "gold_retrieved": bool(retrieved & set(question.gold_docs)),
        # multi-hop: the share of the supporting paragraphs that reached the model's context
        "support_recall": round(len(retrieved & set(question.gold_docs)) / len(question.gold_docs), 4) if question.gold_docs else None,
        "fallback": turn.fallback,
        "error": turn.error,
        "first_token_s": None if turn.first_token_s is None else round(turn.first_token_s, 3),
        "complete_s": round(turn.complete_s, 3),
    }


async def answer_all(graph: Any, services: Services, questions: list[Question], kb: KnowledgeBase, beir_id_of: dict[str, str],
                     options: AnswerEvalOptions, stage: str, progress: Progress | None = None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for i, question in enumerate(questions):
        turn = await ask(graph, services, build_request(question, kb, options), options.tenant)
        rows.append(score_row(question, turn, cited_texts(turn, services), beir_id_of))
        if progress:
            progress(stage, i + 1, len(questions))
    return rows


async def warm_up(services: Services) -> None:
    """Load the chat model with a one-token call, so the first question's latency is not the
    model load (seconds for the local GGUF). A failure is left for the first question to report."""
    from ragline.models.chat import ChatModelError, ChatOptions

    try:
        await services.chat().chat([{"role": "user", "content": "Hi"}], ChatOptions(max_tokens=1))
    except ChatModelError:
        pass


async def evaluate_answers(data_dir: Path, services: Services, options: AnswerEvalOptions,
                           progress: Progress | None = None) -> dict[str, Any]:
    """Index (or reuse) the corpus, ask the sampled questions, and return the whole report."""
    from ragline.checkpoints.savers import memory_saver
    from ragline.evaluation.report import aggregate
    from ragline.graph.graphs import build_graph

    qa = load_qa_set(data_dir)
    questions = sample_questions(qa, options.limit, options.seed)
    kb, beir_id_of = await ensure_kb(services, qa, options, progress=progress)
    graph = build_graph("ragline", checkpointer=memory_saver())
    await warm_up(services)
    rows = await answer_all(graph, services, questions, kb, beir_id_of, options, "answering", progress)
    abstention_rows: list[dict[str, Any]] | None = None
    if options.abstention:
        excluded = frozenset(doc for q in questions for doc in q.gold_docs)
        blind_kb, blind_ids = await ensure_kb(services, qa, options, excluded=excluded, progress=progress)
        abstention_rows = await answer_all(graph, services, questions, blind_kb, blind_ids, options, "abstention", progress)
    settings = {
        "dataset": qa.name,
        "data_dir": str(data_dir),
        "corpus_sha256": qa.digest,
        "model": services.settings.chat_model,
        "embedding_model": services.settings.embedding_model,
        "pipeline": "ragline",
        "knowledge_base": kb.name,
        "questions": len(questions),
        **{k: v for k, v in asdict(options).items() if k != "limit"},
        "prompt_mode": "short" if options.short_answers else "default",
        "system_prompt": options.system_prompt or "system_prompt.yaml (default)",
    }
    report: dict[str, Any] = {"settings": settings, "metrics": aggregate(rows, abstention_rows), "questions": rows}
    if abstention_rows is not None:
        report["abstention"] = abstention_rows
    return report
