"""Merge step 4 image chains and Markdown image pruning (seed: resolveParentChunks, PruneMarkdownImagesByImageInfo)."""

from __future__ import annotations

from ragline.contracts.passages import ChunkType, MatchType, SearchResult
from ragline.retrieval.catalog import ChunkRecord
from ragline.retrieval.merge import remove_partial_overlaps, resolve_parents
from ragline.retrieval.merge_images import prune_markdown_images

A = "local://images/" + "a" * 64 + ".png"
B = "local://images/" + "b" * 64 + ".png"
PARENT = f"Chapter on rain.\n\n![gauge]({A})\n\nThe gauge sits on the roof.\n\n![other]({B})\n\nSee https://x.test/c.png too."


class Catalog:
    """The one lookup merge makes, counted."""

    def __init__(self, chunks: list[ChunkRecord]) -> None:
        self.chunks = {c.id: c for c in chunks}
        self.calls = 0

    def get_chunks(self, ids):
        self.calls += 1
        return {i: self.chunks[i] for i in ids if i in self.chunks}


def _catalog() -> Catalog:
    return Catalog([ChunkRecord("p1", "kb", "d", 0, PARENT, ChunkType.PARENT, indexed=False),
                    ChunkRecord("t1", "kb", "d", 0, f"![gauge]({A})\n\nThe gauge sits on the roof.", parent_id="p1")])


def _image_hit(kind: ChunkType = ChunkType.IMAGE_OCR, content: str = "RAIN 12 mm", match: MatchType = MatchType.VECTOR) -> SearchResult:
    return SearchResult(id="i1", content=content, score=0.8, knowledge_id="d", knowledge_base_id="kb", chunk_type=kind,
                        match_type=match, metadata={"text_chunk_id": "t1", "images": [{"url": A, "ocr_text": content}]})


def _text_hit(score: float = 0.9) -> SearchResult:
    return SearchResult(id="t1", content="The gauge sits on the roof.", score=score, knowledge_id="d",
                        knowledge_base_id="kb", parent_chunk_id="p1")


def test_an_image_hit_chains_to_its_text_chunk_and_that_chunks_parent_keeping_its_ocr():
    [merged] = resolve_parents([_image_hit()], _catalog())
    assert merged.content.startswith("Chapter on rain.") and merged.content.endswith("RAIN 12 mm")
    assert merged.metadata["parent_chunk_id"] == "p1" and merged.metadata["child_content"] == "RAIN 12 mm"


def test_pruning_keeps_found_images_and_remote_links_and_cuts_stored_images_nobody_found():
    [merged] = resolve_parents([_image_hit()], _catalog())
    assert A in merged.content and B not in merged.content
    assert "https://x.test/c.png" in merged.content


def test_a_text_hit_alone_shows_no_stored_image_of_its_parent():
    [merged] = resolve_parents([_text_hit()], _catalog())
    assert merged.content.startswith("Chapter on rain.") and A not in merged.content and B not in merged.content


def test_an_image_whose_passage_came_with_another_hit_stays_short_under_its_link():
    text, image = resolve_parents([_text_hit(), _image_hit()], _catalog())
    assert A in text.content  # the image was found: its reference stays in the passage
    assert image.content == f"![]({A})\nRAIN 12 mm"


def test_the_grandparent_is_looked_up_only_for_an_image_hit():
    catalog = _catalog()
    resolve_parents([SearchResult(id="x", content="plain", score=1, knowledge_id="d", knowledge_base_id="kb")], catalog)
    assert catalog.calls == 0
    resolve_parents([_image_hit()], catalog)
    assert catalog.calls == 2  # the text chunk, then its parent


def test_a_dropped_image_vector_hit_marks_the_passage_that_stays():
    text = _text_hit(0.95).model_copy(update={"content": PARENT})
    image = _image_hit(ChunkType.IMAGE_VECTOR, "", MatchType.IMAGE_VECTOR).model_copy(update={"content": PARENT, "id": "i2"})
    [kept] = remove_partial_overlaps([text, image])
    assert kept.id == "t1" and kept.metadata["image_vector_match"] == "true"
    assert [i["url"] for i in kept.metadata["images"]] == [A]
    assert A in prune_markdown_images([kept])[0].content  # its image is still linked
