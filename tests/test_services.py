"""The composition root: what every host gets from one Services, whoever built the stores."""

from __future__ import annotations

from pathlib import Path

from ragline.models.embeddings import Embedder
from ragline.retrieval.config import RetrievalConfig
from ragline.retrieval.stack import RetrievalStack
from ragline.service.backend import open_backend
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


WARM_UP = """
import sys
from ragline.services import Services
from ragline.settings import Settings
settings = Settings(**{key: value for key, value in (arg.split("=", 1) for arg in sys.argv[1:])})
services = Services(settings)
thread = services.start_warm_up()
if thread is not None:
    thread.join(120)
print(services.uses_litellm(), "litellm" in sys.modules)
"""


def warm_up_in_a_fresh_process(tmp_path: Path, *settings: str) -> str:
    """What a fresh process imported after the warm-up (this test process imported litellm long ago)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", WARM_UP, f"data_dir={tmp_path}", *settings], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_deployment_on_litellm_imports_it_at_start_up_off_the_event_loop(tmp_path: Path):
    assert warm_up_in_a_fresh_process(tmp_path, "chat_model=deepseek/deepseek-chat") == "True True"


def test_the_embedded_default_and_a_directly_read_server_never_import_litellm(tmp_path: Path):
    assert warm_up_in_a_fresh_process(tmp_path) == "False False"
    assert warm_up_in_a_fresh_process(tmp_path, "chat_model=openai/qwen", "chat_api_base=http://127.0.0.1:9/v1") == "False False"


async def test_the_host_owns_the_run_backend_it_opens_on_the_root_and_closes(tmp_path: Path):
    services = Services(Settings(data_dir=tmp_path, checkpointer="sqlite", stream_manager="memory", redis_url=None))
    assert [name for name in dir(services) if "backend" in name or "compiled" in name] == []  # the root holds knowledge and models only
    async with open_backend(services) as backend:
        assert (tmp_path / "service" / "checkpoints.sqlite").exists()
        assert backend.graph is not None and backend.agent_graph is not None
    async with open_backend(services) as reopened:  # closed with its host: the next host opens a fresh one
        assert reopened is not backend
    await services.aclose()
