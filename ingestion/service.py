"""IngestionService: files and text into a knowledge base (chunks, vectors, keyword rows).

Replaces the seed's knowledge ingestion path (KnowledgeService.CreateKnowledgeFromFile /
processDocument / ReparseKnowledge / DeleteKnowledge). Writes are ordered so nothing is left
half-written: parse, chunk and embed first (nothing stored yet); then new vectors and keyword rows
under fresh ids; then one catalog transaction swaps the document's chunks; only then are the old
vectors deleted. A failure before the catalog commit removes the new rows again, and a vector the
catalog does not know is never returned by search anyway.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragline import defaults
from ragline.contracts.access import AccessRule, Principal
from ragline.contracts.passages import ChunkType
from ragline.entities.extraction import extract_document_graph
from ragline.entities.store import GraphStore
from ragline.ingestion.chunker import ChunkPlan, chunk_document, chunking_signature, embedding_text
from ragline.ingestion.ids import new_id
from ragline.ingestion.image_chunks import IMAGE_CHUNK_TYPES, ImageIndexer, carry_over
from ragline.ingestion.image_store import keep_images, release_images
from ragline.ingestion.images import ExtractedImage, only_image_references
from ragline.ingestion.instructions import first_instruction
from ragline.ingestion.locations import locate_chunks, location_metadata
from ragline.ingestion.parsers import ParsedDocument, parse_file
from ragline.ingestion.wiki import is_wiki_document
from ragline.models.chat import ChatClient
from ragline.retrieval.catalog import ChunkRecord
from ragline.retrieval.errors import DocumentTooLargeError, IngestionError, KnowledgeBaseAccessError
from ragline.retrieval.locations import PAGE_STARTS
from ragline.retrieval.stack import RetrievalStack
from ragline.retrieval.tokenizer import UNTITLED, keyword_tokens
from ragline.retrieval.types import Knowledge, KnowledgeBase
from ragline.retrieval.vector_store import VectorRow

log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]
DocumentsChanged = Callable[[KnowledgeBase, list[Knowledge]], Awaitable[None]]
BeforeCommit = Callable[[], Awaitable[None]]  # raises when the writer may no longer write (a wiki rebuild that lost its lock)


@dataclass
class TextDocument:
    """Text to ingest. `source` identifies the document: ingesting the same source again replaces it."""

    text: str
    title: str = ""
    source: str = ""
    file_type: str = "txt"
    metadata: dict[str, Any] = field(default_factory=dict)
    images: list[ExtractedImage] = field(default_factory=list)  # read into image_ocr / image_caption chunks
    images_skipped: int = 0
    access: AccessRule | None = None  # who may read it; None keeps the stored document's rule (open when new)

    @classmethod
    def parsed(cls, parsed: ParsedDocument, title: str, source: str) -> TextDocument:
        metadata: dict[str, Any] = {PAGE_STARTS: parsed.page_starts} if parsed.page_starts else {}
        return cls(parsed.text, title, source, parsed.file_type, metadata, parsed.images, parsed.images_skipped)


@dataclass
class PreparedDocument:
    knowledge: Knowledge
    chunks: list[ChunkRecord]
    vector_texts: list[tuple[str, str, str]]  # (vector id, chunk id, text to embed)
    source_text: str


def content_hash(text: str, settings: str) -> str:
    return hashlib.sha256(f"{settings}\n{text}".encode()).hexdigest()


def link_neighbours(chunks: list[ChunkRecord]) -> None:
    """Previous/next ids among the indexed chunks of one document, in chunk order."""
    for before, after in zip(chunks, chunks[1:]):
        before.next_id, after.pre_id = after.id, before.id




def document_title(title: str, source: str) -> str:
    """The given title; else the file name of a path-like source; else "untitled".

    Synthetic sources ("text:<uuid>", "beir:123") make no title: the title is keyword-indexed.
    """
    if title.strip():
        return title.strip()
    path = Path(source)
    if source and ("/" in source or "\\" in source or path.suffix):
        return path.stem or UNTITLED
    return UNTITLED


def vector_text(chunk: ChunkRecord) -> str:
    """What the chunk's vector is made from: its text under its document's title and headings."""
    title = str(chunk.metadata.get("title") or "")
    return embedding_text(chunk.content, list(chunk.metadata.get("headings", [])), "" if title == UNTITLED else title)


def plan_to_chunks(plan: ChunkPlan, kb_id: str, knowledge: Knowledge, text: str) -> list[ChunkRecord]:
    """Catalog records of a chunk plan; each records its heading path, its offsets in `text` (the
    document's parsed text) and, for a PDF, its pages (ingestion/locations.py)."""
    knowledge_id, title, page_starts = knowledge.id, knowledge.title, knowledge.metadata.get(PAGE_STARTS) or []
    parent_spans = locate_chunks(text, [p.content for p in plan.parents])
    parents = [ChunkRecord(new_id(), kb_id, knowledge_id, i, p.content, ChunkType.PARENT,
                           metadata={**location_metadata(p.headings, span, page_starts), "title": title}, indexed=False)
               for i, (p, span) in enumerate(zip(plan.parents, parent_spans))]
    children: list[ChunkRecord] = []
    for i, (draft, span) in enumerate(zip(plan.chunks, locate_chunks(text, [c.content for c in plan.chunks]))):
        indexed_text = embedding_text(draft.content, draft.headings)
        children.append(ChunkRecord(
            new_id(), kb_id, knowledge_id, i, draft.content, ChunkType.TEXT,
            parent_id=parents[draft.parent_index].id if draft.parent_index is not None else None,
            metadata={**location_metadata(draft.headings, span, page_starts), "title": title},
            tokens=keyword_tokens(indexed_text, title),
        ))
    link_neighbours(children)
    link_neighbours(parents)
    return parents + children


def _bounded_chunks(doc: TextDocument, kb: KnowledgeBase, knowledge: Knowledge) -> list[ChunkRecord]:
    """The document's chunks, refused past DOCUMENT_MAX_CHUNKS (counted on the drafts, before each
    becomes a record with its keywords and location: a 200,000-column CSV row makes 400,000)."""
    plan = chunk_document(doc.text, kb.chunking)
    count = len(plan.chunks) + len(plan.parents)
    if count > defaults.DOCUMENT_MAX_CHUNKS:
        raise DocumentTooLargeError(f"{knowledge.title} makes {count:,} chunks, more than {defaults.DOCUMENT_MAX_CHUNKS:,}; "
                                    "split it, or raise the knowledge base's chunk size")
    return plan_to_chunks(plan, kb.id, knowledge, doc.text)


class IngestionService:
    """Documents in, chunks out to the catalog, vectors and keywords; optionally the entity graph.

    With a `graph_store` and a `chat` model, documents of a knowledge base that has graph
    extraction enabled also get their entities and relationships extracted (an LLM call per
    chunk) after they are stored.
    """

    def __init__(self, stack: RetrievalStack, graph_store: GraphStore | Callable[[], GraphStore] | None = None,
                 chat: ChatClient | None = None, images: ImageIndexer | None = None,
                 on_change: DocumentsChanged | None = None) -> None:
        self.stack = stack
        # told after documents were stored or deleted (the wiki rebuilds its pages from them); never raises into ingestion
        self.on_change = on_change
        self.catalog = stack.catalog
        self.images = images  # None: images in documents are not read (an image-only document is refused)
        self._graph_store = graph_store  # or a factory: the graph is opened when a document needs it
        self.chat = chat

    def _graph(self) -> GraphStore | None:
        """The entity graph, or None when there is none or it cannot be opened (the graph step is optional)."""
        if self._graph_store is None or isinstance(self._graph_store, GraphStore):
            return self._graph_store
        try:
            self._graph_store = self._graph_store()
        except Exception as exc:  # e.g. DuckDB's file lock held by another process: documents still index
            log.warning("the entity graph is unavailable, graph extraction skipped: %s", exc)
            return None
        return self._graph_store

    def _kb(self, kb_id: str, tenant_id: str) -> KnowledgeBase:
        """The base a job writes to: its door checked the caller (key, access, read-only) before queueing it."""
        kb = self.stack.knowledge_bases.get(kb_id, Principal.operator_of(tenant_id))
        if not kb.owned_by(tenant_id):
            raise KnowledgeBaseAccessError(f"tenant {tenant_id} does not own knowledge base {kb.name}")
        return kb

    async def ingest_file(self, kb_id: str, path: Path, tenant_id: str = "default",
                          progress: Progress | None = None) -> Knowledge:
        return (await self.ingest_files(kb_id, [path], tenant_id, progress))[0]

    async def ingest_files(self, kb_id: str, paths: list[Path], tenant_id: str = "default",
                           progress: Progress | None = None) -> list[Knowledge]:
        docs = []
        for path in paths:
            parsed = parse_file(path)
            docs.append(TextDocument.parsed(parsed, parsed.title or path.stem, str(path.resolve())))
        return await self.ingest_documents(kb_id, docs, tenant_id, progress)

    async def ingest_text(self, kb_id: str, text: str, title: str = "", source: str = "",
                          tenant_id: str = "default", metadata: dict[str, Any] | None = None,
                          progress: Progress | None = None, access: AccessRule | None = None) -> Knowledge:
        doc = TextDocument(text, title, source or f"text:{uuid.uuid4().hex}", "txt", metadata or {}, access=access)
        return (await self.ingest_documents(kb_id, [doc], tenant_id, progress))[0]

    async def ingest_documents(self, kb_id: str, docs: list[TextDocument], tenant_id: str = "default",
                               progress: Progress | None = None) -> list[Knowledge]:
        """Chunk, embed and store several documents; unchanged documents are skipped."""
        kb = await asyncio.to_thread(self._kb, kb_id, tenant_id)  # the catalog: a file or Redis, never read on the event loop
        settings = chunking_signature(kb.chunking)
        out: list[Knowledge] = []
        todo: list[PreparedDocument] = []
        for doc in docs:
            if not doc.text.strip() and not (doc.images and self.images):
                raise IngestionError(f"{doc.title or doc.source or 'the document'} holds no text")
            if len(doc.text) > defaults.DOCUMENT_MAX_TEXT_CHARS:
                raise DocumentTooLargeError(f"{doc.title or doc.source or 'the document'} holds more than "
                                            f"{defaults.DOCUMENT_MAX_TEXT_CHARS:,} characters; split it into smaller documents")
            digest = content_hash(doc.text, settings)
            if doc.images and self.images:  # the images' text is part of the document: new images or reader, new chunks
                digest = content_hash(doc.text + "".join(i.sha256 for i in doc.images), f"{settings}\n{self.images.signature}")
            existing = await asyncio.to_thread(self.catalog.find_knowledge, kb.id, doc.source) if doc.source else None
            access = doc.access if doc.access is not None else (existing.access if existing else AccessRule())
            if existing is not None and existing.content_hash == digest:
                if existing.access != access:  # same text, another rule: the rule changes, nothing is embedded again
                    existing = await asyncio.to_thread(self.stack.catalog.set_knowledge_access, existing.id, access) or existing
                out.append(existing)
                continue
            knowledge = Knowledge(
                id=existing.id if existing else new_id(), knowledge_base_id=kb.id, tenant_id=tenant_id,
                title=document_title(doc.title, doc.source), source=doc.source or f"text:{uuid.uuid4().hex}",
                file_type=doc.file_type, content_hash=digest, metadata=doc.metadata, access=access,
            )
            chunks = await asyncio.to_thread(_bounded_chunks, doc, kb, knowledge)  # CPU work: off the event loop
            _flag_instructions(knowledge, await asyncio.to_thread(first_instruction, doc.text))
            if doc.images and self.images:
                chunks = await self._with_images(doc, kb, knowledge, chunks)
            texts = [(c.id, c.id, vector_text(c)) for c in chunks if c.indexed]
            todo.append(PreparedDocument(knowledge, chunks, texts, doc.text))
            out.append(knowledge)
        await self.write(kb, todo, progress)
        return out

    async def _with_images(self, doc: TextDocument, kb: KnowledgeBase, knowledge: Knowledge, chunks: list[ChunkRecord]) -> list[ChunkRecord]:
        """The text chunks plus the images' chunks; a text chunk that is only image references is kept
        for context but not indexed (its images are searchable through their own chunks)."""
        assert self.images is not None
        for chunk in chunks:
            if chunk.chunk_type == ChunkType.TEXT and only_image_references(chunk.content):
                chunk.indexed = False
        image_chunks = await self.images.chunks(doc.images, chunks, kb.chunking.chunk_size, kb.id, knowledge.id, knowledge.title)
        knowledge.metadata = {**knowledge.metadata, "images": len(doc.images), "images_skipped": doc.images_skipped}
        total = chunks + image_chunks
        if not any(c.indexed or c.chunk_type == ChunkType.IMAGE_VECTOR for c in total):  # an image vector is searchable too
            raise IngestionError(f"{knowledge.title} holds no text: none was found in its image(s)"
                                 + ("" if self.images.vision else ", and no vision model is configured to describe them"))
        if len(total) > defaults.DOCUMENT_MAX_CHUNKS:
            raise DocumentTooLargeError(f"{knowledge.title} makes {len(total):,} chunks, more than {defaults.DOCUMENT_MAX_CHUNKS:,}")
        return total

    async def write(self, kb: KnowledgeBase, docs: list[PreparedDocument], progress: Progress | None = None,
                    before_commit: BeforeCommit | None = None) -> None:
        """Embed, then store in the order that never exposes a half-written document. `before_commit` is
        awaited right before the catalog commit: when it raises, nothing is stored."""
        if not docs:
            if progress:
                progress(1, 1)
            return
        rows_in = [row for doc in docs for row in doc.vector_texts]
        try:
            vectors = await self.stack.embedders.for_kb(kb).embed_passages([t for _, _, t in rows_in], progress=progress)
            image_rows = await self.images.vector_rows([c for doc in docs for c in doc.chunks]) if self.images else []
        except Exception as exc:
            raise IngestionError(f"embedding failed, nothing was stored: {exc}") from exc
        knowledge_of = {chunk.id: doc.knowledge.id for doc in docs for chunk in doc.chunks}
        rows = [VectorRow(vid, cid, knowledge_of[cid], vec) for (vid, cid, _), vec in zip(rows_in, vectors)]
        store = asyncio.ensure_future(self._store(kb, docs, rows, image_rows, before_commit))
        try:
            await asyncio.shield(store)
        except asyncio.CancelledError:
            # Storing takes moments: a cancelled ingestion (Ctrl-C, a cancelled job) lets it finish
            # or roll itself back, so it never leaves half a document or orphaned rows behind.
            await store
            raise
        await self._changed(kb, [doc.knowledge for doc in docs])
        await self._extract_graph(kb, docs)

    async def _store(self, kb: KnowledgeBase, docs: list[PreparedDocument], rows: list[VectorRow],
                     image_rows: list[VectorRow], before_commit: BeforeCommit | None) -> None:
        """New rows under fresh ids, one catalog commit, then the old rows go; a failure before the
        commit removes the new rows again."""
        engines = self.stack.stores[kb.vector_store]
        old_ids = await asyncio.to_thread(self.catalog.chunk_ids_of, [doc.knowledge.id for doc in docs])
        new_chunks = [c for doc in docs for c in doc.chunks if c.indexed]
        new_ids = [c.id for c in new_chunks]
        try:
            await engines.vector.upsert(kb.id, rows)
            if image_rows and self.images and (space := self.images.space(kb.id)):
                new_ids += [r.chunk_id for r in image_rows]  # forgotten with the rest if the catalog write fails
                await engines.vector.upsert(space, image_rows)
            await engines.keyword.write(kb.id, new_chunks)
            if before_commit is not None:
                await before_commit()
            # one transaction of every chunk (thousands for a one-line document): seconds the event loop must not wait
            await asyncio.to_thread(self.catalog.replace_documents, kb.id, [(d.knowledge, d.chunks, d.source_text) for d in docs])
        except Exception as exc:
            await self._forget(kb, new_ids)
            raise IngestionError(f"storing failed, nothing was kept: {exc}") from exc
        await self._forget(kb, old_ids)
        await self._keep_images(kb, [c for doc in docs for c in doc.chunks])

    async def _changed(self, kb: KnowledgeBase, documents: list[Knowledge]) -> None:
        """Tell the listener; its failure is logged, the documents stay stored."""
        if self.on_change is None:
            return
        try:
            await self.on_change(kb, documents)
        except Exception as exc:
            log.error("the document-change listener of %s failed: %s", kb.name, exc)

    async def _keep_images(self, kb: KnowledgeBase, chunks: list[ChunkRecord]) -> None:
        """After a commit: the images its chunks show stay, also one a concurrent delete released
        (shared mode, ingestion/image_store.py). Logged, not raised: the documents are stored."""
        if self.images is None:
            return
        try:
            await asyncio.to_thread(keep_images, self.images.store, chunks)
        except Exception as exc:
            log.error("the images of documents just stored in %s may expire: %s", kb.name, exc)

    async def _extract_graph(self, kb: KnowledgeBase, docs: list[PreparedDocument]) -> None:
        """The optional graph step; its failure leaves the (already searchable) document as it is."""
        graph = self._graph() if self.chat is not None else None
        if graph is None or self.chat is None or kb.id not in await graph.extraction_enabled([kb.id]):
            return
        for doc in docs:
            try:
                await extract_document_graph(graph, kb.id, doc.knowledge.id, [c for c in doc.chunks if c.indexed], self.chat)
            except Exception as exc:
                log.warning("graph extraction of %s failed: %s", doc.knowledge.title, exc)

    async def _forget(self, kb: KnowledgeBase, chunk_ids: list[str]) -> None:
        """Best-effort removal of vectors and keyword rows; orphans are invisible to search."""
        if not chunk_ids:
            return
        engines = self.stack.stores[kb.vector_store]
        try:
            await engines.vector.delete_chunks(kb.id, chunk_ids)
            if self.images and (space := self.images.space(kb.id)):  # image vectors go with their document
                await engines.vector.delete_chunks(space, chunk_ids)
            await engines.keyword.delete_chunks(kb.id, chunk_ids)
        except Exception as exc:  # the catalog no longer lists them, so search never returns them
            log.warning("could not delete %d stale rows of %s: %s", len(chunk_ids), kb.name, exc)

    async def delete_knowledge(self, kb_id: str, knowledge_id: str, tenant_id: str = "default") -> None:
        """Vectors and keyword rows first, catalog last, so a failed delete can simply be retried."""
        kb = await asyncio.to_thread(self._kb, kb_id, tenant_id)
        knowledge = await asyncio.to_thread(self.catalog.get_knowledge, knowledge_id)
        if knowledge is None or knowledge.knowledge_base_id != kb.id:
            raise IngestionError(f"document {knowledge_id} is not in knowledge base {kb.name}")
        ids = await asyncio.to_thread(self.catalog.chunk_ids_of, [knowledge_id])
        engines = self.stack.stores[kb.vector_store]
        await engines.vector.delete_chunks(kb.id, ids)
        if self.images and (space := self.images.space(kb.id)):
            await engines.vector.delete_chunks(space, ids)
        await engines.keyword.delete_chunks(kb.id, ids)
        if (graph := self._graph()) is not None:
            try:
                await graph.delete_document(kb.id, knowledge_id)
            except Exception as exc:  # entity search checks the catalog, so stale graph rows are never shown
                log.warning("could not remove %s from the entity graph: %s", knowledge_id, exc)
        if self.images is not None:  # while the catalog still says which images the document shows
            await asyncio.to_thread(release_images, self.images.store, [knowledge_id])
        await asyncio.to_thread(self.catalog.delete_knowledge, kb.id, [knowledge_id])
        await self._changed(kb, [knowledge])

    async def set_access(self, kb_id: str, knowledge_id: str, rule: AccessRule, tenant_id: str = "default") -> Knowledge:
        """A document's new rule, from the next search on. The wiki pages written from it go at once
        (a page is read by who may read all its documents; the old rule made it), and the wiki is
        rebuilt: its pages come back under the rules as they are now."""
        kb = await asyncio.to_thread(self._kb, kb_id, tenant_id)
        changed = await asyncio.to_thread(self.catalog.set_knowledge_access, knowledge_id, rule)
        if changed is None or changed.knowledge_base_id != kb.id:
            raise IngestionError(f"document {knowledge_id} is not in knowledge base {kb.name}")
        pages = [d for d in await asyncio.to_thread(self.catalog.list_knowledge, kb.id)
                 if is_wiki_document(d) and knowledge_id in (d.metadata.get("sources") or [])]
        for page in pages:
            await self.delete_knowledge(kb.id, page.id, tenant_id)
        await self._changed(kb, [changed])
        return changed

    async def reparse(self, kb_id: str, knowledge_id: str, tenant_id: str = "default",
                      progress: Progress | None = None) -> Knowledge:
        """Re-chunk a document from its stored text with the KB's current settings (cached vectors
        make unchanged chunks free)."""
        kb = await asyncio.to_thread(self._kb, kb_id, tenant_id)
        knowledge = await asyncio.to_thread(self.catalog.get_knowledge, knowledge_id)
        text = await asyncio.to_thread(self.catalog.source_text, knowledge_id)
        if knowledge is None or text is None or knowledge.knowledge_base_id != kb.id:
            raise IngestionError(f"document {knowledge_id} is not in knowledge base {kb.name}")
        if is_wiki_document(knowledge):  # re-chunking would turn the page into text chunks
            raise IngestionError(f"{knowledge.title} is a wiki page: rebuild the wiki instead of reparsing it")
        knowledge.content_hash = content_hash(text, chunking_signature(kb.chunking))
        chunks = await asyncio.to_thread(lambda: plan_to_chunks(chunk_document(text, kb.chunking), kb.id, knowledge, text))  # CPU work
        _flag_instructions(knowledge, await asyncio.to_thread(first_instruction, text))
        old_images = [c for c in await asyncio.to_thread(self.catalog.chunks_of, knowledge_id) if c.chunk_type in IMAGE_CHUNK_TYPES]
        if old_images:  # the images' text is not in the stored text: their chunks move over as they are
            for chunk in chunks:
                if chunk.chunk_type == ChunkType.TEXT and only_image_references(chunk.content):
                    chunk.indexed = False
            chunks += carry_over(old_images, chunks)
        texts = [(c.id, c.id, vector_text(c)) for c in chunks if c.indexed]
        await self.write(kb, [PreparedDocument(knowledge, chunks, texts, text)], progress)
        return knowledge


def _flag_instructions(knowledge: Knowledge, sentence: str | None) -> None:
    """Record on the document the first sentence of it that speaks to the assistant (the API and the
    page show it; answers never read it: generation/citing.py leaves such sentences out)."""
    metadata = {k: v for k, v in knowledge.metadata.items() if k != "instruction_like"}
    knowledge.metadata = {**metadata, "instruction_like": sentence} if sentence else metadata
