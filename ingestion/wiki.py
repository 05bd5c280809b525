"""Wiki pages: summaries the chat model writes from a knowledge base's documents.

The seed ranks `wiki_page` chunks up (wiki_boost.go) and aliases wiki `summary/<uuid>` slugs
(internal/modelcontext/resources.go) but leaves writing the pages to its wiki service; this is
that writer. Documents about one topic share a page (their opening text embeds this close:
`WIKI_TOPIC_SIMILARITY`); any other document gets a page of its own. A page is a document of
the knowledge base (file type "wiki", source "wiki:<key>") holding one `wiki_page` chunk, so it
is vector- and keyword-indexed like any chunk, and its text ends in its `[[summary/<uuid>|title]]`
slug, which the citation registry turns into a res:// alias for the model.

`rebuild` converges a base's pages on its documents: pages whose inputs did not change are kept
without a model call (idempotent), changed ones are rewritten and swapped in through the
ingestion writer (one catalog transaction: all or nothing per page), pages nobody plans any more
are removed. A base without the wiki converges on no pages. A rebuild may be given a fence, awaited
right before each page's commit and each removal: the scheduler's check that the rebuild still holds
its base's lock (ingestion/wiki_lock.py), so a rebuild that lost it writes nothing more.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ragline import defaults, prompts
from ragline.contracts.passages import ChunkType
from ragline.ingestion.chunker import embedding_text
from ragline.retrieval.catalog import ChunkRecord
from ragline.retrieval.stack import RetrievalStack
from ragline.retrieval.tokenizer import keyword_tokens
from ragline.retrieval.types import Knowledge, KnowledgeBase

if TYPE_CHECKING:
    from ragline.ingestion.service import IngestionService
    from ragline.models.chat import ChatClient

log = logging.getLogger(__name__)

WIKI_FILE_TYPE = "wiki"
WIKI_SOURCE_PREFIX = "wiki:"
TITLE_MAX_CHARS = 200
WIKI_PROMPT = "wiki_page"  # a template of prompts/generate_summary.yaml (the seed's summary prompts)
Fence = Callable[[], Awaitable[None]]  # raises when the rebuild may no longer write (its lock was lost)


class WikiError(RuntimeError):
    """A page could not be written (the model failed or wrote nothing)."""


def is_wiki_document(knowledge: Knowledge) -> bool:
    return knowledge.file_type == WIKI_FILE_TYPE and knowledge.source.startswith(WIKI_SOURCE_PREFIX)


def wiki_slug(knowledge_id: str) -> str:
    """`summary/<uuid>`: the seed's slug shape (dashed uuid), which citations.resources aliases."""
    return f"summary/{uuid.UUID(hex=knowledge_id)}"


def knowledge_id_of_slug(slug: str) -> str | None:
    try:
        return uuid.UUID(slug.removeprefix("summary/")).hex
    except ValueError:
        return None


@dataclass(frozen=True)
class PagePlan:
    """One page to have: its documents, title and the hash of everything its text depends on."""

    documents: tuple[Knowledge, ...]
    title: str
    inputs_hash: str

    @property
    def source(self) -> str:
        """The page's identity: the same documents keep the same page (and slug) across rebuilds."""
        ids = ",".join(sorted(d.id for d in self.documents))
        return WIKI_SOURCE_PREFIX + hashlib.sha256(ids.encode()).hexdigest()[:32]


@dataclass
class WikiReport:
    """What one rebuild did; `failed` maps a page title to why it was not written."""

    knowledge_base_id: str
    written: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: int = 0
    failed: dict[str, str] = field(default_factory=dict)


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    norm = math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b)) / norm if norm else 0.0


def cluster_by_topic(vectors: Sequence[Sequence[float]], threshold: float, max_size: int) -> list[list[int]]:
    """Greedy average-link clusters in input order: a document joins the open cluster it is most
    similar to on average when that is at least `threshold`, else it starts its own. The input
    order is stable (by document id), so the same documents always make the same pages."""
    clusters: list[list[int]] = []
    for index, vector in enumerate(vectors):
        best, best_score = None, threshold
        for cluster in clusters:
            if len(cluster) >= max_size:
                continue
            score = sum(_cosine(vector, vectors[j]) for j in cluster) / len(cluster)
            if score >= best_score:
                best, best_score = cluster, score
        if best is None:
            clusters.append([index])
        else:
            best.append(index)
    return clusters


def page_title(documents: Sequence[Knowledge]) -> str:
    title = " / ".join(sorted(d.title for d in documents))  # by title, not by (random) id: readable and stable
    return title if len(title) <= TITLE_MAX_CHARS else title[: TITLE_MAX_CHARS - 1] + "…"


