"""The composition root: what every host gets from one Services, whoever built the stores."""

from __future__ import annotations

from pathlib import Path

from ragline.models.embeddings import Embedder
from ragline.retrieval.config import RetrievalConfig
from ragline.retrieval.stack import RetrievalStack
from ragline.services import Services
from ragline.settings import Settings


def settings_with_images(tmp_path: Path, image_model: str | None) -> Settings:
    return Settings(data_dir=tmp_path, embedding_model="openai/text-embed", embedding_api_base="http://127.0.0.1:9/v1",
                    image_embedding_model=image_model, image_embedding_api_base="http://127.0.0.1:9/v1")


def own_stack(settings: Settings) -> RetrievalStack:
    """A stack a host (a test, a parent graph) builds itself and hands over as retrieval_factory."""
    return RetrievalStack.build(settings.data_dir, Embedder(model="openai/text-embed", cache=None), RetrievalConfig.from_settings(settings))


def test_a_stack_a_host_built_itself_gets_image_recall_when_a_multimodal_model_is_set(tmp_path: Path):
    settings = settings_with_images(tmp_path, "openai/image-embed")
    services = Services(settings, retrieval_factory=lambda: own_stack(settings))
    assert services.image_embedder is not None
    assert services.retrieval.searcher.image_embedder is services.image_embedder


def test_without_a_multimodal_model_no_stack_gets_image_recall(tmp_path: Path):
    settings = settings_with_images(tmp_path, None)
    assert Services(settings, retrieval_factory=lambda: own_stack(settings)).retrieval.searcher.image_embedder is None
    assert Services(settings).retrieval.searcher.image_embedder is None
