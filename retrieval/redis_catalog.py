"""The catalog in Redis: knowledge bases, documents and chunks shared by every replica, nothing on disk.

The shared-mode twin of catalog.py's SqliteCatalog (same methods, same meaning; the Catalog protocol).
Stored as hashes (layout in redis_catalog_scripts.py). Writes are all-or-nothing, also when the
writer dies mid-way:
1. stage: a document's chunks and source text are written under a fresh revision id
   (`rows:<doc>:<rev>`, `text:<doc>:<rev>`) with a TTL; nobody reads a revision that is not current;
2. commit: one Lua script checks the staged revisions are complete, points each document at its new
   revision, drops the old revision's rows and bumps the KB revision (which keys bm25s and caches).
A writer killed during 1 leaves staged keys that expire; one killed during 2 cannot exist, a script
runs whole. Readers resolve chunks through the current revision in one script too, so a read never
mixes two revisions of a document.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from typing import Any

import redis

from ragline import defaults
from ragline.contracts.access import AccessRule
from ragline.contracts.passages import ChunkType
from ragline.redis_clients import out_of_memory
from ragline.retrieval import redis_catalog_scripts as lua
from ragline.retrieval.catalog import ChunkRecord, KeywordCorpus, access_json, stored_rule
from ragline.retrieval.errors import KnowledgeBaseExistsError, RetrievalError
from ragline.retrieval.redis_connect import connect_search
from ragline.retrieval.types import Knowledge, KnowledgeBase, utcnow

PREFIX = "ragline:cat:"
_BATCH = 500  # rows per pipeline round trip while staging, ids per read script
_SNAPSHOT_TRIES = 20  # keyword_corpus re-reads while writers keep committing to the KB


def _chunk_json(c: ChunkRecord, seq: int) -> str:
    """`seq` keeps the written order, which a hash does not (the keyword corpus is read in it)."""
    return json.dumps({"seq": seq, "id": c.id, "kb": c.knowledge_base_id, "doc": c.knowledge_id, "i": c.chunk_index,
                       "type": c.chunk_type.value, "content": c.content, "parent": c.parent_id, "pre": c.pre_id,
                       "next": c.next_id, "meta": c.metadata, "tokens": " ".join(c.tokens), "indexed": c.indexed},
                      ensure_ascii=False)


def _chunk(raw: bytes | dict[str, Any]) -> ChunkRecord:
    d = json.loads(raw) if isinstance(raw, bytes) else raw
    return ChunkRecord(id=d["id"], knowledge_base_id=d["kb"], knowledge_id=d["doc"], chunk_index=d["i"],
                       content=d["content"], chunk_type=ChunkType(d["type"]), parent_id=d["parent"], pre_id=d["pre"],
                       next_id=d["next"], metadata=d["meta"], tokens=d["tokens"].split(), indexed=d["indexed"])


def _in_written_order(rows: list[bytes]) -> list[ChunkRecord]:
    return [_chunk(d) for d in sorted(map(json.loads, rows), key=lambda d: d["seq"])]


def _text(value: bytes | str) -> str:
    """The client returns bytes (no decode_responses: chunk rows are decoded by json)."""
    return value.decode() if isinstance(value, bytes) else value


def _image_handles(chunks: list[ChunkRecord]) -> list[str]:
    """The ImageInfo urls of the chunks (what documents_showing answers for), never text."""
    handles = {str(image["url"]) for c in chunks for image in c.metadata.get("images") or []
               if isinstance(image, dict) and image.get("url")}
    return sorted(handles)


class RedisCatalog:
    """Catalog on a shared Redis; every method is one round trip or a few, each write one atomic script."""

    def __init__(self, client: redis.Redis, staging_ttl_s: int = defaults.CATALOG_STAGING_TTL_S) -> None:
        self.client = client
        self.staging_ttl_s = staging_ttl_s
        self._commit = client.register_script(lua.COMMIT)
        self._delete_docs = client.register_script(lua.DELETE_DOCS)
        self._delete_kb = client.register_script(lua.DELETE_KB)
        self._insert_kb = client.register_script(lua.INSERT_KB)
        self._update_kb = client.register_script(lua.UPDATE_KB)
        self._get_chunks = client.register_script(lua.GET_CHUNKS)
        self._of_document = client.register_script(lua.OF_DOCUMENT)
        self._set_access = client.register_script(lua.SET_ACCESS)

    @classmethod
    def from_url(cls, url: str) -> RedisCatalog:
        return cls(connect_search(url))

    # --- knowledge bases ---
    def insert_kb(self, kb: KnowledgeBase) -> None:
        try:
            self._insert_kb(args=[PREFIX, kb.id, kb.tenant_id, kb.name, kb.model_dump_json(), kb.revision])
        except redis.ResponseError as exc:
            if out_of_memory(exc):
                raise
            raise KnowledgeBaseExistsError(str(exc)) from exc

    def update_kb(self, kb: KnowledgeBase) -> None:
        kb.updated_at = utcnow()
        try:
            self._update_kb(args=[PREFIX, kb.id, kb.name, kb.model_dump_json()])
        except redis.ResponseError as exc:
            if out_of_memory(exc):
                raise
            raise KnowledgeBaseExistsError(str(exc)) from exc

    @staticmethod
    def _kb(body: bytes | str | None, revision: bytes | str | None) -> KnowledgeBase | None:
        if body is None:
            return None
        kb = KnowledgeBase.model_validate_json(body)
        kb.revision = int(revision or 0)
        return kb

    def get_kb(self, kb_id: str) -> KnowledgeBase | None:
        return self._kb(*self.client.hmget(f"{PREFIX}kb:{kb_id}", ["body", "revision"]))

    def get_kbs(self, kb_ids: list[str]) -> dict[str, KnowledgeBase]:
        with self.client.pipeline(transaction=False) as pipe:
            for kb_id in kb_ids:
                pipe.hmget(f"{PREFIX}kb:{kb_id}", ["body", "revision"])
            replies = pipe.execute()
        found = (self._kb(*reply) for reply in replies)
        return {kb.id: kb for kb in found if kb is not None}

    def find_kb(self, tenant_id: str, name: str) -> KnowledgeBase | None:
        kb_id = self.client.hget(f"{PREFIX}kbnames", f"{tenant_id}\n{name}")
        return self.get_kb(_text(kb_id)) if kb_id else None

    def list_kbs(self) -> list[KnowledgeBase]:
        ids = sorted(_text(i) for i in self.client.smembers(f"{PREFIX}kbs"))
        return sorted(self.get_kbs(ids).values(), key=lambda kb: kb.name)

    def kb_revision(self, kb_id: str) -> int:
        revision = self.client.hget(f"{PREFIX}kb:{kb_id}", "revision")
        return int(revision) if revision is not None else -1

    def delete_kb(self, kb_id: str) -> None:
        self._delete_kb(args=[PREFIX, kb_id])

    # --- documents ---
    def get_knowledge(self, knowledge_id: str) -> Knowledge | None:
        body = self.client.hget(f"{PREFIX}doc:{knowledge_id}", "body")
        return Knowledge.model_validate_json(body) if body else None

    def get_knowledge_many(self, ids: Iterable[str]) -> dict[str, Knowledge]:
        ids = list(dict.fromkeys(ids))
        with self.client.pipeline(transaction=False) as pipe:
            for knowledge_id in ids:
                pipe.hget(f"{PREFIX}doc:{knowledge_id}", "body")
            bodies = pipe.execute()
        found = (Knowledge.model_validate_json(b) for b in bodies if b)
        return {k.id: k for k in found}

    def find_knowledge(self, kb_id: str, source: str) -> Knowledge | None:
        knowledge_id = self.client.hget(f"{PREFIX}kbsrc:{kb_id}", source)
        return self.get_knowledge(_text(knowledge_id)) if knowledge_id else None

    def _kb_document_ids(self, kb_id: str) -> list[str]:
        return sorted(_text(i) for i in self.client.smembers(f"{PREFIX}kbdocs:{kb_id}"))

    def list_knowledge(self, kb_id: str) -> list[Knowledge]:
        documents = self.get_knowledge_many(self._kb_document_ids(kb_id)).values()
        return sorted(documents, key=lambda k: k.source)

    def source_text(self, knowledge_id: str) -> str | None:
        text = self._of_document(args=[PREFIX, knowledge_id, "text"])
        return _text(text) if text is not None else None

    def chunk_ids_of(self, knowledge_ids: Iterable[str]) -> list[str]:
        with self.client.pipeline(transaction=False) as pipe:
            for knowledge_id in knowledge_ids:
                self._of_document(args=[PREFIX, knowledge_id, "ids"], client=pipe)
            replies = pipe.execute()
        # cjson writes an empty list as {}: iterating it gives no ids either
        return [chunk_id for ids in replies if ids for chunk_id in json.loads(ids)]

    def restricted_documents(self, kb_ids: list[str]) -> dict[str, AccessRule]:
        with self.client.pipeline(transaction=False) as pipe:
            for kb_id in kb_ids:
                pipe.hgetall(f"{PREFIX}restricted:{kb_id}")
            replies = pipe.execute()
        return {_text(kid): stored_rule(rule) for reply in replies for kid, rule in reply.items()}

    def access_stamps(self, kb_ids: list[str]) -> dict[str, tuple[int, int]]:
        with self.client.pipeline(transaction=False) as pipe:
            for kb_id in kb_ids:
                pipe.hmget(f"{PREFIX}kb:{kb_id}", ["revision", "access_revision"])
            replies = pipe.execute()
        return {kb_id: (int(revision), int(access or 0)) for kb_id, (revision, access) in zip(kb_ids, replies) if revision is not None}

    def set_knowledge_access(self, knowledge_id: str, rule: AccessRule) -> Knowledge | None:
        for _ in range(_SNAPSHOT_TRIES):  # a writer replaced the document between the read and the write: read again
            body, revision = self.client.hmget(f"{PREFIX}doc:{knowledge_id}", ["body", "rev"])
            if body is None or revision is None:
                return None
            knowledge = Knowledge.model_validate_json(body)
            knowledge.access = rule
            if self._set_access(args=[PREFIX, knowledge_id, revision, knowledge.model_dump_json(), access_json(rule)]):
                return knowledge
        raise RetrievalError(f"document {knowledge_id} kept changing while its access was set: try again")

    def replace_documents(self, kb_id: str, docs: list[tuple[Knowledge, list[ChunkRecord], str]]) -> None:
        """Swap in new chunks for each (document, chunks, source text): staged, then committed in one step."""
        revisions = [uuid.uuid4().hex for _ in docs]
        payload: list[dict[str, Any]] = []
        try:
            for (knowledge, chunks, text), revision in zip(docs, revisions):
                self._stage(knowledge.id, revision, chunks, text)
                knowledge.chunk_count = sum(1 for c in chunks if c.indexed)
                knowledge.updated_at = utcnow()
                payload.append({"id": knowledge.id, "rev": revision, "source": knowledge.source,
                                "body": knowledge.model_dump_json(), "images": _image_handles(chunks),
                                "chunks": [c.id for c in chunks], "access": access_json(knowledge.access)})
            self._commit(args=[PREFIX, json.dumps({"kb": kb_id, "docs": payload}, ensure_ascii=False)])
        except BaseException:
            self._unstage([(k.id, rev) for (k, _, _), rev in zip(docs, revisions)])
            raise

    def _stage(self, knowledge_id: str, revision: str, chunks: list[ChunkRecord], text: str) -> None:
        """One revision's rows and text under keys no reader looks at until the commit; they expire unless committed."""
        if len({c.id for c in chunks}) != len(chunks):
            raise RetrievalError(f"document {knowledge_id} repeats a chunk id")
        rows, ttl = f"{PREFIX}rows:{knowledge_id}:{revision}", self.staging_ttl_s
        self.client.set(f"{PREFIX}text:{knowledge_id}:{revision}", text, ex=ttl)
        for start in range(0, len(chunks), _BATCH):
            with self.client.pipeline(transaction=False) as pipe:
                batch = enumerate(chunks[start : start + _BATCH], start)
                pipe.hset(rows, mapping={c.id: _chunk_json(c, seq) for seq, c in batch})
                pipe.expire(rows, ttl)
                pipe.execute()

    def _unstage(self, staged: list[tuple[str, str]]) -> None:
        """Best effort: drop staged keys at once rather than at their TTL (a committed revision is never named here
        since its id is fresh, but a commit that did run keeps its keys: they are current, not staged)."""
        try:
            for knowledge_id, revision in staged:
                current = self.client.hget(f"{PREFIX}doc:{knowledge_id}", "rev")
                if current is None or _text(current) != revision:
                    self.client.unlink(f"{PREFIX}rows:{knowledge_id}:{revision}", f"{PREFIX}text:{knowledge_id}:{revision}")
        except redis.RedisError:
            pass  # the TTL removes them

    def delete_knowledge(self, kb_id: str, knowledge_ids: list[str]) -> None:
        self._delete_docs(args=[PREFIX, kb_id, *knowledge_ids])

    # --- chunks ---
    def get_chunks(self, ids: Iterable[str]) -> dict[str, ChunkRecord]:
        ids = list(dict.fromkeys(ids))
        out: dict[str, ChunkRecord] = {}
        for start in range(0, len(ids), _BATCH):
            rows = self._get_chunks(args=[PREFIX, *ids[start : start + _BATCH]])
            out.update((c.id, c) for c in (_chunk(raw) for raw in rows if raw))
        return out

    def documents_showing(self, handle: str) -> list[str]:
        """Documents with a current chunk whose ImageInfo url is `handle` (see SqliteCatalog)."""
        return sorted(_text(d) for d in self.client.smembers(f"{PREFIX}img:{handle}"))

    def chunks_of(self, knowledge_id: str) -> list[ChunkRecord]:
        rows = self._of_document(args=[PREFIX, knowledge_id, "rows"]) or []
        return sorted((_chunk(raw) for raw in rows), key=lambda c: (c.chunk_type.value, c.chunk_index))

    def keyword_corpus(self, kb_id: str) -> KeywordCorpus:
        """The KB's indexed chunks at one revision: read per document, and read again if a commit came between."""
        for _ in range(_SNAPSHOT_TRIES):
            revision = self.kb_revision(kb_id)
            documents = self._kb_document_ids(kb_id)
            with self.client.pipeline(transaction=False) as pipe:
                for knowledge_id in documents:
                    self._of_document(args=[PREFIX, knowledge_id, "rows"], client=pipe)
                replies = pipe.execute()
            if self.kb_revision(kb_id) == revision:
                chunks = [c for rows in replies if rows for c in _in_written_order(rows)]
                indexed = [c for c in chunks if c.indexed]
                return KeywordCorpus(revision, [c.id for c in indexed], [c.knowledge_id for c in indexed],
                                     [c.tokens for c in indexed])
        raise RetrievalError(f"knowledge base {kb_id} kept changing while its keyword corpus was read")
