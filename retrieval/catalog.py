"""The catalog: knowledge bases, documents and chunks; a SQLite file under the data directory by default.

`Catalog` is the protocol every backend keeps; `SqliteCatalog` is the embedded one and
redis_catalog.RedisCatalog the shared one (RAGLINE_REDIS_URL). Replaces the seed's relational repositories (knowledge_bases / knowledges / chunks tables). It is
the source of truth: vector and keyword hits are resolved through it, so a vector written by an
ingestion that failed before its catalog transaction committed is never returned. Every write
bumps the KB's revision, which tells derived indexes (bm25s) to rebuild.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ragline.contracts.access import AccessRule
from ragline.contracts.passages import ChunkType
from ragline.retrieval.types import Knowledge, KnowledgeBase, utcnow

_SCHEMA = """
CREATE TABLE IF NOT EXISTS knowledge_bases (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, name TEXT NOT NULL,
    body TEXT NOT NULL, revision INTEGER NOT NULL DEFAULT 0, UNIQUE (tenant_id, name));
CREATE TABLE IF NOT EXISTS knowledge (id TEXT PRIMARY KEY, kb_id TEXT NOT NULL, source TEXT NOT NULL,
    body TEXT NOT NULL, source_text TEXT NOT NULL DEFAULT '', access TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS knowledge_by_source ON knowledge (kb_id, source);
CREATE TABLE IF NOT EXISTS chunks (id TEXT PRIMARY KEY, kb_id TEXT NOT NULL, knowledge_id TEXT NOT NULL,
    chunk_index INTEGER NOT NULL, chunk_type TEXT NOT NULL, content TEXT NOT NULL, parent_id TEXT,
    pre_id TEXT, next_id TEXT, metadata TEXT NOT NULL, tokens TEXT NOT NULL, indexed INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS chunks_by_knowledge ON chunks (knowledge_id);
CREATE INDEX IF NOT EXISTS chunks_by_kb ON chunks (kb_id, indexed);
"""
# A search reads the restricted documents of its bases on every question: an index of only those.
_RESTRICTED_INDEX = "CREATE INDEX IF NOT EXISTS knowledge_restricted ON knowledge (kb_id) WHERE access != ''"


def access_json(rule: AccessRule) -> str:
    """A restricted rule as stored beside its document; '' for an open one (not indexed)."""
    return rule.model_dump_json() if rule.restricted else ""


@functools.lru_cache(maxsize=4096)
def stored_rule(raw: str | bytes) -> AccessRule:
    """A stored rule, parsed once: a search reads every restricted document's rule, and thousands of
    documents share a few rules (validating each again cost ~90 ms per search at 8,000)."""
    return AccessRule.model_validate_json(raw)


@dataclass
class ChunkRecord:
    """One stored chunk. `tokens` feed the keyword index; `indexed` is false for parent chunks."""

    id: str
    knowledge_base_id: str
    knowledge_id: str
    chunk_index: int
    content: str
    chunk_type: ChunkType = ChunkType.TEXT
    parent_id: str | None = None
    pre_id: str | None = None
    next_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    tokens: list[str] = field(default_factory=list)
    indexed: bool = True


@dataclass
class KeywordCorpus:
    """The indexed chunks of one KB, in a stable order, as the keyword index needs them."""

    revision: int
    chunk_ids: list[str]
    knowledge_ids: list[str]
    tokens: list[list[str]]


def _row_to_chunk(row: sqlite3.Row) -> ChunkRecord:
    return ChunkRecord(
        id=row["id"], knowledge_base_id=row["kb_id"], knowledge_id=row["knowledge_id"],
        chunk_index=row["chunk_index"], content=row["content"], chunk_type=ChunkType(row["chunk_type"]),
        parent_id=row["parent_id"], pre_id=row["pre_id"], next_id=row["next_id"],
        metadata=json.loads(row["metadata"]), tokens=row["tokens"].split(), indexed=bool(row["indexed"]),
    )


class Catalog(Protocol):
    """What the stores, searcher, ingestion and API read and write, whichever backend holds it.

    Writes are all-or-nothing: `replace_documents` shows every new document whole, or none of them.
    Every document write (replace, delete) bumps the KB's revision, which derived indexes and caches key on.
    """

    def insert_kb(self, kb: KnowledgeBase) -> None: ...
    def update_kb(self, kb: KnowledgeBase) -> None: ...
    def get_kb(self, kb_id: str) -> KnowledgeBase | None: ...
    def get_kbs(self, kb_ids: list[str]) -> dict[str, KnowledgeBase]: ...
    def find_kb(self, tenant_id: str, name: str) -> KnowledgeBase | None: ...
    def list_kbs(self) -> list[KnowledgeBase]: ...
    def kb_revision(self, kb_id: str) -> int: ...
    def delete_kb(self, kb_id: str) -> None: ...
    def get_knowledge(self, knowledge_id: str) -> Knowledge | None: ...
    def get_knowledge_many(self, ids: Iterable[str]) -> dict[str, Knowledge]: ...
    def find_knowledge(self, kb_id: str, source: str) -> Knowledge | None: ...
    def list_knowledge(self, kb_id: str) -> list[Knowledge]: ...
    def source_text(self, knowledge_id: str) -> str | None: ...
    def chunk_ids_of(self, knowledge_ids: Iterable[str]) -> list[str]: ...
    def restricted_documents(self, kb_ids: list[str]) -> dict[str, AccessRule]: ...
    def access_stamps(self, kb_ids: list[str]) -> dict[str, tuple[int, int]]:
        """Per base, what moves whenever a document's rule may have: its revision (documents written
        or deleted) and its access revision (a rule set on a stored document)."""
        ...
    def set_knowledge_access(self, knowledge_id: str, rule: AccessRule) -> Knowledge | None: ...
    def replace_documents(self, kb_id: str, docs: list[tuple[Knowledge, list[ChunkRecord], str]]) -> None: ...
    def delete_knowledge(self, kb_id: str, knowledge_ids: list[str]) -> None: ...
    def get_chunks(self, ids: Iterable[str]) -> dict[str, ChunkRecord]: ...
    def documents_showing(self, handle: str) -> list[str]: ...
    def chunks_of(self, knowledge_id: str) -> list[ChunkRecord]: ...
    def keyword_corpus(self, kb_id: str) -> KeywordCorpus: ...


class SqliteCatalog:
    """Thread-safe access to the catalog file; every method is one short transaction."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.executescript(_SCHEMA)
        if "access" not in {row[1] for row in self._conn.execute("PRAGMA table_info(knowledge)")}:  # a catalog from before access rules
            self._conn.execute("ALTER TABLE knowledge ADD COLUMN access TEXT NOT NULL DEFAULT ''")
        self._conn.execute(_RESTRICTED_INDEX)
        if "access_revision" not in {row[1] for row in self._conn.execute("PRAGMA table_info(knowledge_bases)")}:
            self._conn.execute("ALTER TABLE knowledge_bases ADD COLUMN access_revision INTEGER NOT NULL DEFAULT 0")

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _query(self, sql: str, args: Iterable[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, tuple(args)).fetchall()

    # --- knowledge bases ---
    def insert_kb(self, kb: KnowledgeBase) -> None:
        with self._tx() as db:
            db.execute("INSERT INTO knowledge_bases (id, tenant_id, name, body, revision) VALUES (?, ?, ?, ?, ?)",
                       (kb.id, kb.tenant_id, kb.name, kb.model_dump_json(), kb.revision))

    def update_kb(self, kb: KnowledgeBase) -> None:
        kb.updated_at = utcnow()
        with self._tx() as db:
            db.execute("UPDATE knowledge_bases SET name=?, body=? WHERE id=?", (kb.name, kb.model_dump_json(), kb.id))

    def _kb(self, row: sqlite3.Row) -> KnowledgeBase:
        kb = KnowledgeBase.model_validate_json(row["body"])
        kb.revision = row["revision"]
        return kb

    def get_kb(self, kb_id: str) -> KnowledgeBase | None:
        rows = self._query("SELECT * FROM knowledge_bases WHERE id=?", (kb_id,))
        return self._kb(rows[0]) if rows else None

    def get_kbs(self, kb_ids: list[str]) -> dict[str, KnowledgeBase]:
        marks = ",".join("?" * len(kb_ids))
        rows = self._query(f"SELECT * FROM knowledge_bases WHERE id IN ({marks})", kb_ids) if kb_ids else []
        return {row["id"]: self._kb(row) for row in rows}

    def find_kb(self, tenant_id: str, name: str) -> KnowledgeBase | None:
        rows = self._query("SELECT * FROM knowledge_bases WHERE tenant_id=? AND name=?", (tenant_id, name))
        return self._kb(rows[0]) if rows else None

    def list_kbs(self) -> list[KnowledgeBase]:
        return [self._kb(row) for row in self._query("SELECT * FROM knowledge_bases ORDER BY name")]

    def kb_revision(self, kb_id: str) -> int:
        rows = self._query("SELECT revision FROM knowledge_bases WHERE id=?", (kb_id,))
        return rows[0]["revision"] if rows else -1

    def delete_kb(self, kb_id: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM chunks WHERE kb_id=?", (kb_id,))
            db.execute("DELETE FROM knowledge WHERE kb_id=?", (kb_id,))
            db.execute("DELETE FROM knowledge_bases WHERE id=?", (kb_id,))

    # --- documents ---
    def get_knowledge(self, knowledge_id: str) -> Knowledge | None:
        rows = self._query("SELECT body FROM knowledge WHERE id=?", (knowledge_id,))
        return Knowledge.model_validate_json(rows[0]["body"]) if rows else None

    def get_knowledge_many(self, ids: Iterable[str]) -> dict[str, Knowledge]:
        ids = list(dict.fromkeys(ids))
        out: dict[str, Knowledge] = {}
        for start in range(0, len(ids), 500):
            batch = ids[start : start + 500]
            rows = self._query(f"SELECT body FROM knowledge WHERE id IN ({','.join('?' * len(batch))})", batch)
            out.update((k.id, k) for k in (Knowledge.model_validate_json(r["body"]) for r in rows))
        return out

    def find_knowledge(self, kb_id: str, source: str) -> Knowledge | None:
        rows = self._query("SELECT body FROM knowledge WHERE kb_id=? AND source=?", (kb_id, source))
        return Knowledge.model_validate_json(rows[0]["body"]) if rows else None

    def list_knowledge(self, kb_id: str) -> list[Knowledge]:
        rows = self._query("SELECT body FROM knowledge WHERE kb_id=? ORDER BY source", (kb_id,))
        return [Knowledge.model_validate_json(r["body"]) for r in rows]

    def source_text(self, knowledge_id: str) -> str | None:
        rows = self._query("SELECT source_text FROM knowledge WHERE id=?", (knowledge_id,))
        return rows[0]["source_text"] if rows else None

    def chunk_ids_of(self, knowledge_ids: Iterable[str]) -> list[str]:
        ids = list(knowledge_ids)
        out: list[str] = []
        for start in range(0, len(ids), 500):
            batch = ids[start : start + 500]
            rows = self._query(f"SELECT id FROM chunks WHERE knowledge_id IN ({','.join('?' * len(batch))})", batch)
            out.extend(r["id"] for r in rows)
        return out

    def restricted_documents(self, kb_ids: list[str]) -> dict[str, AccessRule]:
        marks = ",".join("?" * len(kb_ids))
        rows = self._query(f"SELECT id, access FROM knowledge WHERE kb_id IN ({marks}) AND access != ''", kb_ids) if kb_ids else []
        return {row["id"]: stored_rule(row["access"]) for row in rows}

    def access_stamps(self, kb_ids: list[str]) -> dict[str, tuple[int, int]]:
        marks = ",".join("?" * len(kb_ids))
        rows = self._query(f"SELECT id, revision, access_revision FROM knowledge_bases WHERE id IN ({marks})", kb_ids) if kb_ids else []
        return {row["id"]: (row["revision"], row["access_revision"]) for row in rows}

    def set_knowledge_access(self, knowledge_id: str, rule: AccessRule) -> Knowledge | None:
        with self._tx() as db:
            row = db.execute("SELECT body, kb_id FROM knowledge WHERE id=?", (knowledge_id,)).fetchone()
            if row is None:
                return None
            knowledge = Knowledge.model_validate_json(row["body"])
            knowledge.access = rule
            db.execute("UPDATE knowledge SET body=?, access=? WHERE id=?", (knowledge.model_dump_json(), access_json(rule), knowledge_id))
            db.execute("UPDATE knowledge_bases SET access_revision = access_revision + 1 WHERE id=?", (row["kb_id"],))
        return knowledge

    def replace_documents(self, kb_id: str, docs: list[tuple[Knowledge, list[ChunkRecord], str]]) -> None:
        """Swap in new chunks for each (document, chunks, source text) in one transaction."""
        with self._tx() as db:
            for knowledge, chunks, source_text in docs:
                db.execute("DELETE FROM chunks WHERE knowledge_id=?", (knowledge.id,))
                knowledge.chunk_count = sum(1 for c in chunks if c.indexed)
                knowledge.updated_at = utcnow()
                db.execute("INSERT OR REPLACE INTO knowledge (id, kb_id, source, body, source_text, access) VALUES (?, ?, ?, ?, ?, ?)",
                           (knowledge.id, kb_id, knowledge.source, knowledge.model_dump_json(), source_text,
                            access_json(knowledge.access)))
                db.executemany(
                    "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(c.id, kb_id, knowledge.id, c.chunk_index, c.chunk_type.value, c.content, c.parent_id, c.pre_id,
                      c.next_id, json.dumps(c.metadata, ensure_ascii=False), " ".join(c.tokens), int(c.indexed))
                     for c in chunks],
                )
            db.execute("UPDATE knowledge_bases SET revision = revision + 1 WHERE id=?", (kb_id,))

    def delete_knowledge(self, kb_id: str, knowledge_ids: list[str]) -> None:
        with self._tx() as db:
            for knowledge_id in knowledge_ids:
                db.execute("DELETE FROM chunks WHERE knowledge_id=?", (knowledge_id,))
                db.execute("DELETE FROM knowledge WHERE id=?", (knowledge_id,))
            db.execute("UPDATE knowledge_bases SET revision = revision + 1 WHERE id=?", (kb_id,))

    # --- chunks ---
    def get_chunks(self, ids: Iterable[str]) -> dict[str, ChunkRecord]:
        ids = list(dict.fromkeys(ids))
        out: dict[str, ChunkRecord] = {}
        for start in range(0, len(ids), 900):
            batch = ids[start : start + 900]
            rows = self._query(f"SELECT * FROM chunks WHERE id IN ({','.join('?' * len(batch))})", batch)
            out.update((r["id"], _row_to_chunk(r)) for r in rows)
        return out

    def documents_showing(self, handle: str) -> list[str]:
        """Documents with a chunk whose ImageInfo (`metadata.images[].url`) is `handle`: whoever may
        read one of them may see that image. Only ImageInfo counts, never text: ingestion alone
        writes it, from the image's own bytes, while a document's text (or title) is whatever its
        uploader typed. A scan, not an index: images are fetched when a page shows an answer."""
        rows = self._query(
            "SELECT DISTINCT knowledge_id FROM chunks WHERE instr(metadata, ?) > 0 AND EXISTS "
            "(SELECT 1 FROM json_each(chunks.metadata, '$.images') AS image WHERE json_extract(image.value, '$.url') = ?)",
            (handle, handle),
        )
        return [row[0] for row in rows]

    def chunks_of(self, knowledge_id: str) -> list[ChunkRecord]:
        rows = self._query("SELECT * FROM chunks WHERE knowledge_id=? ORDER BY chunk_type, chunk_index", (knowledge_id,))
        return [_row_to_chunk(r) for r in rows]

    def keyword_corpus(self, kb_id: str) -> KeywordCorpus:
        with self._lock:
            revision = self.kb_revision(kb_id)
            rows = self._conn.execute(
                "SELECT id, knowledge_id, tokens FROM chunks WHERE kb_id=? AND indexed=1 ORDER BY rowid", (kb_id,)
            ).fetchall()
        return KeywordCorpus(revision, [r[0] for r in rows], [r[1] for r in rows], [r[2].split() for r in rows])
