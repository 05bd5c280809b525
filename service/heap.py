"""The heap of a long-running server: keep full garbage collections short, so SSE frames keep flowing.

CPython's oldest generation holds every object that survived two collections: a server's modules,
compiled graphs, litellm's model tables, pydantic schemas — over a million objects. A full (gen 2)
collection traverses all of them, and while it runs no frame goes out on any stream: with 100
concurrent answers on 2 busy cores, gen 2 pauses of 100-385 ms made most of a 660 ms p99 event
latency (benchmarks/load.py). `gc.freeze()` moves every object alive at that moment into a
permanent generation that the collector skips.

The freezer does it at startup, and once more the first time the process goes idle after a run
(the first answer imports the model clients, which are loaded lazily), each time after a full
collection so that no garbage is frozen. Frozen objects are still freed by reference counting;
only reference cycles among them would never be collected, which is why it freezes at those
moments only, and not as the process goes on.

Freezing leaves the oldest generation nearly empty, and CPython collects it whenever the objects
promoted since its last collection exceed a quarter of it: under load, every in-flight run's state.
With CPython's thresholds (700, 10, 10) that was a full collection about every second, 44-140 ms
each, all of them finding nothing to free (500 streams, benchmarks/load.py). The server raises the
youngest threshold to defaults.GC_THRESHOLDS: a run's short-lived objects die by reference counting
before a collection sees them, far fewer are promoted, and the full collections vanish from a burst.
Only garbage in reference cycles waits longer, and it is bounded by the same thresholds.
"""

from __future__ import annotations

import gc
import logging
import time

from ragline import defaults

log = logging.getLogger(__name__)


def freeze() -> None:
    """Collect everything collectable, then move the survivors out of the collector's way."""
    started = time.perf_counter()
    gc.collect()
    gc.freeze()
    log.debug("froze %d objects in %.0f ms", gc.get_freeze_count(), (time.perf_counter() - started) * 1000)


class HeapFreezer:
    def __init__(self, idle_freezes: int = 1) -> None:
        self.idle_freezes_left = idle_freezes

    def startup(self) -> None:
        gc.set_threshold(*defaults.GC_THRESHOLDS)
        freeze()

    def idle(self) -> None:
        """The process has no run in flight: freeze what the first runs loaded, a bounded number of times."""
        if self.idle_freezes_left > 0:
            self.idle_freezes_left -= 1
            freeze()
