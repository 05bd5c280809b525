"""The isolation suite: for generated worlds (random rules on knowledge bases and documents, random
readers with random groups), every door is asked by every reader, and nothing of a document the
reader may not read shows: no codeword of its text, no title, no id, in any response, SSE event,
stored message, model request or log line; and every count agrees with what may be read.

One service (embedded stores, the local embedder, the scripted model, which echoes every codeword
it was given, so a passage that reached the model is also in the answer), one tenant "acme", two
knowledge bases: handbook (Salaries, Roadmap, Canteen) and board (Minutes). A trusted front end's
key names each reader (X-Ragline-User, X-Ragline-Groups), as a team's portal would. Each generated
world is set through the catalog before its readers ask, so it also proves that a changed rule holds
from the next question: no cache answers with the world before.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from openai import AsyncOpenAI

from ragline.agent_tools import RaglineRetriever
from ragline.api.app import create_app
from ragline.contracts.access import AccessRule, Principal
from ragline.services import Services
from tests.api.jobs import ingested
from tests.api.live import ThreadServer, collect, memory_settings
from tests.scripted_model import Reply, ScriptedModel

V1 = "/api/v1"
KEYS: dict[str, Any] = {
    "key-admin": {"tenant": "acme", "user": "admin", "name": "admin-key"},
    "key-portal": {"tenant": "acme", "user": "portal", "assert_user": True, "name": "portal"},
}
DOCUMENTS = {  # title: (knowledge base, text with a codeword no other text has)
    "Salaries": ("handbook", "Salary bands policy: engineers earn between 50 and 90 thousand a year. Codeword ZEPHYRINE."),
    "Roadmap": ("handbook", "Roadmap policy: the next release ships the offline mode in March. Codeword QUILLOTINE."),
    "Canteen": ("handbook", "Canteen policy: lunch is served from noon to two in the afternoon. Codeword MARZIPANE."),
    "Minutes": ("board", "Board minutes policy: the board approved the merger in the last meeting. Codeword OBSIDIANE."),
}
CODEWORDS = {title: text.rsplit(" ", 1)[-1].rstrip(".") for title, (_, text) in DOCUMENTS.items()}
QUESTION = "What does the policy say? codeword"
USERS, GROUPS = ["alice", "bob", "carol", "dave"], ["hr", "eng", "ops"]
CHAT_HISTORIES = {f"chat-history/{user}" for user in USERS}  # each reader's indexed past answers: open bases, rules per turn

RULE = st.builds(AccessRule, users=st.lists(st.sampled_from(USERS), max_size=2), groups=st.lists(st.sampled_from(GROUPS), max_size=2))
OPEN_OR_RULE = st.one_of(st.just(AccessRule()), RULE)  # most bases are open: the documents' rules then decide
READER = st.builds(lambda user, groups: Principal("acme", user, frozenset(groups)), st.sampled_from(USERS),
                   st.frozensets(st.sampled_from(GROUPS), max_size=2))
WORLD = st.fixed_dictionaries({
    "bases": st.fixed_dictionaries({"handbook": OPEN_OR_RULE, "board": OPEN_OR_RULE}),
    "documents": st.fixed_dictionaries({title: OPEN_OR_RULE for title in DOCUMENTS}),
    "readers": st.lists(READER, min_size=2, max_size=3, unique_by=lambda who: who.user_id),
})


@pytest.fixture(scope="module")
def world(scripted_server: ScriptedModel, embedder, tmp_path_factory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("isolation")
    services = Services(memory_settings(scripted_server, api_keys=KEYS, data_dir=root, generate_titles=False),
                        embedder_factory=lambda: embedder)
    live = ThreadServer(create_app(services.settings, services=services)).start()

    async def build() -> dict[str, Any]:
        async with httpx.AsyncClient(base_url=live.url, timeout=120, headers={"X-API-Key": "key-admin"}) as admin:
            kbs = {name: (await admin.post(f"{V1}/knowledge-bases", json={"name": name})).json()["id"] for name in ("handbook", "board")}
            ids = {}
            for title, (kb, text) in DOCUMENTS.items():
                added = await admin.post(f"{V1}/knowledge-bases/{kbs[kb]}/documents/text", json={"title": title, "text": text})
                ids[title] = (await ingested(admin, added))["id"]
            return {"kbs": kbs, "ids": ids}

    built = asyncio.run(build())
    yield {"url": live.url, "services": services, **built}
    live.stop()
    asyncio.run(services.aclose())


def echo_codewords(model: ScriptedModel) -> None:
    """The scripted model repeats every codeword its request carries (one rule per set of them)."""
    model.reset()
    for size in range(len(CODEWORDS), -1, -1):
        for words in itertools.combinations(sorted(CODEWORDS.values()), size):
            model.on(lambda body, words=set(words): {w for w in CODEWORDS.values() if w in json.dumps(body)} == words,
                     Reply.text("The policy says: " + " ".join(words) if words else "Nothing about it."))


def markers(world: dict[str, Any], titles: set[str]) -> dict[str, set[str]]:
    """What would betray each document: its codeword, its id, its title."""
    return {title: {CODEWORDS[title], world["ids"][title], title} for title in titles}


# loggers that record a request as it was sent (the client's own words: the ids it probes for a 404)
REQUEST_LOGGERS = ("ragline.audit", "uvicorn.access", "httpx", "httpcore")


def words_only(hidden: dict[str, set[str]]) -> dict[str, set[str]]:
    """Codewords and titles: what no log line may carry, whoever wrote it."""
    return {title: {sign for sign in signs if sign in (title, CODEWORDS[title])} for title, signs in hidden.items()}


def excerpts(texts: list[str], hidden: dict[str, set[str]]) -> list[str]:
    """Where each sign shows: 200 characters around it."""
    found = []
    for text in texts:
        for sign in set().union(*hidden.values()):
            if (at := text.find(sign)) >= 0:
                found.append(text[max(at - 150, 0) : at + 50])
    return found


def betrayed(text: str, hidden: dict[str, set[str]]) -> set[str]:
    return {title for title, signs in hidden.items() if any(sign in text for sign in signs)}


class Door:
    """One reader at every door; `shown` collects what the reader (or the model) got to see."""

    def __init__(self, world: dict[str, Any], who: Principal) -> None:
        self.world, self.who = world, who
        self.headers = {"X-Ragline-User": who.user_id, "X-Ragline-Groups": ",".join(sorted(who.groups))}
        self.shown: list[str] = []

    def http(self, **headers: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.world["url"], timeout=120, headers={"X-API-Key": "key-portal", **self.headers, **headers})

    async def rest(self, readable_kbs: set[str]) -> dict[str, set[str]]:
        """Search, list, read each document's text and chunks: which titles each answered with."""
        got: dict[str, set[str]] = {"search": set(), "listed": set(), "text": set(), "chunks": set()}
        async with self.http() as http:
            kbs = {kb["name"] for kb in (await http.get(f"{V1}/knowledge-bases")).json()["items"]}
            assert kbs - CHAT_HISTORIES == readable_kbs
            for name, kb in self.world["kbs"].items():
                found = await http.post(f"{V1}/knowledge-bases/search", json={"query": QUESTION, "knowledge_base_ids": [kb], "match_count": 10,
                                                                            "vector_threshold": 0.0, "keyword_threshold": 0.0})
                listed = await http.get(f"{V1}/knowledge-bases/{kb}/documents")
                assert found.status_code == listed.status_code == (200 if name in readable_kbs else 404), (found.text, listed.text)
                self.shown += [found.text, listed.text]
                if listed.status_code == 200:
                    got["listed"] |= {item["title"] for item in listed.json()["items"]}
                    got["search"] |= {hit["knowledge_title"] for hit in found.json()["items"]}
                for title, (home, _) in DOCUMENTS.items():
                    if home != name:
                        continue
                    doc = f"{V1}/knowledge-bases/{kb}/documents/{self.world['ids'][title]}"
                    text, chunks = await http.get(f"{doc}/text"), await http.get(f"{doc}/chunks")
                    self.shown += [text.text, chunks.text]
                    got["text"] |= {title} if text.status_code == 200 else set()
                    got["chunks"] |= {title} if chunks.status_code == 200 else set()
        return got

    async def chat(self, kb_ids: list[str], model: ScriptedModel) -> None:
        """A whole answer over SSE, indexed as a past conversation; its events, the stored messages, and
        the message search over every reader's past answers (of this world and the ones before)."""
        async with self.http() as http:
            sid = (await http.post(f"{V1}/sessions", json={})).json()["id"]
            frames = await collect(http, "POST", f"{V1}/sessions/{sid}/knowledge-chat",
                                   json={"query": QUESTION, "knowledge_base_ids": kb_ids, "rewrite_enabled": False,
                                         "chat_history_index": True})
            self.shown += [json.dumps([f.event for f in frames]), (await http.get(f"{V1}/sessions/{sid}/messages")).text]
            self.shown.append((await http.get(f"{V1}/messages/search", params={"q": QUESTION})).text)

    async def openai(self, kb_names: list[str]) -> None:
        async with AsyncOpenAI(base_url=f"{self.world['url']}/v1", api_key="key-portal", default_headers=self.headers,
                               max_retries=0, timeout=120) as client:
            self.shown.append(json.dumps([m.id for m in (await client.models.list()).data]))
            for name in kb_names:
                answer = await client.chat.completions.create(model=f"ragline/kb/{name}", messages=[{"role": "user", "content": QUESTION}])
                self.shown.append(answer.model_dump_json())

    async def mcp(self, kb_names: list[str]) -> set[str]:
        """The MCP search and read_document tools; the titles its searches returned."""
        found: set[str] = set()
        headers = {"Authorization": "Bearer key-portal", **self.headers}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
            streamable_http_client(f"{self.world['url']}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            self.shown.append(json.dumps((await session.call_tool("list_knowledge_bases", {})).structured_content))
            for name in self.world["kbs"]:
                hits = await session.call_tool("search", {"query": QUESTION, "knowledge_bases": [name], "top_k": 10})
                self.shown.append(json.dumps(hits.model_dump()))
                assert hits.is_error == (name not in kb_names)
                found |= {p["title"] for p in (hits.structured_content or {}).get("passages", [])}
            for title, (home, _) in DOCUMENTS.items():
                page = await session.call_tool("read_document", {"knowledge_base": home, "document_id": self.world["ids"][title]})
                self.shown.append(json.dumps(page.model_dump()))
                found |= {title} if not page.is_error else set()
        return found

    async def dify(self) -> set[str]:
        titles: set[str] = set()
        async with self.http(Authorization="Bearer key-portal") as http:
            for kb in self.world["kbs"].values():
                got = await http.post("/retrieval", json={"knowledge_id": kb, "query": QUESTION, "retrieval_setting": {"top_k": 10, "score_threshold": 0.0}})
                self.shown.append(got.text)
                titles |= {r["title"] for r in got.json().get("records", [])} if got.status_code == 200 else set()
        return titles

    async def langchain(self, kb_names: list[str]) -> set[str]:
        retriever = RaglineRetriever(services=self.world["services"], knowledge_bases=kb_names, tenant_id="acme",
                                     user_id=self.who.user_id, groups=sorted(self.who.groups), top_k=10)
        documents = await retriever.ainvoke(QUESTION) if kb_names else []
        self.shown.append(json.dumps([{"content": d.page_content, **d.metadata} for d in documents], default=str))
        return {str(d.metadata.get("title") or d.metadata.get("knowledge_title")) for d in documents}


def set_world(world: dict[str, Any], generated: dict[str, Any]) -> None:
    knowledge_bases, operator = world["services"].retrieval.knowledge_bases, Principal.operator_of("acme")
    for name, rule in generated["bases"].items():
        knowledge_bases.update(world["kbs"][name], operator, access=rule)
    for title, rule in generated["documents"].items():
        knowledge_bases.set_document_access(world["ids"][title], operator, rule)


@settings(max_examples=15, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate], suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(generated=WORLD)
def test_no_door_shows_a_reader_anything_of_a_document_it_may_not_read(world, scripted_server, generated, caplog):
    set_world(world, generated)
    echo_codewords(scripted_server)
    kb_of = {title: home for title, (home, _) in DOCUMENTS.items()}

    async def ask(who: Principal) -> None:
        readable_kbs = {name for name, rule in generated["bases"].items() if rule.lets_in(who) is not None}
        readable = {t for t, rule in generated["documents"].items() if kb_of[t] in readable_kbs and rule.lets_in(who) is not None}
        hidden = markers(world, set(DOCUMENTS) - readable)
        door = Door(world, who)
        scripted_server.requests.clear()
        caplog.clear()
        with caplog.at_level(logging.INFO), caplog.at_level(logging.DEBUG, logger="ragline"):
            rest = await door.rest(readable_kbs)
            assert rest["listed"] == rest["text"] == rest["chunks"] == readable, (who, rest)
            assert rest["search"] <= readable
            kb_ids = [world["kbs"][name] for name in sorted(readable_kbs)]
            if kb_ids:
                await door.chat(kb_ids, scripted_server)
            await door.openai(sorted(readable_kbs))
            assert await door.mcp(sorted(readable_kbs)) <= readable
            assert await door.dify() <= readable
            assert await door.langchain(sorted(readable_kbs)) <= readable
        logged = [record.getMessage() + json.dumps(getattr(record, "audit", {})) for record in caplog.records]
        said = [line for record, line in zip(caplog.records, logged) if not record.name.startswith(REQUEST_LOGGERS)]
        places = (("a response or event", door.shown, hidden), ("a model request", [json.dumps(scripted_server.requests)], hidden),
                  ("a log line", logged, words_only(hidden)), ("a log line of the service", said, hidden))
        for place, texts, signs in places:
            leaks = betrayed("\n".join(texts), signs)
            assert not leaks, f"{who} saw {sorted(leaks)} in {place}: {excerpts(texts, signs)} (world {generated})"

    async def everyone() -> None:
        for who in generated["readers"]:
            await ask(who)

    try:
        asyncio.run(everyone())
    finally:
        set_world(world, {"bases": {name: AccessRule() for name in world["kbs"]}, "documents": {t: AccessRule() for t in DOCUMENTS}})
