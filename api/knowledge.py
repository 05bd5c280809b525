"""Knowledge routes: knowledge bases, documents (upload, text, list, delete, reparse, chunks, parsed text),
FAQ entries and import, hybrid search — over the retrieval and ingestion packages.

The tenant comes from the API key, never from the body. Another tenant's knowledge base answers
404 like a missing one; writes need the owning tenant. Uploads and text documents answer at once
with 202 and an ingestion job (api/jobs.py follows it); a worker parses, embeds and indexes them.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from pathlib import Path
from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ragline import defaults
from ragline.api import inputs
from ragline.api.errors import ApiError, NotFound, PayloadTooLarge
from ragline.api.host import HttpHost, host_of
from ragline.api.openapi import doc
from ragline.api.schemas import (
    ChunkList,
    ChunkOut,
    DocumentList,
    DocumentText,
    DocumentTextQuery,
    FAQEntriesIn,
    FAQEntryOut,
    FAQImportQuery,
    FAQImportReport,
    FAQList,
    FAQPageQuery,
    KnowledgeBaseCreate,
    KnowledgeBaseList,
    KnowledgeBaseUpdate,
    SearchRequest,
    SearchResults,
    TextDocumentIn,
)
from ragline.contracts.access import AccessRule
from ragline.contracts.passages import ChunkType, SearchResult
from ragline.retrieval.catalog import Catalog
from ragline.retrieval.errors import IngestionError
from ragline.retrieval.knowledge_base import check_writable
from ragline.retrieval.locations import PAGE_STARTS
from ragline.retrieval.reranking import rerank_results
from ragline.retrieval.types import Knowledge, KnowledgeBase, KnowledgeBaseType, SearchParams
from ragline.service.access import ForbiddenError, Principal
from ragline.service.jobs import JobRecord
from ragline.service.knowledge_access import authorize_knowledge

TAG = "knowledge"
WRITE_ERRORS = (400, 401, 404, 409, 422)


def _json(model: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(model.model_dump(mode="json"), status_code=status)


async def authorize_search(stack: Any, who: Principal, kb_ids: list[str], knowledge_ids: list[str]) -> None:
    """A question may only search knowledge bases (and documents of them) its tenant can read."""
    await asyncio.to_thread(authorize_knowledge, stack, who, kb_ids, knowledge_ids)


async def _kb(request: Request, who: Principal) -> tuple[Any, KnowledgeBase]:
    stack = await host_of(request).stack()
    # Catalog reads are blocking calls (SQLite, or Redis in shared mode): off the event loop, so a
    # slow or paused store holds this request only, not every stream of the process.
    return stack, await asyncio.to_thread(stack.knowledge_bases.get, inputs.path(request, "kb_id"), who)


def _owned(kb: KnowledgeBase, who: Principal) -> None:
    check_writable(kb, who)


def _document(stack: Any, kb: KnowledgeBase, knowledge_id: str, who: Principal) -> Knowledge:
    document = stack.catalog.get_knowledge(knowledge_id)
    if document is None or document.knowledge_base_id != kb.id or document.access.lets_in(who) is None:
        raise NotFound("document not found")  # an unreadable document is as missing as none
    return document


def _readable_documents(stack: Any, kb: KnowledgeBase, who: Principal) -> list[Knowledge]:
    return [document for document in stack.catalog.list_knowledge(kb.id) if document.access.lets_in(who) is not None]


# --- knowledge bases ---


@doc("List the tenant's knowledge bases", TAG, response=KnowledgeBaseList)
async def list_knowledge_bases(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    stack = await svc.stack()
    return _json(KnowledgeBaseList(items=await asyncio.to_thread(stack.knowledge_bases.list, who)))


@doc("Create a knowledge base", TAG, body=KnowledgeBaseCreate, response=KnowledgeBase, status=201, errors=WRITE_ERRORS)
async def create_knowledge_base(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    body = await inputs.body(request, KnowledgeBaseCreate)
    if who.read_only or who.knowledge_bases is not None:
        raise ForbiddenError("this API key may not create knowledge bases (it is read-only, or limited to some bases)")
    stack = await svc.stack()
    kb = await asyncio.to_thread(
        stack.knowledge_bases.create, body.name, who.tenant_id, type=body.type, description=body.description, tags=body.tags,
        chunking=body.chunking, faq_index_mode=body.faq_index_mode, wiki_enabled=body.wiki_enabled,
    )
    return _json(kb, 201)


@doc("Get a knowledge base", TAG, response=KnowledgeBase)
async def get_knowledge_base(request: Request) -> Response:
    who = host_of(request).authenticate(request)
    _, kb = await _kb(request, who)
    return _json(kb)


@doc("Rename or describe a knowledge base (owning tenant)", TAG, body=KnowledgeBaseUpdate, response=KnowledgeBase, errors=WRITE_ERRORS)
async def update_knowledge_base(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    body = await inputs.body(request, KnowledgeBaseUpdate)
    stack = await svc.stack()
    kb = await asyncio.to_thread(stack.knowledge_bases.update, inputs.path(request, "kb_id"), who, name=body.name,
                                 description=body.description, tags=body.tags, wiki_enabled=body.wiki_enabled)
    if body.wiki_enabled is not None:  # write the pages of the documents already there, or remove them
        await svc.core.wiki.schedule(kb.id)
    return _json(kb)


@doc("Delete a knowledge base with its documents and indexes (owning tenant)", TAG, status=204, errors=(401, 404))
async def delete_knowledge_base(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    stack = await svc.stack()
    await stack.knowledge_bases.delete(inputs.path(request, "kb_id"), who)
    return Response(status_code=204)


@doc("Who in the tenant may read a knowledge base (no users and no groups: everyone); takes effect on the next question",
     TAG, body=AccessRule, response=KnowledgeBase, errors=WRITE_ERRORS)
async def set_knowledge_base_access(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    rule = await inputs.body(request, AccessRule)
    stack = await svc.stack()
    return _json(await asyncio.to_thread(stack.knowledge_bases.update, inputs.path(request, "kb_id"), who, access=rule))


@doc("Narrow who may read one document (within its knowledge base's rule); takes effect on the next question",
     TAG, body=AccessRule, response=Knowledge, errors=WRITE_ERRORS)
async def set_document_access(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    rule = await inputs.body(request, AccessRule)
    stack, kb = await _kb(request, who)
    _owned(kb, who)
    document = await asyncio.to_thread(_document, stack, kb, inputs.path(request, "document_id"), who)
    return _json(await (await svc.ingestion()).set_access(kb.id, document.id, rule, who.tenant_id))


# --- documents ---


@doc("List the documents of a knowledge base", TAG, response=DocumentList)
async def list_documents(request: Request) -> Response:
    who = host_of(request).authenticate(request)
    stack, kb = await _kb(request, who)
    return _json(DocumentList(items=await asyncio.to_thread(_readable_documents, stack, kb, who)))


async def _upload(request: Request, fields: tuple[str, ...] = ()) -> tuple[str, bytes, dict[str, str]]:
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise ApiError("send the file as multipart/form-data in a field named 'file'")
    async with request.form(max_files=1, max_fields=len(fields) + 1, max_part_size=defaults.UPLOAD_MAX_BYTES) as form:
        upload = form.get("file")
        if not isinstance(upload, UploadFile) or not upload.filename:
            raise ApiError("the form has no file in a field named 'file'")
        data = await upload.read(defaults.UPLOAD_MAX_BYTES + 1)
        if len(data) > defaults.UPLOAD_MAX_BYTES:
            raise PayloadTooLarge(f"a document may be at most {defaults.UPLOAD_MAX_BYTES} bytes")
        values = {name: str(form.get(name) or "") for name in fields}
        return inputs.file_name(upload.filename), data, {name: inputs.plain_text(value) for name, value in values.items()}


def _accepted(record: JobRecord) -> Response:
    """202 with the job; Location names where it is followed."""
    location = f"/api/v1/knowledge-bases/{record.knowledge_base_id}/jobs/{record.id}"
    return JSONResponse(record.model_dump(mode="json"), status_code=202, headers={"Location": location})


@doc("Upload a document (multipart field 'file'; txt, md, html, pdf, docx, csv, xlsx, json; png, jpg, webp, gif images are read by OCR). "
     "Answers at once with 202 and the ingestion job; follow it at .../jobs/{job_id} (or its SSE events) until done", TAG,
     multipart=("file", "title"), response=JobRecord, status=202, errors=(400, 401, 404, 413, 422))
async def upload_document(request: Request) -> Response:
    from ragline.service.ingest_job import precheck

    svc = host_of(request)
    who = svc.authenticate(request)
    _, kb = await _kb(request, who)
    _owned(kb, who)
    filename, data, fields = await _upload(request, ("title",))
    await asyncio.to_thread(precheck, data, filename)  # empty, binary or bomb-like files are refused now, not in the job
    record = JobRecord(id=uuid.uuid4().hex, tenant_id=who.tenant_id, knowledge_base_id=kb.id, kind="file", filename=filename,
                       title=fields["title"], source=f"upload:{filename}")
    return _accepted(await svc.jobs.submit(record, data))


@doc("Add a document from text: 202 with the ingestion job, like an upload", TAG, body=TextDocumentIn, response=JobRecord, status=202, errors=WRITE_ERRORS)
async def add_text_document(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    body = await inputs.body(request, TextDocumentIn)
    _, kb = await _kb(request, who)
    _owned(kb, who)
    if not body.text.strip():
        raise IngestionError("the text holds nothing but spaces")
    job_id = uuid.uuid4().hex
    record = JobRecord(id=job_id, tenant_id=who.tenant_id, knowledge_base_id=kb.id, kind="text", title=body.title,
                       source=body.source or f"text:{job_id}")
    return _accepted(await svc.jobs.submit(record, body.text.encode()))


@doc("Delete a document (owning tenant)", TAG, status=204, errors=(401, 404))
async def delete_document(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    stack, kb = await _kb(request, who)
    _owned(kb, who)
    document = await asyncio.to_thread(_document, stack, kb, inputs.path(request, "document_id"), who)
    await (await svc.ingestion()).delete_knowledge(kb.id, document.id, who.tenant_id)
    return Response(status_code=204)


@doc("Re-chunk and re-index a document with the knowledge base's current settings", TAG, response=Knowledge, errors=(401, 404))
async def reparse_document(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    stack, kb = await _kb(request, who)
    _owned(kb, who)
    document = await asyncio.to_thread(_document, stack, kb, inputs.path(request, "document_id"), who)
    return _json(await (await svc.ingestion()).reparse(kb.id, document.id, who.tenant_id))


@doc("The chunks of a document, in order", TAG, response=ChunkList)
async def list_chunks(request: Request) -> Response:
    who = host_of(request).authenticate(request)
    stack, kb = await _kb(request, who)
    return _json(ChunkList(items=await asyncio.to_thread(document_chunks, stack, kb, inputs.path(request, "document_id"), who)))


def document_chunks(stack: Any, kb: KnowledgeBase, document_id: str, who: Principal) -> list[ChunkOut]:
    """A readable document of a readable knowledge base, its chunks in order (shared with the MCP door)."""
    document = _document(stack, kb, document_id, who)
    return [
        ChunkOut(id=c.id, knowledge_id=c.knowledge_id, chunk_index=c.chunk_index, chunk_type=c.chunk_type.value, content=c.content,
                 parent_id=c.parent_id, pre_id=c.pre_id, next_id=c.next_id, metadata=c.metadata)
        for c in stack.catalog.chunks_of(document.id)
    ]


@doc("A document's parsed text, or a window of it: the text that references' offsets point into", TAG,
     query=DocumentTextQuery, response=DocumentText)
async def document_text(request: Request) -> Response:
    who = host_of(request).authenticate(request)
    query = inputs.query(request, DocumentTextQuery)
    stack, kb = await _kb(request, who)
    return _json(await asyncio.to_thread(_document_text, stack, kb, inputs.path(request, "document_id"), query, who))


def _document_text(stack: Any, kb: KnowledgeBase, document_id: str, query: DocumentTextQuery, who: Principal) -> DocumentText:
    document = _document(stack, kb, document_id, who)
    text = stack.catalog.source_text(document.id) or ""
    return DocumentText(knowledge_id=document.id, title=document.title, file_type=document.file_type, offset=min(query.offset, len(text)),
                        text=text[query.offset : query.offset + query.limit], total_chars=len(text),
                        page_starts=list(document.metadata.get(PAGE_STARTS) or []))


# --- FAQ ---


def _faq_kb(kb: KnowledgeBase) -> None:
    if kb.type != KnowledgeBaseType.FAQ:
        raise ApiError(f"knowledge base {kb.name} is not an FAQ knowledge base")


@doc("List the FAQ entries of an FAQ knowledge base, a page at a time", TAG, query=FAQPageQuery, response=FAQList)
async def list_faq(request: Request) -> Response:
    who = host_of(request).authenticate(request)
    query = inputs.query(request, FAQPageQuery)
    stack, kb = await _kb(request, who)
    _faq_kb(kb)
    return _json(await asyncio.to_thread(_faq_page, stack.catalog, kb.id, query, who))  # a catalog read per entry: off the loop


def _faq_page(catalog: Catalog, kb_id: str, query: FAQPageQuery, who: Principal) -> FAQList:
    documents = [document for document in catalog.list_knowledge(kb_id) if document.access.lets_in(who) is not None]
    start = (query.page - 1) * query.page_size
    items = []
    for document in documents[start : start + query.page_size]:
        chunk = next((c for c in catalog.chunks_of(document.id) if c.chunk_type == ChunkType.FAQ), None)
        if chunk is not None:
            fields = {k: chunk.metadata.get(k) for k in FAQEntryOut.model_fields if k != "id" and k in chunk.metadata}
            items.append(FAQEntryOut(id=document.id, **fields))
    return FAQList(items=items, total=len(documents), page=query.page, page_size=query.page_size)


@doc("Add or replace FAQ entries (keyed by the standard question)", TAG, body=FAQEntriesIn, response=DocumentList, errors=WRITE_ERRORS)
async def upsert_faq(request: Request) -> Response:
    from ragline.ingestion.faq_import import upsert_faq as upsert

    svc = host_of(request)
    who = svc.authenticate(request)
    body = await inputs.body(request, FAQEntriesIn)
    _, kb = await _kb(request, who)
    _owned(kb, who)
    _faq_kb(kb)
    changed = await upsert(await svc.ingestion(), kb.id, body.entries, who.tenant_id)
    return _json(DocumentList(items=changed))


@doc("Import FAQ entries from a CSV or JSON file (multipart field 'file')", TAG, multipart=("file",), query=FAQImportQuery, response=FAQImportReport, errors=(400, 401, 404, 413, 422))
async def import_faq(request: Request) -> Response:
    from ragline.ingestion.faq_import import import_faq_file

    svc = host_of(request)
    who = svc.authenticate(request)
    query = inputs.query(request, FAQImportQuery)
    _, kb = await _kb(request, who)
    _owned(kb, who)
    _faq_kb(kb)
    filename, data, _ = await _upload(request)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / filename
        path.write_bytes(data)
        report = await import_faq_file(await svc.ingestion(), kb.id, path, who.tenant_id, dry_run=query.dry_run)
    return _json(report)


# --- search ---


@doc("Hybrid search (vector + keyword, fused) over knowledge bases", TAG, body=SearchRequest, response=SearchResults)
async def search(request: Request) -> Response:
    svc = host_of(request)
    who = svc.authenticate(request)
    body = await inputs.body(request, SearchRequest)
    return _json(SearchResults(items=await hybrid_search(svc, who, body)))


async def hybrid_search(svc: HttpHost, who: Principal, body: SearchRequest) -> list[SearchResult]:
    """The search route's work, shared with the other doors (MCP): authorize, search, rerank."""
    stack = await svc.stack()
    await authorize_search(stack, who, body.knowledge_base_ids, body.knowledge_ids)
    search = body.model_dump(exclude={"rerank_top_k", "rerank_threshold", "faq_priority_enabled", "faq_score_boost"})
    hits = await stack.searcher.search(SearchParams(tenant_id=who.tenant_id, reader=who, **search))
    if body.rerank_top_k:  # the same chain the pipeline's rerank stage runs
        hits = await rerank_results(body.query, hits, svc.core.reranker(), threshold=body.rerank_threshold, top_k=body.rerank_top_k,
                                    scoped=bool(body.knowledge_ids), faq_boost=body.faq_score_boost if body.faq_priority_enabled else None,
                                    vector_threshold=body.vector_threshold)  # the image rule's floor: max(this, 0.25)
    return hits
