"""HybridSearch: cross-knowledge-base vector + keyword search with fusion, steps 1-9 of the seed.

Replaces internal/application/service/knowledgebase_search.go and its satellites
knowledgebase_search_storegroup.go (grouping), knowledgebase_search_fanout.go (concurrent,
all-or-nothing fan-out), knowledgebase_search_fusion.go and knowledgebase_search_faq.go.
Image recall (step 5) searches the image rows of the multimodal embedding model beside the text
rows when one is configured (retrieval/image_recall.py). Added to step 7: when
both sides answered, pseudo-relevance feedback refines the query vector from the best fused hits
and the vector side is searched once more (retrieval/feedback.py has the measurements).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict, defaultdict
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

from ragline import defaults
from ragline.contracts.access import ACCESS, AccessRule, Principal, audit, decide
from ragline.contracts.passages import ChunkType, MatchType, SearchResult
from ragline.models.embeddings import Embedder
from ragline.retrieval.catalog import Catalog, ChunkRecord
from ragline.retrieval.config import RetrievalConfig
from ragline.retrieval.embedders import EmbedderPool
from ragline.retrieval.errors import (
    EmbeddingModelMismatchError,
    KnowledgeBaseAccessError,
    KnowledgeBaseNotFoundError,
    StoreGroupError,
)
from ragline.retrieval.faq import deepening_depths, is_negative_for
from ragline.retrieval.feedback import feedback_chunks, rocchio
from ragline.retrieval.fusion import Fused, Hit, fuse, normalize_keyword_scores
from ragline.retrieval.image_recall import image_depth, image_space, vector_pool
from ragline.retrieval.keyword_index import KeywordIndex
from ragline.retrieval.tokenizer import tokenize
from ragline.retrieval.types import NOTHING_HIDDEN, Hidden, KnowledgeBase, KnowledgeBaseType, SearchParams
from ragline.retrieval.vector_store import VectorStore

log = logging.getLogger(__name__)
HIDDEN_CACHE_READERS = 64  # readers whose hidden documents are kept (each a set of up to the restricted documents' ids)


@dataclass(frozen=True)
class StoreEngines:
    """The engines of one store group: a vector store and the keyword index beside it."""

    vector: VectorStore
    keyword: KeywordIndex


@dataclass
class _Query:
    """What every store group receives: computed once per search (step 3)."""

    embedding: list[float] | None
    tokens: list[str]
    knowledge_ids: list[str] | None
    hidden: Hidden  # documents of these bases the reader may not read (and their chunks): never scored
    vector_threshold: float
    keyword_threshold: float
    image_embedding: list[float] | None = None  # the question in the multimodal model's space (image recall)
    image_model: str = ""  # that model's identity key: names the image rows' space


@dataclass
class _GroupResult:
    vector: list[Hit] = field(default_factory=list)
    keyword: list[Hit] = field(default_factory=list)
    vector_filled: bool = False


def normalized_match_count(match_count: int) -> int:
    """<= 0 (the JSON zero value when the caller sent nothing) means the default of 50."""
    return match_count if match_count > 0 else defaults.DEFAULT_RETRIEVAL_TOP_K


def retrieval_pool_size(match_count: int, kb_count: int) -> int:
    """Candidates per retriever: max(match*5, 50) per KB, capped at 500."""
    per_kb = max(match_count * defaults.OVERSAMPLE_FACTOR, defaults.MIN_OVERSAMPLE)
    return min(per_kb * max(kb_count, 1), defaults.MAX_RETRIEVAL_POOL_SIZE)


class HybridSearcher:
    """The one search entry point shared by the pipeline, the search API and agent tools."""

    def __init__(self, catalog: Catalog, stores: dict[str, StoreEngines], embedders: EmbedderPool,
                 settings: RetrievalConfig, image_embedder: Embedder | None = None) -> None:
        self.catalog = catalog
        self.stores = stores
        self.embedders = embedders
        self.settings = settings
        self.image_embedder = image_embedder  # the multimodal model; None: no image recall, nothing changes
        self._rules: dict[str, tuple[tuple[int, int] | None, dict[str, AccessRule]]] = {}  # per base: its stamp, its restricted documents
        self._hidden: OrderedDict[tuple[Any, ...], Hidden] = OrderedDict()  # (stamps, user, groups) -> what that reader may not read
        self._access_lock = threading.Lock()

    async def search(self, params: SearchParams) -> list[SearchResult]:
        kbs, hidden = await asyncio.to_thread(self.readable, params.knowledge_base_ids, params.who())  # step 1 (the catalog: a file or Redis)
        validate_same_embedding_model(kbs)
        match_count = normalized_match_count(params.match_count)  # step 2
        pool = retrieval_pool_size(match_count, len(kbs))
        query = await self._prepare_query(params, kbs, hidden)  # step 3
        groups = group_by_store(kbs)  # step 4
        fused, filled = await self._search_round(groups, query, pool)  # steps 6-7
        fused = await self._drop_negative_faq(fused, params.query, kbs)
        if kbs[0].type == KnowledgeBaseType.FAQ and filled:  # step 8: the primary KB is an FAQ base
            fused = await self._deepen_faq(groups, query, pool, fused, match_count, params.query)
        return await asyncio.to_thread(self._to_results, fused[:match_count], params.who(), kbs)  # step 9

    def authorize(self, kb_ids: list[str], who: Principal) -> list[KnowledgeBase]:
        found = self.catalog.get_kbs(list(dict.fromkeys(kb_ids)))
        kbs: list[KnowledgeBase] = []
        for kb_id in dict.fromkeys(kb_ids):
            kb = found.get(kb_id)
            if kb is None:
                raise KnowledgeBaseNotFoundError(f"knowledge base {kb_id} does not exist")
            if not kb.readable_by(who):
                raise KnowledgeBaseAccessError(f"knowledge base {kb_id} does not exist")  # as if missing: no existence leak
            kbs.append(kb)
        return kbs

    def readable(self, kb_ids: list[str], who: Principal) -> tuple[list[KnowledgeBase], Hidden]:
        """The bases `who` may search, and their documents `who` may not read. The bases' access
        stamps are read on every search, so a changed rule holds from the next question on; the
        restricted documents are read again only when a stamp moved (thousands of rows a search)."""
        kbs = self.authorize(kb_ids, who)
        if who.operator:  # every rule lets the service's own work in (and is no key's use)
            return kbs, NOTHING_HIDDEN
        ids = [kb.id for kb in kbs]
        audit(who, None, "search", knowledge_bases=ids)
        stamps = self.catalog.access_stamps(ids)  # before the rules: a change in between is read again next time
        key = (tuple((kb_id, stamps.get(kb_id)) for kb_id in ids), who.user_id, who.groups)
        with self._access_lock:
            cached = self._hidden.get(key)
            if cached is not None:
                self._hidden.move_to_end(key)
                return kbs, cached
        restricted: dict[str, AccessRule] = {}
        for kb_id in ids:
            rules = self._rules.get(kb_id)
            if rules is None or rules[0] != stamps.get(kb_id):
                rules = (stamps.get(kb_id), self.catalog.restricted_documents([kb_id]))
                self._rules[kb_id] = rules
            restricted.update(rules[1])
        refused: dict[int, bool] = {}  # per distinct rule (the catalog parses each once): a few rules, thousands of documents
        hidden = []
        for doc_id, rule in restricted.items():
            if id(rule) not in refused:
                refused[id(rule)] = rule.lets_in(who) is None
            if refused[id(rule)]:
                hidden.append(doc_id)
        with self._access_lock:
            # its chunks are read once, by the first store that asks (Chroma); the stamps key them too
            self._hidden[key] = answer = Hidden(hidden, self.catalog.chunk_ids_of) if hidden else NOTHING_HIDDEN
            while len(self._hidden) > HIDDEN_CACHE_READERS:
                self._hidden.popitem(last=False)
        return kbs, answer

    async def _prepare_query(self, params: SearchParams, kbs: list[KnowledgeBase], hidden: Hidden = NOTHING_HIDDEN) -> _Query:
        use_keyword = not params.disable_keyword and any(kb.type == KnowledgeBaseType.DOCUMENT for kb in kbs)
        embedding = None
        if not params.disable_vector:
            embedding = params.query_embedding or await self.embedders.for_kb(kbs[0]).embed_query(params.query)
        off = params.disable_recall_thresholds
        image_embedding = None
        if embedding is not None and self.image_embedder is not None and any(kb.type == KnowledgeBaseType.DOCUMENT for kb in kbs):
            image_embedding = await self.image_embedder.embed_query(params.query)
        return _Query(
            image_embedding=image_embedding,
            image_model=self.image_embedder.identity.key if self.image_embedder else "",
            embedding=embedding,
            tokens=tokenize(params.keyword_query or params.query) if use_keyword else [],
            knowledge_ids=params.knowledge_ids or None,
            hidden=hidden,
            vector_threshold=0.0 if off else params.vector_threshold,
            keyword_threshold=0.0 if off else params.keyword_threshold,
        )

    async def _search_round(self, groups: dict[tuple[str, str], list[KnowledgeBase]], query: _Query,
                            depth: int) -> tuple[list[Fused], bool]:
        """One retrieval round; also tells whether any vector list came back full."""
        results = await self._fan_out(groups, query, depth)
        keyword = [r.keyword for r in results]
        fused = fuse([r.vector for r in results], keyword, **fusion_args(self.settings))
        if query.embedding is not None and any(keyword) and any(r.vector for r in results):
            refined = await self._feedback_embedding(groups, query.embedding, fused)
            if refined is not None:  # vector side again with the refined query, fused with the same keyword lists
                again = await self._fan_out(groups, replace(query, embedding=refined, tokens=[]), depth)
                fused = fuse([r.vector for r in again], keyword, **fusion_args(self.settings))
        return fused, any(r.vector_filled for r in results)

    async def _feedback_embedding(self, groups: dict[tuple[str, str], list[KnowledgeBase]], embedding: list[float],
                                  fused: list[Fused]) -> list[float] | None:
        """Rocchio: the query vector moved toward the best fused document hits (retrieval/feedback.py)."""
        kbs = {kb.id: kb for members in groups.values() for kb in members}
        documents = {kb_id for kb_id, kb in kbs.items() if kb.type == KnowledgeBaseType.DOCUMENT}
        top = feedback_chunks(fused, documents, self.settings.feedback_docs)
        if not top or self.settings.feedback_weight <= 0:
            return None
        by_kb: dict[str, list[str]] = defaultdict(list)
        for hit in top:
            by_kb[hit.knowledge_base_id].append(hit.chunk_id)
        found: dict[str, list[float]] = {}
        try:
            for kb_id, ids in by_kb.items():  # a document chunk's vector row id is its chunk id
                found.update(await self.stores[kbs[kb_id].vector_store].vector.embeddings(kb_id, ids))
        except Exception as exc:  # feedback is a refinement: without it the first round's fusion stands
            log.warning("pseudo-relevance feedback skipped: %s", exc)
            return None
        vectors = [found[h.chunk_id] for h in top if h.chunk_id in found]
        return rocchio(embedding, vectors, self.settings.feedback_weight) if vectors else None

    async def _fan_out(self, groups: dict[tuple[str, str], list[KnowledgeBase]], query: _Query,
                       depth: int) -> list[_GroupResult]:
        """Step 6: one group directly; several concurrently (at most 4), each under a timeout."""
        if len(groups) == 1:
            (store, _), kbs = next(iter(groups.items()))
            results = [await self._search_group(store, kbs, query, depth)]
        else:
            gate = asyncio.Semaphore(defaults.MAX_CONCURRENT_STORE_GROUPS)

            async def bounded(store: str, kbs: list[KnowledgeBase]) -> _GroupResult:
                async with gate:
                    try:
                        return await asyncio.wait_for(self._search_group(store, kbs, query, depth),
                                                      self.settings.store_group_timeout_s)
                    except TimeoutError as exc:
                        raise StoreGroupError(f"store group {store} timed out") from exc

            tasks = [asyncio.create_task(bounded(s, kbs)) for (s, _), kbs in groups.items()]
            try:
                results = list(await asyncio.gather(*tasks))
            except BaseException:
                for task in tasks:  # all-or-nothing: one failed group cancels the rest
                    task.cancel()
                raise
        return results

    async def _search_group(self, store: str, kbs: list[KnowledgeBase], query: _Query, depth: int) -> _GroupResult:
        engines = self.stores.get(store)
        if engines is None:
            raise StoreGroupError(f"no vector store named {store} is configured")
        try:
            return await self._query_group(engines, kbs, query, depth)
        except StoreGroupError:
            raise
        except Exception as exc:  # any engine error fails the group, and the group fails the search
            raise StoreGroupError(f"store group {store} failed: {exc}") from exc

    async def _query_group(self, engines: StoreEngines, kbs: list[KnowledgeBase], query: _Query,
                           depth: int) -> _GroupResult:
        """Vector search for every KB (document KBs also in their image rows, 1.5x deep); keyword search
        for document KBs (FAQ KBs have no keyword index)."""
        doc_kbs = [kb for kb in kbs if kb.type == KnowledgeBaseType.DOCUMENT]
        image_kbs = doc_kbs if query.image_embedding is not None else []
        image_ids = {kb.id for kb in image_kbs}
        deeper = image_depth(depth) if image_kbs else depth
        vector_calls = [engines.vector.query(kb.id, query.embedding, deeper if kb.id in image_ids else depth, query.knowledge_ids, query.hidden)
                        for kb in kbs] if query.embedding is not None else []
        image_calls = [engines.vector.query(image_space(kb.id, query.image_model), query.image_embedding, deeper, query.knowledge_ids, query.hidden)
                       for kb in image_kbs if query.image_embedding is not None]
        keyword_calls = [engines.keyword.search(kb.id, query.tokens, depth, query.knowledge_ids, query.hidden)
                         for kb in doc_kbs if query.tokens]
        vector_answers, image_answers, keyword_answers = await asyncio.gather(
            asyncio.gather(*vector_calls), asyncio.gather(*image_calls), asyncio.gather(*keyword_calls))
        out = _GroupResult(vector_filled=any(a.filled for a in vector_answers))
        vector = [Hit(h.chunk_id, kb.id, h.similarity, MatchType.VECTOR)
                  for kb, a in zip(kbs, vector_answers) for h in a.hits]
        images = [Hit(h.chunk_id, kb.id, h.similarity, MatchType.VECTOR)  # a vector hit to fusion; relabelled in step 9
                  for kb, a in zip(image_kbs, image_answers) for h in a.hits]
        out.vector = vector_pool(vector, images, image_ids, query.vector_threshold, depth)
        raw = sorted(((h, kb.id) for kb, a in zip(doc_kbs, keyword_answers) for h in a), key=lambda p: -p[0].score)[:depth]
        scores = normalize_keyword_scores([h.score for h, _ in raw])
        out.keyword = [Hit(h.chunk_id, kb_id, s, MatchType.KEYWORD)
                       for (h, kb_id), s in zip(raw, scores) if s >= query.keyword_threshold]
        return out

    async def _drop_negative_faq(self, fused: list[Fused], query: str, kbs: list[KnowledgeBase]) -> list[Fused]:
        faq_kbs = {kb.id for kb in kbs if kb.type == KnowledgeBaseType.FAQ}
        faq_ids = [f.chunk_id for f in fused if f.knowledge_base_id in faq_kbs]
        if not faq_ids:
            return fused
        chunks = await asyncio.to_thread(self.catalog.get_chunks, faq_ids)  # the catalog: a file or Redis
        return [f for f in fused if f.chunk_id not in chunks or not is_negative_for(query, chunks[f.chunk_id].metadata)]

    async def _deepen_faq(self, groups: dict[tuple[str, str], list[KnowledgeBase]], query: _Query, depth: int,
                          fused: list[Fused], match_count: int, raw_query: str) -> list[Fused]:
        """Too few FAQ hits while a vector list came back full: double the depth, up to 5 rounds."""
        filled = True
        for deeper in deepening_depths(depth):
            if len(fused) >= match_count or not filled:
                break
            fused, filled = await self._search_round(groups, query, deeper)
            fused = await self._drop_negative_faq(fused, raw_query, [kb for members in groups.values() for kb in members])
        return fused

    def _to_results(self, fused: list[Fused], who: Principal, kbs: list[KnowledgeBase]) -> list[SearchResult]:
        """Step 9: attach chunk content and neighbours; hits the catalog no longer knows are dropped,
        and so is a document `who` may not read as the catalog has it now: one committed (a store's
        rows come first) or narrowed after the search read the restricted documents. Each result
        says which rule let its reader see it (`metadata.access`, carried to its reference)."""
        chunks = self.catalog.get_chunks(f.chunk_id for f in fused)
        docs = self.catalog.get_knowledge_many(c.knowledge_id for c in chunks.values())
        rules = {kb.id: kb.access for kb in kbs}
        out: list[SearchResult] = []
        for f in fused:
            chunk = chunks.get(f.chunk_id)
            doc = docs.get(chunk.knowledge_id) if chunk is not None else None
            if chunk is None or doc is None:  # doc None: deleted between the two reads
                continue
            decision = decide(rules.get(chunk.knowledge_base_id, AccessRule()), doc.access, who)
            if decision.allowed:
                out.append(_result(chunk, f, doc.title, decision.reason))
        return out


def _result(chunk: ChunkRecord, fused: Fused, title: str, access: str) -> SearchResult:
    # an image row is only ever found through its image vector: the rerank image rules and context images key on this
    match = MatchType.IMAGE_VECTOR if chunk.chunk_type == ChunkType.IMAGE_VECTOR else fused.match_type
    return SearchResult(
        id=chunk.id, content=chunk.content, score=fused.score, knowledge_id=chunk.knowledge_id,
        knowledge_base_id=chunk.knowledge_base_id, knowledge_title=title, chunk_index=chunk.chunk_index,
        chunk_type=chunk.chunk_type, match_type=match, pre_chunk_id=chunk.pre_id,
        next_chunk_id=chunk.next_id, parent_chunk_id=chunk.parent_id, vector_score=fused.vector_score,
        keyword_score=fused.keyword_score, metadata={**chunk.metadata, ACCESS: access},
    )


class FusionArgs(TypedDict):
    k: int
    vector_weight: float
    keyword_weight: float
    method: str
    vector_std_floor: float


def fusion_args(settings: RetrievalConfig) -> FusionArgs:
    """The configured fusion: z-score weights, or the seed's RRF k and weights."""
    if settings.fusion == "zscore":
        return {"k": settings.rrf_k, "vector_weight": settings.fusion_vector_weight,
                "keyword_weight": settings.fusion_keyword_weight, "method": "zscore",
                "vector_std_floor": settings.fusion_vector_std_floor}
    return {"k": settings.rrf_k, "vector_weight": settings.rrf_vector_weight,
            "keyword_weight": settings.rrf_keyword_weight, "method": "rrf", "vector_std_floor": 0.0}


def validate_same_embedding_model(kbs: list[KnowledgeBase]) -> None:
    keys = {kb.embedding_key for kb in kbs}
    if len(keys) > 1:
        names = ", ".join(f"{kb.name} ({kb.embedding_key})" for kb in kbs)
        raise EmbeddingModelMismatchError(f"knowledge bases use different embedding models: {names}")


def group_by_store(kbs: list[KnowledgeBase]) -> dict[tuple[str, str], list[KnowledgeBase]]:
    """Step 4: one group per (vector store, owning tenant), in request order."""
    groups: dict[tuple[str, str], list[KnowledgeBase]] = defaultdict(list)
    for kb in kbs:
        groups[(kb.vector_store, kb.tenant_id)].append(kb)
    return dict(groups)
