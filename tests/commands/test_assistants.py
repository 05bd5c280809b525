"""`ragline assistant create|list|show|update|delete` and `ragline ask --assistant`, run as a user
runs them (a subprocess), on the embedded files and on a shared Redis; `--set key=value` parsing
with hypothesis; every mistake one `ragline: error:` line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragline.cli import main
from ragline.commands.assistants import apply_settings, parse_setting
from ragline.commands.running import CLIError
from ragline.settings import get_settings
from tests.scripted_model import Reply


def ragline(*args: str) -> subprocess.CompletedProcess:
    """The command in a process of its own, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "ragline", *args], capture_output=True, text=True, timeout=120, env=os.environ)


@pytest.fixture
def cli(capsys) -> Callable[..., tuple[int, str, str]]:
    """The command through the CLI's main in this process (seconds faster than a new process):
    exit code, stdout, stderr. The settings are read again each time, as a new process would."""

    def call(*args: str) -> tuple[int, str, str]:
        get_settings.cache_clear()
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out.strip(), err.strip()

    return call


def ok(cli, *args: str) -> str:
    code, out, err = cli(*args)
    assert code == 0, err
    return out


def shown(cli, assistant_id: str, *more: str) -> dict:
    return json.loads(ok(cli, "assistant", "show", assistant_id, *more))


def the_lifecycle(cli, tmp_path: Path) -> str:
    """create (--config and --set), show, update twice, list, show a version, delete: the id."""
    config = tmp_path / "support.json"
    config.write_text(json.dumps({"rerank_top_k": 3, "summary": {"max_tokens": 64}}))
    made = ok(cli, "assistant", "create", "Support desk", "--config", str(config), "--set", "fallback_response=Ask the front desk.",
              "--set", "summary.prompt=You are Bob", "--overridable", "language,chat_model", "--tool", "search_knowledge")
    first = shown(cli, made)
    assert first["version"] == 1 and first["name"] == "Support desk" and first["tools"] == ["search_knowledge"]
    assert first["config"] == {"rerank_top_k": 3, "summary": {"max_tokens": 64, "prompt": "You are Bob"}, "fallback_response": "Ask the front desk."}
    assert first["overridable"] == ["language", "chat_model"]
    assert ok(cli, "assistant", "update", made, "--set", "summary.prompt=You are Carol", "--set", "fallback_response=null").split()[:2] == [made, "v2"]
    ok(cli, "assistant", "update", made, "--name", "Sales desk", "--approval-tool", "search_knowledge")
    latest = shown(cli, made)
    assert latest["version"] == 3 and latest["name"] == "Sales desk" and latest["approval_tools"] == ["search_knowledge"]
    assert latest["config"] == {"rerank_top_k": 3, "summary": {"max_tokens": 64, "prompt": "You are Carol"}}  # the rest of summary kept
    assert shown(cli, made, "--version", "1") == first
    listed = ok(cli, "assistant", "list").splitlines()
    assert [line.split()[:2] for line in listed] == [[made, "v3"]] and listed[0].endswith("Sales desk")
    return made


def test_assistants_are_kept_in_the_data_directory_where_serve_finds_them(fresh_data_dir, tmp_path, cli):
    from ragline.api.app import create_app
    from tests.api.live import ThreadServer, memory_settings

    made = the_lifecycle(cli, tmp_path)
    assert (fresh_data_dir / "service" / "assistants.sqlite").exists()
    live = ThreadServer(create_app(memory_settings(checkpointer="sqlite", data_dir=fresh_data_dir))).start()
    try:
        served = httpx.get(f"{live.url}/api/v1/assistants/{made}", timeout=30).json()
    finally:
        live.stop()
    assert served["name"] == "Sales desk" and served["version"] == 3
    ok(cli, "assistant", "delete", made)
    assert ok(cli, "assistant", "list") == ""
    assert cli("assistant", "show", made) == (2, "", f"ragline: error: assistant {made} not found (see `ragline assistant list`)")


def test_with_a_redis_url_assistants_are_kept_in_the_shared_redis(fresh_data_dir, tmp_path, redis_server, monkeypatch, cli):
    import redis

    redis_server.flush()
    monkeypatch.setenv("RAGLINE_REDIS_URL", redis_server.url)
    made = the_lifecycle(cli, tmp_path)
    assert not (fresh_data_dir / "service" / "assistants.sqlite").exists()
    client = redis.Redis.from_url(redis_server.url)
    assert client.hlen(f"ragline:assistant:{made}:versions") == 3
    ok(cli, "assistant", "delete", made)
    assert client.keys("ragline:assistant*") == []
    client.close()


