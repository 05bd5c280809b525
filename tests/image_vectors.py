"""A knowledge stack with image vectors, on the scripted provider (tests of image recall share it).

Text and images are embedded by the scripted server: the question maps to e1, every text to e3
(similarity 0 to the question), and the stored image to a vector whose similarity to the
question is `image_similarity`, so the image can be found only through its own vector.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ragline.ingestion.image_chunks import ImageIndexer
from ragline.ingestion.images import ExtractedImage, ImageStore, inspect_image, markdown_reference
from ragline.ingestion.ocr import OcrEngine
from ragline.ingestion.service import IngestionService, TextDocument
from ragline.models.embeddings import Embedder
from ragline.retrieval.config import RetrievalConfig
from ragline.retrieval.stack import RetrievalStack
from tests.ingestion.image_fixtures import chart_image, png_of
from tests.scripted_model import Reply, ScriptedModel

QUESTION = "which picture shows rainfall bars"
DIMS = 8


def unit(similarity: float) -> list[float]:
    """A vector at `similarity` to e1."""
    return [similarity, math.sqrt(max(0.0, 1 - similarity * similarity))] + [0.0] * (DIMS - 2)


class NoTextOcr(OcrEngine):
    """A picture with no readable text: OCR finds nothing (and loads no model)."""

    def read(self, data: bytes) -> str:
        return ""


@dataclass
class ImageKb:
    stack: RetrievalStack
    ingestion: IngestionService
    indexer: ImageIndexer
    kb_id: str
    image: ExtractedImage


def script_vectors(scripted: ScriptedModel, image_similarity: float) -> None:
    def vectors(text: str) -> list[float]:
        if text.startswith("data:image/"):
            return unit(image_similarity)
        if QUESTION in text:
            return unit(1.0)
        return [0.0, 0.0, 1.0] + [0.0] * (DIMS - 3)

    scripted.on_embedding(Reply(vectors=vectors))


async def image_kb(tmp_path: Path, scripted: ScriptedModel, image_similarity: float = 0.3, redis_url: str | None = None) -> ImageKb:
    """A KB holding one document: two lines of text around a chart image with no text in it (files,
    or the shared Redis backend at `redis_url`)."""
    script_vectors(scripted, image_similarity)
    text_model = Embedder("openai/scripted-embed", api_base=scripted.base_url, api_key="x", cache=None)
    image_model = Embedder("openai/scripted-image-embed", api_base=scripted.base_url, api_key="x", cache=None, batch_size=4)
    stack = RetrievalStack.build(tmp_path / "stack", text_model, RetrievalConfig(redis_url=redis_url, chroma_url=None))
    stack.searcher.image_embedder = image_model
    indexer = ImageIndexer(ImageStore(tmp_path / "images"), ocr=NoTextOcr(), embedder=image_model)
    ingestion = IngestionService(stack, images=indexer)
    kb = stack.knowledge_bases.create("pictures")  # the stack's model: openai/scripted-embed
    image = inspect_image(png_of(chart_image("")), "chart.png", alt="chart")
    text = f"The wind vane points north.\n\n{markdown_reference(image)}\n\nThe battery lasts two years."
    await ingestion.ingest_documents(kb.id, [TextDocument(text, "Station manual", "manual.md", "md", images=[image])])
    return ImageKb(stack, ingestion, indexer, kb.id, image)