def inputs_hash(documents: Sequence[Knowledge], model: str) -> str:
    """Documents (id, content, title), the prompt and the model: when none moved, the page stands."""
    template = prompts.get("generate_summary", WIKI_PROMPT)
    material = [model, template.text("system"), template.text("user"), page_title(documents)]
    material += [f"{d.id}:{d.content_hash}:{d.access.model_dump_json()}" for d in documents]  # a changed rule: the page again
    material += [str(defaults.WIKI_PAGE_INPUT_TOKENS)]
    return hashlib.sha256(json.dumps(material).encode()).hexdigest()


def cut_to_tokens(text: str, tokens: int, budget: int) -> str:
    """`text` shortened in proportion to its token count (budget.py's rule for passages)."""
    if tokens <= budget:
        return text
    return text[: max(1, len(text) * budget // max(tokens, 1))].rstrip() + " …"


def page_messages(title: str, documents: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    template = prompts.get("generate_summary", WIKI_PROMPT)
    body = "\n\n".join(f"## {name}\n{text}" for name, text in documents)
    return [{"role": "system", "content": template.text("system")},
            {"role": "user", "content": prompts.render(template.text("user"), title=title, documents=body)}]


def page_chunk(kb_id: str, knowledge: Knowledge, text: str, sources: list[str]) -> tuple[ChunkRecord, str]:
    """The page's one chunk and what is embedded. The slug line is for the model (aliased to res://)
    and for links; it is neither embedded nor keyword-indexed: a uuid matches nothing a user asks."""
    slug = wiki_slug(knowledge.id)
    chunk = ChunkRecord(
        uuid.uuid4().hex, kb_id, knowledge.id, 0, f"{text}\n\nWiki page: [[{slug}|{knowledge.title}]]", ChunkType.WIKI_PAGE,
        metadata={"title": knowledge.title, "headings": [], "slug": slug, "sources": sources},
        tokens=keyword_tokens(text, knowledge.title),
    )
    return chunk, embedding_text(f"{knowledge.title}\n{text}", [])


class WikiBuilder:
    """Plans, writes and removes the wiki pages of one knowledge base at a time."""

    def __init__(self, stack: RetrievalStack, ingestion: IngestionService, chat: ChatClient) -> None:
        self.stack = stack
        self.catalog = stack.catalog
        self.ingestion = ingestion
        self.chat = chat

    async def plan(self, kb: KnowledgeBase) -> list[PagePlan]:
        """Pages by topic, within one access rule: a page is read by exactly who may read each of its
        documents, so documents with different rules never share a page."""
        documents = sorted((d for d in self.catalog.list_knowledge(kb.id) if not is_wiki_document(d)), key=lambda d: d.id)
        if not documents:
            return []
        profiles = [f"{d.title}\n{self._text(d)[: defaults.WIKI_PROFILE_CHARS]}" for d in documents]
        vectors = await self.stack.embedders.for_kb(kb).embed_passages(profiles)
        by_rule: dict[str, list[int]] = {}
        for i, document in enumerate(documents):
            by_rule.setdefault(document.access.model_dump_json(), []).append(i)
        clusters = [[members[i] for i in cluster] for members in by_rule.values()
                    for cluster in cluster_by_topic([vectors[i] for i in members], defaults.WIKI_TOPIC_SIMILARITY, defaults.WIKI_TOPIC_MAX_DOCUMENTS)]
        plans = []
        for cluster in clusters[: defaults.WIKI_MAX_PAGES]:
            members = tuple(documents[i] for i in cluster)
            plans.append(PagePlan(members, page_title(members), inputs_hash(members, self.chat.model)))
        if len(clusters) > defaults.WIKI_MAX_PAGES:
            log.warning("%s has %d wiki topics; only the first %d get pages", kb.name, len(clusters), defaults.WIKI_MAX_PAGES)
        return plans

    async def rebuild(self, kb_id: str, limit: asyncio.Semaphore | None = None, fence: Fence | None = None) -> WikiReport:
        """Converge the base's pages on its documents (none when the wiki is off or the base is gone);
        `fence` is awaited before each write and removal, and what it raises stops the removals."""
        report = WikiReport(kb_id)
        kb = self.catalog.get_kb(kb_id)
        if kb is None:
            return report
        existing = {d.source: d for d in self.catalog.list_knowledge(kb.id) if is_wiki_document(d)}
        plans = await self.plan(kb) if kb.wiki_enabled else []
        todo = [p for p in plans if existing.get(p.source) is None or existing[p.source].content_hash != p.inputs_hash]
        report.unchanged = len(plans) - len(todo)
        limit = limit or asyncio.Semaphore(defaults.WIKI_BUILD_CONCURRENCY)
        results = await asyncio.gather(*(self._bounded(limit, kb, p, existing.get(p.source), fence) for p in todo),
                                       return_exceptions=True)
        for plan, result in zip(todo, results):
            if isinstance(result, BaseException):
                report.failed[plan.title] = str(result) or type(result).__name__
                log.error("wiki page %r of %s was not written: %s", plan.title, kb.name, result)
            else:
                report.written.append(plan.title)
        report.removed = await self._remove_stale(kb, existing, plans, failed=bool(report.failed), fence=fence)
        return report

    async def _bounded(self, limit: asyncio.Semaphore, kb: KnowledgeBase, plan: PagePlan, old: Knowledge | None,
                       fence: Fence | None) -> Knowledge:
        async with limit:
            return await self.write_page(kb, plan, old, fence)

    async def write_page(self, kb: KnowledgeBase, plan: PagePlan, old: Knowledge | None, fence: Fence | None = None) -> Knowledge:
        """Generate the page, then swap it in through the ingestion writer (all or nothing; nothing when
        `fence` raises right before the commit)."""
        from ragline.ingestion.service import PreparedDocument
        from ragline.models.chat import ChatOptions

        inputs = await self._bounded_inputs(plan.documents)
        result = await self.chat.chat(page_messages(plan.title, inputs), ChatOptions(temperature=0, max_tokens=defaults.WIKI_PAGE_MAX_TOKENS))
        text = result.content.strip()
        if not text:
            raise WikiError(f"the chat model {self.chat.model} wrote an empty page")
        sources = [d.id for d in plan.documents]
        knowledge = Knowledge(
            id=old.id if old is not None else uuid.uuid4().hex, knowledge_base_id=kb.id, tenant_id=kb.tenant_id,
            title=plan.title, source=plan.source, file_type=WIKI_FILE_TYPE, content_hash=plan.inputs_hash,
            metadata={"wiki": True, "sources": sources, "source_hashes": {d.id: d.content_hash for d in plan.documents},
                      "model": self.chat.model},
            access=plan.documents[0].access,  # the plan's documents share one rule
        )
        chunk, embedded = page_chunk(kb.id, knowledge, text, sources)
        knowledge.metadata["slug"] = chunk.metadata["slug"]

        async def still_planned() -> None:
            if fence is not None:
                await fence()
            await asyncio.to_thread(self._same_rules, plan)

        await self.ingestion.write(kb, [PreparedDocument(knowledge, [chunk], [(chunk.id, chunk.id, embedded)], text)],
                                   before_commit=still_planned)
        return knowledge

    def _same_rules(self, plan: PagePlan) -> None:
        """A rule changed while the page was written (the change removed the pages of its document and
        scheduled the next rebuild): a page under the old rule must not be written after it."""
        now = self.catalog.get_knowledge_many(d.id for d in plan.documents)
        if any(d.id not in now or now[d.id].access != d.access for d in plan.documents):
            raise WikiError(f"the access of a document of {plan.title!r} changed while its page was written: page not written")

    async def _bounded_inputs(self, documents: Sequence[Knowledge]) -> list[tuple[str, str]]:
        """Each document's text cut to an even share of WIKI_PAGE_INPUT_TOKENS."""
        texts = [self._text(d) for d in documents]
        share = defaults.WIKI_PAGE_INPUT_TOKENS // max(len(documents), 1)
        counts = await self.chat.count_tokens(texts)
        return [(d.title, cut_to_tokens(t, n, share)) for d, t, n in zip(documents, texts, counts)]

    def _text(self, document: Knowledge) -> str:
        """The stored source text; for a document without one (images only), its indexed chunks."""
        text = self.catalog.source_text(document.id) or ""
        if text.strip():
            return text
        return "\n".join(c.content for c in self.catalog.chunks_of(document.id) if c.indexed)

    async def _remove_stale(self, kb: KnowledgeBase, existing: dict[str, Knowledge], plans: list[PagePlan], *, failed: bool,
                            fence: Fence | None) -> int:
        """Remove pages no plan keeps. After a failed page, a stale page whose documents are all
        unchanged stays: still true, and better than a gap until the next rebuild."""
        planned = {p.source for p in plans}
        current = {d.id: d.content_hash for d in self.catalog.list_knowledge(kb.id) if not is_wiki_document(d)}
        removed = 0
        for source, page in existing.items():
            if source in planned:
                continue
            if failed and kb.wiki_enabled and self._still_true(page, current):
                continue
            if fence is not None:  # before the vectors go: a page the lock's new holder keeps must stay whole
                await fence()
            await self.ingestion.delete_knowledge(kb.id, page.id, kb.tenant_id)
            removed += 1
        return removed

    @staticmethod
    def _still_true(page: Knowledge, current: dict[str, str]) -> bool:
        hashes: dict[str, str] = page.metadata.get("source_hashes", {})
        return bool(hashes) and all(current.get(source) == digest for source, digest in hashes.items())
