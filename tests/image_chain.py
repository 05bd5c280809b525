"""Services for the image-vector chain end to end (issue 14): a multimodal embedding model, a text
rerank model and a vision answering model, all the scripted server (tests/image_vectors.py scripts
the vectors: only the picture's own vector is close to the question)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragline.models.embeddings import Embedder
from ragline.retrieval.stack import RetrievalStack
from ragline.services import Services
from tests.api.live import embedded_services, memory_settings
from tests.image_vectors import script_vectors
from tests.ingestion.image_fixtures import chart_image, pdf_with_image, png_of
from tests.scripted_model import ScriptedModel

REPORT_TEXT = "The wind vane points north. The battery lasts two years."
CHART_PNG = png_of(chart_image(""))  # bars only: no text for OCR, found by its vector alone


def report_pdf() -> bytes:
    return pdf_with_image(REPORT_TEXT, chart_image(""))


def script_chain_vectors(scripted: ScriptedModel) -> None:
    """The chart at 0.6 to the question: above the image recall bar (min(0.5, 0.1)) and the rerank
    rule's max(0.5, 0.25); every text at 0. Call it after the scripted server was reset."""
    script_vectors(scripted, 0.6)


def image_chain_settings(scripted: ScriptedModel, root: Path, **overrides: Any) -> Any:
    chain = {"data_dir": root, "vision_models": ["openai/scripted"], "image_embedding_model": "openai/scripted-image-embed",
             "image_embedding_api_base": scripted.base_url, "image_embedding_api_key": "x",
             "rerank_model": "cohere/scripted-rerank", "rerank_api_base": scripted.root_url, "rerank_api_key": "x"}
    return memory_settings(scripted, **{**chain, **overrides})


def image_chain_services(root: Path, settings: Any, scripted: ScriptedModel) -> Services:
    """Services over files under `root`, text embedded by the scripted server too. The stack factory
    hands the searcher the image embedder, as Services does when it opens the stack itself."""
    text_model = Embedder("openai/scripted-embed", api_base=scripted.base_url, api_key="x", cache=None)
    services = embedded_services(root, settings, text_model)
    build = services.retrieval_factory
    assert build is not None

    def stack() -> RetrievalStack:
        opened = build()
        opened.searcher.image_embedder = services.image_embedder
        return opened

    services.retrieval_factory = stack
    return services
