"""A short schemathesis run against /api/v1/openapi.json: no generated request may cause a 5xx.

CI runs a few examples per operation (every route's validation is reached); a longer run is the
same command with a larger --max-examples against a live `ragline serve`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from ragline.api.app import create_app
from tests.api.live import ThreadServer, memory_settings

MAX_EXAMPLES = 4  # per operation: enough to reach every route's validation in CI time
SCHEMATHESIS = shutil.which("schemathesis", path=str(Path(sys.executable).parent))


def test_no_generated_request_causes_a_server_error(scripted_server, scripted_model, tmp_path):
    assert SCHEMATHESIS, "schemathesis is part of the test extra: pip install -e '.[test]'"
    settings = memory_settings(scripted_server, api_keys={"fuzz-key": "fuzz"}, rate_limit_per_minute=0,
                               max_streams_per_key=0, memory_store="memory", data_dir=tmp_path)
    live = ThreadServer(create_app(settings)).start()
    try:
        run = subprocess.run(
            [SCHEMATHESIS, "run", f"{live.url}/api/v1/openapi.json", "--checks", "not_a_server_error",
             "--max-examples", str(MAX_EXAMPLES), "--header", "X-API-Key: fuzz-key", "--request-timeout", "30",
             "--workers", "1", "--phases", "examples,fuzzing",
             # how well the generator hits a constrained body (the FAQ upload's), not what the server does:
             # it failed a CI run once at random, on generation alone
             "--suppress-health-check", "filter_too_much"],
            capture_output=True, text=True, timeout=900,
        )
    finally:
        live.stop()
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
