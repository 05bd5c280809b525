"""Assistants in memory, SQLite and Redis: versions kept and readable, tenants apart, delete; the
service's rules (models, overridable settings, agent mode) without HTTP."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from pydantic import ValidationError

from ragline.contracts.request import AgentConfig
from ragline.service.access import InvalidRequestError, NotFoundError, Principal, UnprocessableError
from ragline.service.assistant_service import AssistantCreate, AssistantService, AssistantUpdate, check_agent_model, merged_config
from ragline.service.assistants import (
    SETTINGS,
    Assistant,
    MemoryAssistantStore,
    RedisAssistantStore,
    SqliteAssistantStore,
    utcnow,
)
from ragline.service.backend import open_backend
from ragline.services import Services
from ragline.settings import LOCAL_CHAT_MODEL, Settings
from tests.redis_server import fresh_redis


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def store(request, tmp_path):
    if request.param == "memory":
        yield MemoryAssistantStore()
    elif request.param == "sqlite":
        sqlite = SqliteAssistantStore(tmp_path / "assistants.sqlite")
        yield sqlite
        await sqlite.aclose()
    else:
        async with fresh_redis(request.getfixturevalue("redis_server")) as redis:
            yield RedisAssistantStore(redis)


def assistant(tenant: str = "acme", minutes_ago: int = 0, **fields) -> Assistant:
    when = utcnow() - timedelta(minutes=minutes_ago)
    return Assistant(tenant_id=tenant, name=fields.pop("name", "Support"), created_at=when, updated_at=when, **fields)


def renamed(name: str, **config):
    return lambda latest: latest.model_copy(update={"name": name, "config": AgentConfig(**config)})


async def test_a_created_assistant_is_read_back_whole_as_version_1(store):
    made = assistant(description="answers support questions", config=AgentConfig(summary={"max_tokens": 64}), tools=["search_knowledge"])
    await store.create(made)
    got = await store.get("acme", made.id)
    assert got == made and got.version == 1
    assert got.overridable == list(SETTINGS)  # by default a turn may set everything, as without an assistant


async def test_each_update_is_a_new_version_and_every_version_stays_readable(store):
    made = assistant()
    await store.create(made)
    second = await store.update("acme", made.id, renamed("Support v2", fallback_response="ask a human"))
    third = await store.update("acme", made.id, renamed("Support v3", fallback_response="call us"))
    assert (second.version, third.version) == (2, 3)
    assert third.id == made.id and third.created_at == made.created_at and third.updated_at >= second.updated_at
    assert (await store.get("acme", made.id)).name == "Support v3"
    assert (await store.get("acme", made.id, 1)).name == "Support"
    assert (await store.get("acme", made.id, 2)).config.fallback_response == "ask a human"
    assert await store.get("acme", made.id, 4) is None


async def test_concurrent_updates_never_share_a_version_number(store):
    made = assistant()
    await store.create(made)
    done = await asyncio.gather(*(store.update("acme", made.id, renamed(f"n{i}")) for i in range(8)))
    assert sorted(a.version for a in done) == list(range(2, 10))
    assert (await store.get("acme", made.id)).version == 9


async def test_an_update_can_not_change_the_id_tenant_or_creation_time(store):
    made = assistant()
    await store.create(made)
    sneaky = await store.update("acme", made.id, lambda a: a.model_copy(update={"id": "x", "tenant_id": "evil", "created_at": utcnow()}))
    assert (sneaky.id, sneaky.tenant_id, sneaky.created_at) == (made.id, "acme", made.created_at)
    assert await store.get("evil", made.id) is None


async def test_a_tenant_never_sees_reads_updates_or_deletes_another_tenants_assistant(store):
    theirs = assistant("other", name="Theirs")
    await store.create(theirs)
    await store.create(assistant("acme", name="Mine"))
    assert await store.get("acme", theirs.id) is None and await store.get("acme", theirs.id, 1) is None
    assert [a.name for a in (await store.list("acme", 0, 10))[0]] == ["Mine"]
    assert await store.update("acme", theirs.id, renamed("taken")) is None
    assert await store.delete("acme", theirs.id) is False
    assert (await store.get("other", theirs.id)).name == "Theirs"  # untouched


async def test_lists_are_per_tenant_most_recently_changed_first_and_paged(store):
    old, new, changed = assistant(minutes_ago=30, name="old"), assistant(minutes_ago=1, name="new"), assistant(minutes_ago=60, name="changed")
    for a in (old, new, changed, assistant("other")):
        await store.create(a)
    await store.update("acme", changed.id, renamed("changed"))
    items, total = await store.list("acme", 0, 10)
    assert [a.name for a in items] == ["changed", "new", "old"] and total == 3
    assert items[0].version == 2  # the latest version
    page, total = await store.list("acme", 1, 1)
    assert [a.name for a in page] == ["new"] and total == 3


async def test_delete_removes_the_assistant_and_all_its_versions(store):
    made = assistant()
    await store.create(made)
    await store.update("acme", made.id, renamed("v2"))
    assert await store.delete("acme", made.id) is True
    assert await store.get("acme", made.id) is None and await store.get("acme", made.id, 1) is None
    assert (await store.list("acme", 0, 10)) == ([], 0)
    assert await store.delete("acme", made.id) is False
    assert await store.update("acme", made.id, renamed("v3")) is None


async def test_the_sqlite_store_keeps_assistants_across_a_restart(tmp_path):
    first = SqliteAssistantStore(tmp_path / "a.sqlite")
    made = assistant()
    await first.create(made)
    await first.update("acme", made.id, renamed("v2"))
    await first.aclose()
    again = SqliteAssistantStore(tmp_path / "a.sqlite")
    assert (await again.get("acme", made.id)).name == "v2" and (await again.get("acme", made.id, 1)).name == "Support"
    await again.aclose()


async def test_delete_leaves_no_version_behind_in_the_file_or_in_redis(tmp_path, redis_server):
    import sqlite3

    sqlite = SqliteAssistantStore(tmp_path / "a.sqlite")
    made = assistant()
    await sqlite.create(made)
    await sqlite.update("acme", made.id, renamed("v2"))
    await sqlite.delete("acme", made.id)
    await sqlite.aclose()
    with sqlite3.connect(tmp_path / "a.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*) FROM assistant_versions").fetchone() == (0,)
    async with fresh_redis(redis_server) as redis:
        store = RedisAssistantStore(redis)
        await store.create(made)
        await store.update("acme", made.id, renamed("v2"))
        await store.delete("acme", made.id)
        assert await redis.keys("ragline:assistant*") == []


# --- what an assistant may hold ---


@pytest.mark.parametrize(("fields", "message"), [
    ({"name": ""}, "name is too short"),
    ({"name": "x" * 201}, "name is too long"),
    ({"overridable": ["query_speed"]}, "'query_speed' is not a request setting"),
    ({"tools": ["rm_rf"]}, "'rm_rf' is not a known tool"),
    ({"mode": "swarm"}, "mode must be 'pipeline' or 'agent'"),
    ({"config": {"temperature": 1}}, "config.temperature is not a known setting"),
    ({"owner": "me"}, "owner is not a known setting"),
])
def test_an_assistant_body_outside_the_rules_is_refused_in_plain_words(fields, message):
    from ragline.plain_errors import validation_message

    with pytest.raises(ValidationError) as caught:
        AssistantCreate.model_validate({"name": "Support", **fields})
    assert message in validation_message(caught.value)


def test_an_update_replaces_the_settings_it_names_and_a_null_clears_one():
    stored = AgentConfig(rerank_top_k=3, fallback_response="ask a human", summary={"max_tokens": 64})
    changes = AgentConfig.model_validate({"rerank_top_k": 7, "fallback_response": None})
    assert merged_config(stored, changes).model_dump(exclude_none=True) == {"rerank_top_k": 7, "summary": {"max_tokens": 64}}


# --- the service's rules ---


ME, OTHER = Principal("acme", "ann"), Principal("other", "olga")


@pytest.fixture
def service() -> AssistantService:
    settings = Settings(chat_model="openai/configured", allowed_models=["openai/gpt-4o-mini"], redis_url=None)
    return AssistantService(MemoryAssistantStore(), Services(settings))


async def test_the_service_refuses_a_model_outside_the_allow_list_at_create_and_update(service):
    with pytest.raises(InvalidRequestError, match="chat_model 'ollama/llama3' is not available"):
        await service.create(ME, AssistantCreate(name="a", config=AgentConfig(chat_model="ollama/llama3")))
    made = await service.create(ME, AssistantCreate(name="a", config=AgentConfig(chat_model="openai/gpt-4o-mini")))
    with pytest.raises(InvalidRequestError, match="rerank_model 'cohere/x' is not available"):
        await service.update(ME, made.id, AssistantUpdate(config=AgentConfig(rerank_model="cohere/x")))
    assert (await service.get(ME, made.id)).version == 1  # the refused update wrote nothing


async def test_a_turn_runs_on_the_latest_version_and_may_set_only_what_the_assistant_allows(service):
    made = await service.create(ME, AssistantCreate(name="a", config=AgentConfig(rerank_top_k=3, fallback_response="v1"),
                                                    overridable=["language"]))
    turn = await service.turn(ME, made.id, {"query": "q", "language": "English"})
    assert (turn.request.rerank_top_k, turn.request.fallback_response, turn.request.language) == (3, "v1", "English")
    await service.update(ME, made.id, AssistantUpdate(config=AgentConfig(fallback_response="v2")))
    turn = await service.turn(ME, made.id, {"query": "q"})
    assert (turn.assistant.version, turn.request.fallback_response, turn.request.rerank_top_k) == (2, "v2", 3)
    with pytest.raises(UnprocessableError, match="rerank_top_k is set by assistant 'a' and a turn may not override it"):
        await service.turn(ME, made.id, {"query": "q", "rerank_top_k": 9})


async def test_an_agent_mode_assistant_gets_its_turn_unless_its_model_cannot_call_tools(service):
    made = await service.create(ME, AssistantCreate(name="agent", mode="agent", tools=["search_knowledge"]))
    turn = await service.turn(ME, made.id, {"query": "q"})
    assert turn.assistant.mode == "agent" and turn.assistant.tools == ["search_knowledge"]
    check_agent_model(turn.request, service.services.settings)  # openai/configured: a litellm model may call tools
    local = Settings(chat_model=LOCAL_CHAT_MODEL, redis_url=None)
    with pytest.raises(UnprocessableError, match=f"agent mode needs a model with tool calling; the local model {LOCAL_CHAT_MODEL}"):
        check_agent_model(turn.request, local)  # the configured default, when the assistant names no model
    check_agent_model(turn.request.model_copy(update={"chat_model": "openai/gpt-4o-mini"}), local)


def test_an_assistant_stored_with_the_old_name_of_read_chunks_loads_with_the_tool_s_name():
    stored = {"id": "a1", "tenant_id": "t", "name": "a", "mode": "agent", "tools": ["read_document", "search_knowledge"]}
    assert Assistant.model_validate_json(json.dumps(stored)).tools == ["read_chunks", "search_knowledge"]
    with pytest.raises(ValidationError, match="'read_anything' is not a known tool"):
        Assistant(tenant_id="t", name="a", tools=["read_anything"])


async def test_another_tenants_assistant_or_a_deleted_one_is_not_found(service):
    made = await service.create(ME, AssistantCreate(name="a"))
    for attempt in (service.get(OTHER, made.id), service.turn(OTHER, made.id, {"query": "q"}),
                    service.update(OTHER, made.id, AssistantUpdate(name="b")), service.delete(OTHER, made.id)):
        with pytest.raises(NotFoundError, match="not found"):
            await attempt
    await service.delete(ME, made.id)
    with pytest.raises(NotFoundError):
        await service.turn(ME, made.id, {"query": "q"})


# --- a run keeps its assistant, also when another replica takes it over ---


async def test_a_run_taken_over_gets_its_assistant_back_from_the_run_record(redis):
    from ragline.contracts.request import PipelineRequest
    from ragline.service.registry import RedisRunRegistry, RunRecord
    from ragline.service.runs import RunManager

    used = assistant(config=AgentConfig(summary={"prompt": "You are Bob"}, rerank_top_k=3))
    registry = RedisRunRegistry(redis)
    record = RunRecord("s1", "r1", "u1", "a1", "acme", "ann", "{}", "q", assistant_id=used.id, assistant_version=4,
                       agent_json=used.config.model_dump_json(exclude_none=True))
    await registry.begin(record, "replica-a", 30)
    taken = await registry.get("a1")  # what another replica reads back
    assert (taken.assistant_id, taken.assistant_version) == (used.id, 4)
    settings = Settings(checkpointer="memory", stream_manager="memory", redis_url=None)
    core = Services(settings)
    try:
        async with open_backend(core) as backend:
            runs = RunManager(backend, core)
            runs._launch(taken, PipelineRequest(query="q"), resume=True)
            context = runs._runs["a1"].context
            assert context.agent == used.config and context.answer_metadata() == {"assistant_id": used.id, "assistant_version": 4}
            await runs.aclose()
    finally:
        await core.aclose()