def test_a_tenant_on_the_command_line_sees_only_its_own_assistants(fresh_data_dir, cli):
    mine = ok(cli, "assistant", "create", "Mine", "--tenant", "acme")
    assert ok(cli, "assistant", "list", "--tenant", "globex") == ""
    assert cli("assistant", "show", mine, "--tenant", "globex")[0] == 2
    assert cli("assistant", "update", mine, "--name", "theirs", "--tenant", "globex")[0] == 2
    assert cli("assistant", "delete", mine, "--tenant", "globex")[0] == 2
    assert shown(cli, mine, "--tenant", "acme")["name"] == "Mine"


def test_ask_with_an_assistant_runs_with_its_configuration(fresh_data_dir, scripted_model, cli):
    scripted_model.on(lambda body: "You are Bob" in json.dumps(body.get("messages")), Reply.text("I am Bob."))
    made = ok(cli, "assistant", "create", "Bob", "--set", "rewrite_enabled=false", "--set", "summary.max_tokens=12",
              "--set", "summary.prompt=You are Bob", "--overridable", "language")
    asked = ragline("ask", "--assistant", made, "Who are you?")
    assert asked.returncode == 0 and asked.stdout.strip() == "I am Bob.", asked.stderr
    assert scripted_model.requests[-1]["max_tokens"] == 12
    refused = ragline("ask", "--assistant", made, "--max-tokens", "500", "Who are you?")
    assert refused.returncode == 2
    assert refused.stderr.strip() == "ragline: error: summary is set by assistant 'Bob' and a turn may not override it (it allows: language)"


def test_an_assistant_names_mcp_servers_of_the_settings_and_their_tools_for_approval(fresh_data_dir, monkeypatch, cli):
    monkeypatch.setenv("RAGLINE_AGENT_MCP_SERVERS", json.dumps({"orders": {"transport": "stdio", "command": "orders-server"}}))
    made = ok(cli, "assistant", "create", "Desk", "--mode", "agent", "--mcp-server", "orders", "--approval-tool", "orders__cancel_order")
    assert (shown(cli, made)["mcp_servers"], shown(cli, made)["approval_tools"]) == (["orders"], ["orders__cancel_order"])
    code, _, err = cli("assistant", "update", made, "--mcp-server", "billing")
    assert code == 2 and err == ("ragline: error: mcp_servers names 'billing', which is not an MCP server this service allows for the tenant "
                                 "(settings agent_mcp_servers; allowed: orders)")


def _warranty_kb(data_dir: Path) -> None:
    """The default tenant's knowledge base "kettle" with one document, in the data directory."""
    import asyncio

    from ragline.services import Services
    from ragline.settings import Settings

    async def build() -> None:
        services = Services(Settings(data_dir=data_dir, redis_url=None))
        try:
            kb = services.retrieval.knowledge_bases.create("kettle", "default")
            await services.ingestion.ingest_text(kb.id, "The Borealis kettle has a warranty of two years.", "Warranty", tenant_id="default")
        finally:
            await services.aclose()

    asyncio.run(build())


def test_ask_with_an_agent_mode_assistant_shows_each_tool_call_and_asks_before_one_needing_approval(fresh_data_dir, scripted_model, cli):
    from tests.agent_script import tool_messages
    from tests.scripted_model import ScriptedCall

    _warranty_kb(fresh_data_dir)
    scripted_model.on(lambda b: "tools" in b and not tool_messages(b), Reply.calling(ScriptedCall("search_knowledge", {"query": "warranty"}, id="s1"),
                                                                                      text="Let me search."))
    scripted_model.on(lambda b: "tools" in b and len(tool_messages(b)) == 1, Reply.text("The warranty lasts two years."))
    free = ok(cli, "assistant", "create", "Agent", "--mode", "agent", "--set", "knowledge_base_ids=kettle", "--tool", "search_knowledge")
    asked = ragline("ask", "--assistant", free, "How long is the warranty?")
    assert asked.returncode == 0 and asked.stdout == "Let me search.\nThe warranty lasts two years.\n", asked.stderr
    assert asked.stderr.splitlines()[:2] == ['  -> search_knowledge(query="warranty")', "     1 passage: c1 Warranty"]

    careful = ok(cli, "assistant", "create", "Careful", "--mode", "agent", "--set", "knowledge_base_ids=kettle", "--tool", "search_knowledge",
                 "--approval-tool", "search_knowledge")
    for answer, ran in (("y\n", True), ("\n", False), ("", False)):
        scripted_model.requests.clear()
        asked = subprocess.run([sys.executable, "-m", "ragline", "ask", "--assistant", careful, "How long is the warranty?"], input=answer,
                               capture_output=True, text=True, timeout=120, env=os.environ)
        assert asked.returncode == 0 and 'run search_knowledge(query="warranty")? [y/N] ' in asked.stderr, asked.stderr
        result = tool_messages(scripted_model.requests[-1])[0]
        if ran:
            assert "Borealis kettle" in result and "1 passage: c1 Warranty" in asked.stderr
        else:
            reason = "denied at the terminal" if answer else "no answer at the terminal (stdin closed)"
            assert result == f"Error: not run: the user denied this call: {reason}" and f"denied: {reason}" in asked.stderr


