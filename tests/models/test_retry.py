"""models/retry.py: litellm's first import, from a coroutine, never runs on the event loop."""

from __future__ import annotations

import sys
import threading
import types

from ragline.models import retry


async def test_litellm_not_yet_imported_is_imported_in_a_thread_not_on_the_loop(monkeypatch):
    """A worker's first embedding waited on the event loop for litellm's import (behind the warm-up
    thread's import lock): no heartbeat went out for a minute on a loaded host, and its job was
    taken for dead."""
    importers: list[threading.Thread] = []
    imported = types.ModuleType("litellm")

    def import_litellm() -> types.ModuleType:
        importers.append(threading.current_thread())
        imported.suppress_debug_info = True  # type: ignore[attr-defined]
        return imported

    monkeypatch.setattr(retry, "import_litellm", import_litellm)
    half_imported = types.ModuleType("litellm")  # what sys.modules holds while another thread imports it
    monkeypatch.setitem(sys.modules, "litellm", half_imported)
    assert await retry.litellm_module() is imported
    assert importers and importers[0] is not threading.main_thread()
    monkeypatch.setitem(sys.modules, "litellm", imported)
    assert await retry.litellm_module() is imported and len(importers) == 1  # once imported, no thread at all
