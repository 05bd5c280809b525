"""Benchmarks that cannot rot (issue 57): every script under benchmarks/ runs at its `--smoke` size,
in a subprocess with a timeout, and must exit 0 having printed its table.

A script is a benchmarks/*.py file with an `if __name__ == "__main__":` block, found by reading the
files (nothing kept by hand here: a new script is run as soon as it exists). Modules without that
block (harness.py, load_servers.py, ...) are helpers, run through the scripts that import them. A
helper that runs as a process of its own (stamped_model.py, floor_relay.py) names the script that
starts it in a module-level `STARTED_BY`, and is run through that script.

The scripts run a few at a time (SMOKE_PARALLEL, default 3: most of their time is spent waiting on
servers they start, and the machine has 2 cores), the longest first (their last times are kept in
pytest's cache), each with its own data directory and the test session's local models. Select them with `-m benchmark_smoke`, leave them out with
`-m "not benchmark_smoke"`; `pytest tests/test_benchmarks.py -k sse_latency` runs one. Nothing here
times a benchmark: each prints its own figures, and the slowest runs are listed at the end
(`-rA` shows every script's output).
"""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
TIMEOUT_S = float(os.environ.get("SMOKE_TIMEOUT_S", "150"))  # one script, whatever the machine's load
PARALLEL = int(os.environ.get("SMOKE_PARALLEL", "3"))
SECONDS_KEY = "benchmark_smoke/seconds"  # pytest's cache: each script's last time, to start the longest first

def is_table_row(line: str) -> bool:
    """A Markdown table row, or a column-aligned one: three cells or more, apart by 2+ spaces."""
    return line.count("|") >= 3 or len(re.split(r"\s{2,}", line.strip())) >= 3


def _is_main_guard(node: ast.stmt) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and isinstance(node.test.left, ast.Name)
            and node.test.left.id == "__name__" and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in node.test.comparators))


def _started_by(tree: ast.Module) -> str | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "STARTED_BY" for t in node.targets):
            assert isinstance(node.value, ast.Constant) and isinstance(node.value.value, str), "STARTED_BY names a script: a string"
            return node.value.value
    return None


def discover(folder: Path = BENCHMARKS) -> tuple[list[str], dict[str, str]]:
    """(the scripts, {helper process: the script that starts it}) under `folder`."""
    scripts, helpers = [], {}
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        if not any(_is_main_guard(node) for node in tree.body):
            continue
        starter = _started_by(tree)
        if starter is None:
            scripts.append(path.name)
        else:
            helpers[path.name] = starter
    return scripts, helpers


SCRIPTS, HELPERS = discover()


@dataclass
class SmokeRun:
    script: str
    returncode: int | None  # None: killed at the timeout
    seconds: float
    stdout: str
    stderr: str


def run_smoke(script: str, data_dir: Path) -> SmokeRun:
    """`python benchmarks/<script> --smoke` in a process group of its own (killed whole at the timeout,
    and once it ends: a server it leaked must not outlive it)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "RAGLINE_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, str(BENCHMARKS / script), "--smoke"], cwd=ROOT, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=TIMEOUT_S)
        returncode: int | None = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        returncode = None
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return SmokeRun(script, returncode, time.monotonic() - started, stdout, stderr)


def _prepare_local_model() -> None:
    """Assemble the local chat model into the session's models directory once, before the scripts
    start: several would otherwise each assemble (and hash) the 1.1 GB file at the same time."""
    try:
        from ragline.models.gguf import assemble
        from ragline.models.local_engine import CHAT_MODELS
        from ragline.settings import get_settings
    except ImportError:  # without the `local` extra: the scripts that need the model fail and say why
        return
    settings = get_settings()
    if settings.chat_model in CHAT_MODELS:
        assemble(CHAT_MODELS[settings.chat_model], settings.models_dir)


@pytest.fixture(scope="session")
def smoke_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[SmokeRun]]]:
    """Every selected script's run, started a few at a time when the first smoke test asks."""
    selected = [item.callspec.params["script"] for item in request.session.items
                if getattr(item, "originalname", "") == "test_benchmark_smoke" and hasattr(item, "callspec")]
    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider
    last = cache.get(SECONDS_KEY, {}) if cache else {}
    selected.sort(key=lambda script: -last.get(script, float("inf")))  # a script never timed first, then the longest
    _prepare_local_model()
    root = tmp_path_factory.mktemp("benchmark-smoke")
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=PARALLEL, thread_name_prefix="smoke") as pool:
        runs = {script: pool.submit(run_smoke, script, root / Path(script).stem) for script in selected}
        yield runs
        for future in runs.values():
            future.cancel()
    finished = [future.result() for future in runs.values() if future.done() and not future.cancelled()]
    if cache:
        cache.set(SECONDS_KEY, {**last, **{run.script: round(run.seconds, 1) for run in finished}})
    slowest = sorted(finished, key=lambda run: run.seconds, reverse=True)
    summary = ", ".join(f"{run.script} {run.seconds:.1f} s" for run in slowest[:10])
    line = (f"benchmark smoke runs: {len(finished)} in {time.monotonic() - started:.1f} s wall, {PARALLEL} at a time; "
            f"slowest: {summary}")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():  # shown whatever the capture mode, not only with -rA
            reporter.write_line("\n" + line)
    else:
        print(line)


def test_scripts_are_found() -> None:
    """The discovery sees the scripts, and every helper process names a script that exists and starts it."""
    assert len(SCRIPTS) >= 20, SCRIPTS
    assert {"sse_latency.py", "load.py", "door_load.py"} <= set(SCRIPTS)
    for helper, starter in HELPERS.items():
        assert starter in SCRIPTS, f"{helper}: STARTED_BY names {starter}, which is not a benchmark script"


def test_a_new_script_is_found_and_a_helper_is_not(tmp_path: Path) -> None:
    (tmp_path / "new_bench.py").write_text('import sys\n\nif __name__ == "__main__":\n    sys.exit(0)\n')
    (tmp_path / "helper.py").write_text("def percentile(values):\n    return values[0]\n")
    (tmp_path / "process.py").write_text('STARTED_BY = "new_bench.py"\n\nif __name__ == "__main__":\n    pass\n')
    assert discover(tmp_path) == (["new_bench.py"], {"process.py": "new_bench.py"})


@pytest.mark.benchmark_smoke
@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_smoke(script: str, smoke_runs: dict[str, Future[SmokeRun]]) -> None:
    run = smoke_runs[script].result()
    print(run.stdout)
    where = f"\n--- stdout (end) ---\n{run.stdout[-3000:]}\n--- stderr (end) ---\n{run.stderr[-6000:]}"
    assert run.returncode is not None, f"{script} --smoke did not end within {TIMEOUT_S:.0f} s{where}"
    assert run.returncode == 0, f"{script} --smoke exited with {run.returncode}{where}"
    assert any(is_table_row(line) for line in run.stdout.splitlines()), f"{script} --smoke printed no table{where}"