def test_ask_with_an_agent_mode_assistant_and_the_local_model_is_refused_in_one_line(fresh_data_dir, cli):
    made = ok(cli, "assistant", "create", "Agent", "--mode", "agent")
    asked = ragline("ask", "--assistant", made, "Hello?")
    assert asked.returncode == 2 and asked.stderr.startswith("ragline: error: agent mode needs a model with tool calling; the local model")
    assert len(asked.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("args", "message"), [
    (("assistant", "create", "a", "--set", "max_tokens"), "--set takes key=value, e.g. --set summary.max_tokens=64; got 'max_tokens'"),
    (("assistant", "create", "a", "--config", "/no/such.json"), "/no/such.json: No such file or directory"),
    (("assistant", "create", "a", "--set", "rerank_top_k=0"), "config.rerank_top_k must be at least 1"),
    (("assistant", "create", "a", "--set", "chat_model=ollama/llama3"), "chat_model 'ollama/llama3' is not available"),
    (("assistant", "create", "a", "--set", "knowledge_base_ids=no-such-kb"), "knowledge base no-such-kb does not exist"),
    (("assistant", "create", "a", "--overridable", "speed"), "overridable: 'speed' is not a request setting"),
    (("assistant", "create", "a", "--mode", "swarm"), "argument --mode: invalid choice: 'swarm'"),
    (("assistant", "update", "no-such-id", "--name", "b"), "assistant no-such-id not found (see `ragline assistant list`)"),
    (("ask", "--assistant", "no-such-id", "q"), "assistant no-such-id not found"),
])
def test_a_mistake_is_one_error_line_in_our_words(fresh_data_dir, args, message):
    result = ragline(*args)
    errors = [line for line in result.stderr.strip().splitlines() if not line.startswith(("usage:", " "))]
    assert result.returncode == 2 and len(errors) == 1, result.stderr
    assert errors[0].startswith("ragline: error: ") and message in errors[0], errors
    assert "Traceback" not in result.stderr and "Value error" not in result.stderr


# --- --set key=value ---

KEYS = st.lists(st.from_regex(r"[a-z_][a-z0-9_]{0,11}", fullmatch=True), min_size=1, max_size=3)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()


@given(KEYS, SCALARS)
def test_a_json_value_reads_back_as_itself_under_its_dotted_key(path, value):
    assert parse_setting(f"{'.'.join(path)}={json.dumps(value)}") == (path, value)
    nested = apply_settings({}, [f"{'.'.join(path)}={json.dumps(value)}"])
    for part in path[:-1]:
        nested = nested[part]
    assert nested[path[-1]] == value


@given(KEYS, st.text())
def test_a_value_that_is_not_json_is_taken_as_the_text_it_is(path, text):
    try:
        json.loads(text)
    except ValueError:
        assert parse_setting(f"{'.'.join(path)}={text}") == (path, text)  # '=' and dots inside the value stay


@given(st.text().filter(lambda t: "=" not in t))
def test_a_setting_without_an_equals_sign_is_refused(text):
    with pytest.raises(CLIError, match="--set takes key=value"):
        parse_setting(text)


@given(KEYS, SCALARS, SCALARS)
def test_a_later_setting_wins_and_the_config_given_is_not_changed(path, first, second):
    given_config = {"summary": {"max_tokens": 5}}
    key = ".".join(path)
    result = apply_settings(given_config, [f"{key}={json.dumps(first)}", f"{key}={json.dumps(second)}"])
    for part in path[:-1]:
        result = result[part]
    assert result[path[-1]] == second and given_config == {"summary": {"max_tokens": 5}}
