"""Who may read what, through every door: a document restricted to a group is never searched,
listed, read, given to the model or cited for a reader outside it; a knowledge base restricted to
users is "not found" for the others; keys may be scoped to bases, read-only, expired, or a trusted
front end's; every use of a key is one audit line without the key.

One service (embedded stores, the local embedder, the scripted model), one tenant "acme":
- handbook (open): Salaries (group hr), Roadmap (group eng), Canteen (open);
- board (users: admin): Minutes.
Each document carries a codeword no other text has, so a leak is a codeword where it must not be.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from openai import AsyncOpenAI

from ragline.api.app import create_app
from ragline.contracts.access import AccessRule, Principal
from ragline.services import Services
from tests.api.jobs import ingested
from tests.api.live import ThreadServer, collect, memory_settings
from tests.scripted_model import Reply, ScriptedModel, last_user_text, system_text

V1 = "/api/v1"
ADMIN = {"tenant": "acme", "user": "admin", "groups": ["hr", "eng"], "name": "admin-key"}
KEYS: dict[str, Any] = {
    "key-admin": ADMIN,
    "key-alice": {"tenant": "acme", "user": "alice", "groups": ["hr"], "name": "alice-key"},
    "key-bob": {"tenant": "acme", "user": "bob", "groups": ["eng"], "name": "bob-key"},
    "key-carol": "acme/carol",
    "key-alice-ro": {"tenant": "acme", "user": "alice", "groups": ["hr"], "read_only": True},
    "key-handbook": {"tenant": "acme", "user": "alice", "groups": ["hr"], "knowledge_bases": ["handbook"]},
    "key-expired": {"tenant": "acme", "user": "alice", "expires_at": "2020-01-01T00:00:00Z"},
    "key-front": {"tenant": "acme", "user": "frontend", "assert_user": True, "name": "front-end"},
}
CODEWORDS = {"Salaries": "ZEPHYRINE", "Roadmap": "QUILLOTINE", "Canteen": "MARZIPANE", "Minutes": "OBSIDIANE"}
TEXTS = {
    "Salaries": "Salary bands policy: engineers earn between 50 and 90 thousand a year. Codeword ZEPHYRINE.",
    "Roadmap": "Roadmap policy: the next release ships the offline mode in March. Codeword QUILLOTINE.",
    "Canteen": "Canteen policy: lunch is served from noon to two in the afternoon. Codeword MARZIPANE.",
    "Minutes": "Board minutes policy: the board approved the merger in the last meeting. Codeword OBSIDIANE.",
}
QUESTION = "What does the policy say? codeword"
READERS = {"key-admin": {"Salaries", "Roadmap", "Canteen", "Minutes"}, "key-alice": {"Salaries", "Canteen"},
           "key-bob": {"Roadmap", "Canteen"}, "key-carol": {"Canteen"}}


@pytest.fixture(scope="module")
def world(scripted_server: ScriptedModel, embedder, tmp_path_factory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("document-access")
    services = Services(memory_settings(scripted_server, api_keys=KEYS, data_dir=root), embedder_factory=lambda: embedder)
    live = ThreadServer(create_app(services.settings, services=services)).start()

    async def build() -> dict[str, Any]:
        async with httpx.AsyncClient(base_url=live.url, timeout=120, headers={"X-API-Key": "key-admin"}) as admin:
            kbs = {name: (await admin.post(f"{V1}/knowledge-bases", json={"name": name})).json()["id"] for name in ("handbook", "board")}
            ids = {}
            for title, text in TEXTS.items():
                kb = kbs["board"] if title == "Minutes" else kbs["handbook"]
                added = await admin.post(f"{V1}/knowledge-bases/{kb}/documents/text", json={"title": title, "text": text})
                ids[title] = (await ingested(admin, added))["id"]
            for title, group in (("Salaries", "hr"), ("Roadmap", "eng")):
                set_rule = await admin.put(f"{V1}/knowledge-bases/{kbs['handbook']}/documents/{ids[title]}/access", json={"groups": [group]})
                assert set_rule.status_code == 200 and set_rule.json()["access"] == {"users": [], "groups": [group]}
            board = await admin.put(f"{V1}/knowledge-bases/{kbs['board']}/access", json={"users": ["admin"]})
            assert board.status_code == 200, board.text
            return {"kbs": kbs, "ids": ids}

    built = asyncio.run(build())
    yield {"url": live.url, "services": services, **built}
    live.stop()
    asyncio.run(services.aclose())


@asynccontextmanager
async def client(world: dict[str, Any], key: str, **headers: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=world["url"], timeout=120, headers={"X-API-Key": key, **headers}) as made:
        yield made


def seen(text: str) -> set[str]:
    """The documents whose codeword a response shows."""
    return {title for title, word in CODEWORDS.items() if word in text}


async def search_titles(http: httpx.AsyncClient, kb: str) -> set[str]:
    found = await http.post(f"{V1}/knowledge-bases/search", json={"query": QUESTION, "knowledge_base_ids": [kb], "match_count": 10,
                                                                "vector_threshold": 0.0, "keyword_threshold": 0.0})
    assert found.status_code == 200, found.text
    return seen(found.text)


@pytest.mark.parametrize("key", sorted(READERS))
async def test_each_reader_searches_lists_and_reads_only_what_it_may(world, key):
    readable, handbook = READERS[key], world["kbs"]["handbook"]
    async with client(world, key) as http:
        assert await search_titles(http, handbook) == readable - {"Minutes"}
        listed = (await http.get(f"{V1}/knowledge-bases/{handbook}/documents")).json()["items"]
        assert {d["title"] for d in listed} == readable - {"Minutes"}
        for title in ("Salaries", "Roadmap", "Canteen"):
            document = f"{V1}/knowledge-bases/{handbook}/documents/{world['ids'][title]}"
            for route in (f"{document}/text", f"{document}/chunks"):
                response = await http.get(route)
                assert response.status_code == (200 if title in readable else 404), (route, response.text)
                assert seen(response.text) <= readable
        board = await http.post(f"{V1}/knowledge-bases/search", json={"query": QUESTION, "knowledge_base_ids": [world["kbs"]["board"]]})
        assert board.status_code == (200 if "Minutes" in readable else 404)
        names = {kb["name"] for kb in (await http.get(f"{V1}/knowledge-bases")).json()["items"]}
        assert names == ({"handbook", "board"} if "Minutes" in readable else {"handbook"})


async def test_an_answer_gives_the_model_and_the_reader_only_readable_passages(world, scripted_model):
    scripted_model.on(lambda body: True, Reply.text("The policy is in the sources."))
    async with client(world, "key-carol") as carol:
        sid = (await carol.post(f"{V1}/sessions", json={})).json()["id"]
        got = await collect(carol, "POST", f"{V1}/sessions/{sid}/knowledge-chat",
                            json={"query": QUESTION, "knowledge_base_ids": [world["kbs"]["handbook"]], "rewrite_enabled": False})
        stored = (await carol.get(f"{V1}/sessions/{sid}/messages")).text
    events = json.dumps([g.event for g in got])
    assert seen(json.dumps(scripted_model.requests)) <= {"Canteen"} and seen(events) <= {"Canteen"} and seen(stored) <= {"Canteen"}
    assert world["ids"]["Salaries"] not in events + stored
    references = [ref for g in got if g.type == "references" for ref in g.event["knowledge_references"]]
    assert references and {ref["metadata"]["access"] for ref in references} == {"tenant-wide"}  # the rule that let carol see it


async def test_each_result_says_which_rule_let_its_reader_see_it(world):
    async with client(world, "key-alice") as alice:
        found = await alice.post(f"{V1}/knowledge-bases/search", json={"query": QUESTION, "knowledge_base_ids": [world["kbs"]["handbook"]],
                                                                      "vector_threshold": 0.0, "keyword_threshold": 0.0})
    reasons = {hit["knowledge_title"]: hit["metadata"]["access"] for hit in found.json()["items"]}
    assert reasons == {"Salaries": "document: group hr", "Canteen": "tenant-wide"}


async def test_the_openai_door_answers_from_readable_documents_only(world, scripted_model):
    scripted_model.on(lambda body: True, Reply.text("Lunch is served from noon."))
    async with AsyncOpenAI(base_url=f"{world['url']}/v1", api_key="key-bob", max_retries=0, timeout=120) as bob:
        answer = await bob.chat.completions.create(model="ragline/kb/handbook", messages=[{"role": "user", "content": QUESTION}])
        assert "ragline/kb/board" not in [model.id for model in (await bob.models.list()).data]
    shown = json.dumps(answer.model_dump()) + json.dumps(scripted_model.requests)
    assert seen(shown) <= {"Roadmap", "Canteen"}


async def test_the_mcp_and_dify_doors_search_readable_documents_only(world):
    async with (
        httpx2.AsyncClient(headers={"Authorization": "Bearer key-alice"}, timeout=httpx2.Timeout(30, read=120)) as http,
        streamable_http_client(f"{world['url']}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        found = await session.call_tool("search", {"query": QUESTION, "knowledge_bases": ["handbook"]})
        assert not found.is_error and seen(json.dumps(found.structured_content)) == {"Salaries", "Canteen"}
        board = await session.call_tool("search", {"query": QUESTION, "knowledge_bases": ["board"]})
        assert board.is_error and "OBSIDIANE" not in json.dumps(board.model_dump())
    async with client(world, "key-bob", Authorization="Bearer key-bob") as bob:
        dify = await bob.post("/retrieval", json={"knowledge_id": world["kbs"]["handbook"], "query": QUESTION,
                                                  "retrieval_setting": {"top_k": 10, "score_threshold": 0.0}})
    assert dify.status_code == 200 and seen(dify.text) == {"Roadmap", "Canteen"}


async def test_a_changed_rule_holds_from_the_next_question(world):
    canteen, handbook = world["ids"]["Canteen"], world["kbs"]["handbook"]
    async with client(world, "key-carol") as carol, client(world, "key-admin") as admin:
        assert "Canteen" in await search_titles(carol, handbook)
        narrowed = await admin.put(f"{V1}/knowledge-bases/{handbook}/documents/{canteen}/access", json={"groups": ["eng"]})
        assert narrowed.status_code == 200
        try:
            assert await search_titles(carol, handbook) == set()
            assert (await carol.put(f"{V1}/knowledge-bases/{handbook}/documents/{canteen}/access", json={})).status_code == 404
        finally:
            assert (await admin.put(f"{V1}/knowledge-bases/{handbook}/documents/{canteen}/access", json={})).status_code == 200
        assert "Canteen" in await search_titles(carol, handbook)


async def test_scoped_read_only_and_expired_keys(world):
    board = world["kbs"]["board"]
    async with client(world, "key-handbook") as scoped:
        assert {kb["name"] for kb in (await scoped.get(f"{V1}/knowledge-bases")).json()["items"]} == {"handbook"}
        assert await search_titles(scoped, world["kbs"]["handbook"]) == {"Salaries", "Canteen"}
        assert (await scoped.get(f"{V1}/knowledge-bases/{board}")).status_code == 404
        assert (await scoped.post(f"{V1}/knowledge-bases", json={"name": "mine"})).status_code == 403
    async with client(world, "key-alice-ro") as read_only:
        assert await search_titles(read_only, world["kbs"]["handbook"]) == {"Salaries", "Canteen"}
        refused = await read_only.post(f"{V1}/knowledge-bases/{world['kbs']['handbook']}/documents/text", json={"title": "x", "text": "x"})
        assert refused.status_code == 403 and "read-only" in refused.json()["error"]["message"]
    async with client(world, "key-expired") as expired:
        refused = await expired.get(f"{V1}/knowledge-bases")
        assert refused.status_code == 401 and "expired" in refused.json()["error"]["message"]
    async with client(world, "key-expired", Authorization="Bearer key-expired") as expired:
        dify = await expired.post("/retrieval", json={"knowledge_id": board, "query": QUESTION,
                                                      "retrieval_setting": {"top_k": 3, "score_threshold": 0.0}})
        assert dify.status_code == 403 and dify.json()["error_code"] == 1002


async def test_a_trusted_front_end_names_the_user_and_its_groups(world):
    handbook = world["kbs"]["handbook"]
    async with client(world, "key-front", **{"X-Ragline-User": "bob", "X-Ragline-Groups": "eng"}) as as_bob:
        assert await search_titles(as_bob, handbook) == {"Roadmap", "Canteen"}
    async with client(world, "key-front") as itself:
        assert await search_titles(itself, handbook) == {"Canteen"}
    async with client(world, "key-carol", **{"X-Ragline-User": "admin", "X-Ragline-Groups": "hr,eng"}) as pretender:
        assert await search_titles(pretender, handbook) == {"Canteen"}  # only a key allowed to assert may


async def test_every_use_of_a_key_is_an_audit_line_without_the_key(world, caplog):
    with caplog.at_level(logging.INFO, logger="ragline.audit"):
        async with client(world, "key-alice") as alice:
            await alice.get(f"{V1}/knowledge-bases")
    lines = [r for r in caplog.records if r.name == "ragline.audit"]
    assert lines and lines[-1].audit["key"] == "alice-key" and lines[-1].audit["user"] == "alice"
    assert lines[-1].audit["door"] == "rest" and lines[-1].audit["action"] == "GET /api/v1/knowledge-bases"
    assert all("key-alice" not in json.dumps(r.audit) for r in lines)


async def test_a_search_through_any_door_is_an_audit_line_with_its_knowledge_bases(world, scripted_model, caplog):
    scripted_model.on(lambda body: True, Reply.text("Lunch is served from noon."))
    handbook = world["kbs"]["handbook"]
    with caplog.at_level(logging.INFO, logger="ragline.audit"):
        async with AsyncOpenAI(base_url=f"{world['url']}/v1", api_key="key-bob", max_retries=0, timeout=120) as bob:
            await bob.chat.completions.create(model="ragline/kb/handbook", messages=[{"role": "user", "content": QUESTION}])
        async with client(world, "key-alice", Authorization="Bearer key-alice") as alice:
            await alice.post("/retrieval", json={"knowledge_id": handbook, "query": QUESTION, "retrieval_setting": {"top_k": 3, "score_threshold": 0.0}})
    lines = [r.audit for r in caplog.records if r.name == "ragline.audit"]
    searches = {(line["user"], tuple(line["knowledge_bases"])) for line in lines if line["action"] == "search"}
    assert searches >= {("bob", (handbook,)), ("alice", (handbook,))}
    assert {line.get("door") for line in lines if line["action"] != "search"} >= {"openai", "dify"}


READER = st.tuples(st.sampled_from(["alice", "bob", "carol", "dave"]), st.frozensets(st.sampled_from(["hr", "eng", "ops"]), max_size=2))
RULE = st.builds(AccessRule, users=st.lists(st.sampled_from(["alice", "bob", "carol"]), max_size=2),
                 groups=st.lists(st.sampled_from(["hr", "eng", "ops"]), max_size=2))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rules=st.fixed_dictionaries({"Salaries": RULE, "Roadmap": RULE, "Canteen": RULE}), kb_rule=RULE, reader=READER)
def test_no_generated_world_shows_a_reader_an_unreadable_document(world, rules, kb_rule, reader):
    """Random rules on the three handbook documents and the base, a random reader (a trusted front
    end names it): search, list and read show exactly the documents the rules let it read."""
    knowledge_bases, operator = world["services"].retrieval.knowledge_bases, Principal.operator_of("acme")
    user, groups = reader
    who = Principal("acme", user, groups)
    for title, rule in rules.items():
        knowledge_bases.set_document_access(world["ids"][title], operator, rule)
    knowledge_bases.update(world["kbs"]["handbook"], operator, access=kb_rule)
    readable = {title for title, rule in rules.items() if kb_rule.lets_in(who) and rule.lets_in(who)}

    async def ask() -> None:
        headers = {"X-Ragline-User": user, "X-Ragline-Groups": ",".join(sorted(groups))}
        async with client(world, "key-front", **headers) as http:
            handbook = world["kbs"]["handbook"]
            if kb_rule.lets_in(who) is None:
                assert (await http.get(f"{V1}/knowledge-bases/{handbook}/documents")).status_code == 404
                assert (await http.post(f"{V1}/knowledge-bases/search", json={"query": QUESTION, "knowledge_base_ids": [handbook]})).status_code == 404
                return
            assert await search_titles(http, handbook) == readable
            listed = (await http.get(f"{V1}/knowledge-bases/{handbook}/documents")).text
            assert seen(listed) == set() and {t for t in rules if world["ids"][t] in listed} == readable
            for title in rules:
                text = await http.get(f"{V1}/knowledge-bases/{handbook}/documents/{world['ids'][title]}/text")
                assert text.status_code == (200 if title in readable else 404)

    try:
        asyncio.run(ask())
    finally:
        for title, group in (("Salaries", "hr"), ("Roadmap", "eng"), ("Canteen", None)):
            knowledge_bases.set_document_access(world["ids"][title], operator, AccessRule(groups=[group] if group else []))
        knowledge_bases.update(world["kbs"]["handbook"], operator, access=AccessRule())


def is_wiki_prompt(body: dict[str, Any]) -> bool:
    return "You write wiki pages" in system_text(body)


async def wiki_settled(http: httpx.AsyncClient, kb: str, after: str | None) -> str:
    for _ in range(300):
        status = (await http.get(f"{V1}/knowledge-bases/{kb}/wiki")).json()
        if status["state"] != "building" and status["finished_at"] and status["finished_at"] != after:
            return status["finished_at"]
        await asyncio.sleep(0.1)
    raise AssertionError(f"the wiki of {kb} did not settle")


async def test_a_wiki_page_is_read_only_by_who_may_read_all_its_documents(world, scripted_model):
    """Pages are written per access rule; a document's new rule removes the pages written from it at
    once, and the rebuild writes them again under the rules as they are now."""
    for words in (("ZEPHYRINE", "MARZIPANE"), ("ZEPHYRINE",), ("MARZIPANE",)):  # a page repeats the codewords it was written from
        scripted_model.on(lambda b, words=words: is_wiki_prompt(b) and all(w in last_user_text(b) for w in words),
                          Reply.text("Summary of the policies: " + " ".join(words)))
    async with client(world, "key-admin") as admin, client(world, "key-carol") as carol:
        kb = (await admin.post(f"{V1}/knowledge-bases", json={"name": "wiki-handbook", "wiki_enabled": True})).json()["id"]
        ids = {}
        for title in ("Salaries", "Canteen"):
            added = await admin.post(f"{V1}/knowledge-bases/{kb}/documents/text", json={"title": title, "text": TEXTS[title]})
            ids[title] = (await ingested(admin, added))["id"]
        finished = await wiki_settled(admin, kb, None)
        restricted = await admin.put(f"{V1}/knowledge-bases/{kb}/documents/{ids['Salaries']}/access", json={"groups": ["hr"]})
        assert restricted.status_code == 200
        listed = (await carol.get(f"{V1}/knowledge-bases/{kb}/documents")).text  # right after the change, before the rebuild
        assert seen(listed) == set() and ids["Salaries"] not in listed
        assert "Salaries" not in await search_titles(carol, kb) and "ZEPHYRINE" not in listed
        await wiki_settled(admin, kb, finished)
        pages = [d for d in (await admin.get(f"{V1}/knowledge-bases/{kb}/documents")).json()["items"] if d["file_type"] == "wiki"]
        assert pages and all(len({ids["Salaries"], ids["Canteen"]} & set(page["metadata"]["sources"])) == 1 for page in pages)
        carol_pages = [d for d in (await carol.get(f"{V1}/knowledge-bases/{kb}/documents")).json()["items"] if d["file_type"] == "wiki"]
        assert [page["metadata"]["sources"] for page in carol_pages] == [[ids["Canteen"]]]
        found = await carol.post(f"{V1}/knowledge-bases/search", json={"query": "Summary of the policies", "knowledge_base_ids": [kb],
                                                                      "vector_threshold": 0.0, "keyword_threshold": 0.0})
        assert "ZEPHYRINE" not in found.text and "MARZIPANE" in found.text


async def message_search(http: httpx.AsyncClient, q: str) -> str:
    found = await http.get(f"{V1}/messages/search", params={"q": q})
    assert found.status_code == 200, found.text
    return found.text


async def test_a_past_answer_drawn_from_a_restricted_document_is_found_only_by_its_readers(world, scripted_model):
    """An indexed turn keeps the rule of the documents its answer drew on: alice's answer from the
    hr-only Salaries is found by the message search of alice and the admin, never of bob or carol;
    an answer from the open Canteen stays tenant-wide."""
    scripted_model.on(lambda b: "ZEPHYRINE" in json.dumps(b["messages"]), Reply.text("Engineers earn 50 to 90 thousand: ZEPHYRINE."))
    scripted_model.on(lambda b: "MARZIPANE" in json.dumps(b["messages"]), Reply.text("Lunch is from noon: MARZIPANE."))
    async with client(world, "key-alice") as alice, client(world, "key-bob") as bob, client(world, "key-carol") as carol, \
            client(world, "key-admin") as admin:
        for question, title in (("What are the salary bands for engineers?", "Salaries"), ("When is lunch served in the canteen?", "Canteen")):
            sid = (await alice.post(f"{V1}/sessions", json={})).json()["id"]
            await collect(alice, "POST", f"{V1}/sessions/{sid}/knowledge-chat",
                          json={"query": question, "knowledge_base_ids": [world["kbs"]["handbook"]], "rewrite_enabled": False,
                                "chat_history_index": True, "knowledge_ids": [world["ids"][title]]})
        for _ in range(150):
            if seen(await message_search(alice, "salary bands lunch canteen")) == {"Salaries", "Canteen"}:
                break
            await asyncio.sleep(0.2)
        assert seen(await message_search(alice, "salary bands lunch canteen")) == {"Salaries", "Canteen"}
        assert seen(await message_search(admin, "salary bands lunch canteen")) == {"Salaries", "Canteen"}
        assert seen(await message_search(bob, "salary bands lunch canteen")) == {"Canteen"}
        assert "Salaries" not in seen(await message_search(carol, "salary bands engineers"))
