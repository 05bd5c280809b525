"""How many cores the local model should use right now, on a machine it may share.

llama.cpp's threads wait for each other at every step, so one thread more than there are free
cores makes all of them wait: on two cores with one busy process beside it, two threads prefill
at 80 tokens/s and decode at 13, one thread at 119 and 29 (benchmarks/local_threads.py). On an
idle machine two threads win (210 and 42). So before each call the engine looks at how busy the
machine was over the last moment, from /proc/stat, and takes the cores that were free.
"""

from __future__ import annotations

import os
import time

SAMPLE_S = 0.05  # long enough to see a busy core, short beside a prefill of seconds
BUSY_CORE_SHARE = 0.5  # a core busy at least half the sample counts as taken


def _cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of all cores since boot; None where /proc/stat is missing."""
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = [int(value) for value in handle.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def free_cores(cores: int | None = None, sample_s: float = SAMPLE_S) -> int:
    """Cores not taken by other work during a short sample; at least 1, at most `cores`."""
    cores = cores or os.cpu_count() or 1
    before = _cpu_times()
    time.sleep(sample_s)
    after = _cpu_times()
    if before is None or after is None or after[1] <= before[1]:
        return cores
    busy = (after[0] - before[0]) / (after[1] - before[1]) * cores  # cores' worth of busy time
    taken = int(busy + 1 - BUSY_CORE_SHARE)  # a core busy at least half the sample is taken
    return max(1, min(cores, cores - taken))


def advertises_amx(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether the CPU reports Intel AMX tiles (the `amx_tile` flag); False where it cannot tell."""
    try:
        with open(cpuinfo, encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return "amx_tile" in line.split()
    except OSError:
        pass
    return False
