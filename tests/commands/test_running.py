"""How a command runs: Ctrl-C ends it at once, after its own cleanup, even while a worker thread
still computes (asyncio.run would wait for the thread)."""

import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGINT delivery to a child is POSIX")

BUSY_COMMAND = """
import asyncio, sys, time
from ragline.commands.running import run

async def main():
    try:
        print("started", flush=True)
        await asyncio.to_thread(time.sleep, 60)  # a model call computing in a worker thread
    finally:
        print("cleanup ran", flush=True)

run(main())
"""


def test_ctrl_c_runs_the_commands_cleanup_and_ends_without_waiting_for_a_busy_thread():
    child = subprocess.Popen([sys.executable, "-c", BUSY_COMMAND], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "started"
    time.sleep(0.2)  # inside the thread's sleep
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=30)  # the thread sleeps 60 s: ending before means it was not waited for
    assert child.returncode == 130
    assert "cleanup ran" in out
    assert err.strip() == "ragline: interrupted"


def test_a_command_that_finishes_returns_its_value():
    from ragline.commands.running import run

    async def answer() -> int:
        return 42

    assert run(answer()) == 42
