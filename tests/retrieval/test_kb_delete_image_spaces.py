"""Deleting a knowledge base drops its image-vector spaces too (seed: image vector rows are cleaned
with the knowledge base), on both backends: Chroma collections (embedded) and Redis indexes with
their dimension keys (shared). A space an earlier image model filled goes as well; another KB's stays."""

from __future__ import annotations

import pytest

from ragline.contracts.access import Principal
from ragline.retrieval.image_recall import image_space
from ragline.retrieval.redis_vectors import RedisVectorStore, dimension_key
from ragline.retrieval.vector_store import VectorRow
from tests.image_vectors import image_kb, unit
from tests.vector_rows import vector_row_count, vectors_dropped


@pytest.fixture(params=["embedded", "shared"])
def redis_url(request: pytest.FixtureRequest) -> str | None:
    if request.param == "embedded":
        return None
    server = request.getfixturevalue("redis_server")
    server.flush()
    return server.url


async def test_deleting_a_kb_drops_the_image_spaces_of_every_image_model_and_no_other_kbs(tmp_path, scripted_model, redis_url):
    kb = await image_kb(tmp_path, scripted_model, redis_url=redis_url)
    vector = kb.stack.stores["default"].vector
    current = kb.indexer.space(kb.kb_id)
    assert current is not None and vector_row_count(vector, current) == 1
    earlier = image_space(kb.kb_id, "openai/an-earlier-image-model@http://old")  # the model was changed since
    await vector.upsert(earlier, [VectorRow("old", "old", "doc", unit(0.5))])
    other = kb.stack.knowledge_bases.create("other pictures")
    others = image_space(other.id, "openai/scripted-image-embed@x")
    await vector.upsert(others, [VectorRow("keep", "keep", "doc", unit(0.5))])
    orphan = image_space(kb.kb_id, "openai/a-model-whose-index-is-gone@x")
    if isinstance(vector, RedisVectorStore):  # a dimension key that outlived its index
        vector.client.set(dimension_key(orphan), 8)

    await kb.stack.knowledge_bases.delete(kb.kb_id, Principal.operator_of("default"))

    assert vectors_dropped(vector, current) and vectors_dropped(vector, earlier)
    assert vector_row_count(vector, others) == 1
    if isinstance(vector, RedisVectorStore):
        assert all(vector.client.get(dimension_key(space)) is None for space in (current, earlier, orphan))
    else:
        assert [c.name for c in vector.client.list_collections() if kb.kb_id in c.name] == []
