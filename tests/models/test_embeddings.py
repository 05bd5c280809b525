import numpy as np

from ragline.models.embeddings import Embedder, EmbeddingCache, EmbeddingModelIdentity


def _embedder(tmp_path):
    return Embedder("ragline/multilingual-e5-small", cache=EmbeddingCache(tmp_path / "cache.sqlite"), batch_size=2)


async def test_local_embeddings_rank_the_matching_passage_first_in_english_and_chinese(tmp_path):
    embedder = _embedder(tmp_path)
    passages = await embedder.embed_passages(["Paris is the capital of France.", "巴黎是法国的首都。", "Bananas are yellow."])
    query = np.array(await embedder.embed_query("法国的首都是哪里？"))
    scores = np.array(passages) @ query
    assert scores.argmax() in (0, 1) and scores[2] < min(scores[0], scores[1])
    assert len(query) == 384


async def test_cached_passages_are_never_embedded_twice(tmp_path, monkeypatch):
    embedder = _embedder(tmp_path)
    calls = []
    original = embedder._call

    async def counting(texts, role):
        calls.append(list(texts))
        return await original(texts, role)

    monkeypatch.setattr(embedder, "_call", counting)
    first = await embedder.embed_passages(["one", "two", "one"])
    again = await _embedder(tmp_path).embed_passages(["two", "one"])
    assert calls == [["one", "two"]]
    assert again == [first[1], first[0]]


async def test_progress_reports_every_batch(tmp_path):
    seen = []
    await _embedder(tmp_path).embed_passages(["a", "b", "c"], progress=lambda done, total: seen.append((done, total)))
    assert seen[0] == (0, 3) and seen[-1] == (3, 3)


def test_model_identity_is_name_plus_base_url():
    assert EmbeddingModelIdentity("m", "http://x").key != EmbeddingModelIdentity("m").key


def test_the_local_embedder_reads_a_bounded_prefix_of_any_text():
    """One giant text cannot hold the embedder (and every search waiting for it) for an hour."""
    from ragline import defaults
    from ragline.models.local_engine import EMBEDDING_ENGINE

    prefix = "The outdoor sensor runs on two lithium AA cells. " * 60
    giant = prefix[: defaults.LOCAL_EMBEDDING_MAX_CHARS] + "x" * 200_000
    whole, head = EMBEDDING_ENGINE.encode([giant, prefix[: defaults.LOCAL_EMBEDDING_MAX_CHARS]], is_query=False)
    assert whole == head
