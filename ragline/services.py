"""The long-lived services that stages call, built once per process from settings.

A host (CLI, HTTP service, a test) may hand its own `Services` to a run through
`RunContext.services`; otherwise stages use the process-wide default, built on first use so a
pure-chat run never opens the knowledge stores.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ragline.models.rerank import Reranker
from ragline.settings import get_settings

if TYPE_CHECKING:
    from ragline.retrieval.stack import RetrievalStack


@dataclass
class Services:
    retrieval_factory: Any = None  # () -> RetrievalStack, called once
    _retrieval: RetrievalStack | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def retrieval(self) -> RetrievalStack:
        with self._lock:
            if self._retrieval is None:
                from ragline.retrieval.stack import RetrievalStack

                factory = self.retrieval_factory or RetrievalStack.from_settings
                self._retrieval = factory()
            return self._retrieval

    def reranker(self, model: str | None) -> Reranker | None:
        """The request's rerank model, else the configured one; None means no reranker (the offline default)."""
        settings = get_settings()
        name = model or settings.rerank_model
        if not name:
            return None
        if name == settings.rerank_model:
            return Reranker(name, settings.rerank_api_base, settings.rerank_api_key)
        return Reranker(name)


_default: Services | None = None
_default_lock = threading.Lock()


def default_services() -> Services:
    global _default
    with _default_lock:
        if _default is None:
            _default = Services()
        return _default


def services_of(runtime: Any) -> Services:
    context = getattr(runtime, "context", None)
    services = getattr(context, "services", None)
    return services if isinstance(services, Services) else default_services()
