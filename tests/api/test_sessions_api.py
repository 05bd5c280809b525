"""Sessions and messages over HTTP: CRUD, paging, pin, batch delete, fork, rewind, OpenAPI."""

from __future__ import annotations

import json
import re

from tests.api.live import collect, new_session
from tests.scripted_model import Reply


async def ask(client, sid: str, query: str) -> str:
    got = await collect(client, "POST", f"/api/v1/sessions/{sid}/chat", json={"query": query, "rewrite_enabled": False})
    return got[0].event["assistant_message_id"]


async def test_sessions_are_created_read_updated_and_listed_pinned_first(client, scripted_model):
    a = await new_session(client, title="A")
    b = await new_session(client, title="B", description="about b")
    assert (await client.get(f"/api/v1/sessions/{b}")).json()["description"] == "about b"
    pinned = await client.patch(f"/api/v1/sessions/{a}", json={"pinned": True, "title": "A2"})
    assert pinned.status_code == 200 and pinned.json()["pinned"] and pinned.json()["title"] == "A2"
    page = (await client.get("/api/v1/sessions", params={"page_size": 2})).json()
    assert [s["id"] for s in page["items"]][:2] == [a, b] and page["total"] >= 2 and page["page_size"] == 2
    second = (await client.get("/api/v1/sessions", params={"page": 2, "page_size": 1})).json()
    assert [s["id"] for s in second["items"]] == [b]


async def test_sessions_are_deleted_one_or_in_a_batch(client, scripted_model):
    ids = [await new_session(client, title=f"s{i}") for i in range(3)]
    assert (await client.delete(f"/api/v1/sessions/{ids[0]}")).json() == {"deleted": [ids[0]]}
    assert (await client.get(f"/api/v1/sessions/{ids[0]}")).status_code == 404
    batch = await client.post("/api/v1/sessions/batch-delete", json={"ids": ids[1:]})
    assert sorted(batch.json()["deleted"]) == sorted(ids[1:])
    assert (await client.post("/api/v1/sessions/batch-delete", json={"ids": [ids[1]]})).status_code == 404


async def test_a_user_clears_all_their_sessions(client, scripted_model):
    mine = [await new_session(client, title=f"mine {i}") for i in range(3)]
    await ask(client, mine[0], "a question before the clear")
    assert (await client.post("/api/v1/sessions/clear")).status_code == 400  # no body: nothing confirmed
    assert (await client.post("/api/v1/sessions/clear", json={"confirm": False})).status_code == 422
    assert (await client.get(f"/api/v1/sessions/{mine[0]}")).status_code == 200
    cleared = await client.post("/api/v1/sessions/clear", json={"confirm": True})
    assert cleared.status_code == 200 and set(mine) <= set(cleared.json()["deleted"])
    assert [(await client.get(f"/api/v1/sessions/{sid}")).status_code for sid in mine] == [404] * 3
    assert (await client.post("/api/v1/sessions/clear", json={"confirm": True})).json() == {"deleted": []}


async def test_bad_session_input_is_4xx(client, scripted_model):
    sid = await new_session(client)
    assert (await client.get("/api/v1/sessions", params={"page_size": 100000})).status_code == 422
    assert (await client.get("/api/v1/sessions", params={"page": "x"})).status_code == 422
    assert (await client.patch(f"/api/v1/sessions/{sid}", json={"pinned": "maybe"})).status_code == 422
    assert (await client.patch(f"/api/v1/sessions/{sid}", json={"owner_id": "me"})).status_code == 422
    assert (await client.post("/api/v1/sessions/batch-delete", json={"ids": []})).status_code == 422
    assert (await client.post("/api/v1/sessions", content=b"[", headers={"content-type": "application/json"})).status_code == 400


async def test_messages_page_back_from_the_newest(client, scripted_model):
    sid = await new_session(client, title="t")
    for n in range(3):
        await ask(client, sid, f"q{n}")
    page = (await client.get(f"/api/v1/sessions/{sid}/messages", params={"limit": 2})).json()
    assert [m["content"] for m in page["items"]][0] == "q2" and page["has_more"]
    back = (await client.get(f"/api/v1/sessions/{sid}/messages", params={"limit": 10, "before_id": page["items"][0]["id"]})).json()
    assert [m["role"] for m in back["items"]] == ["user", "assistant"] * 2 and not back["has_more"]
    assert all(m["request_id"] for m in back["items"])


async def test_a_message_is_deleted_and_the_messages_cleared(client, scripted_model):
    sid = await new_session(client, title="t")
    answer = await ask(client, sid, "q")
    assert (await client.delete(f"/api/v1/sessions/{sid}/messages/{answer}")).status_code == 204
    assert [m["role"] for m in (await client.get(f"/api/v1/sessions/{sid}/messages")).json()["items"]] == ["user"]
    assert (await client.delete(f"/api/v1/sessions/{sid}/messages/{answer}")).status_code == 404
    assert (await client.delete(f"/api/v1/sessions/{sid}/messages")).status_code == 204
    assert (await client.get(f"/api/v1/sessions/{sid}/messages")).json()["items"] == []


async def test_fork_copies_the_conversation_up_to_a_message(client, scripted_model):
    scripted_model.on(lambda b: True, Reply.text("answer"))
    sid = await new_session(client, title="origin")
    first = await ask(client, sid, "q1")
    await ask(client, sid, "q2")
    forked = await client.post(f"/api/v1/sessions/{sid}/fork", json={"message_id": first})
    assert forked.status_code == 201
    fork = forked.json()
    assert fork["parent_session_id"] == sid and fork["forked_from_message_id"] == first
    items = (await client.get(f"/api/v1/sessions/{fork['id']}/messages")).json()["items"]
    assert [m["content"] for m in items] == ["q1", "answer"]
    await ask(client, fork["id"], "q3")  # the fork is a conversation of its own
    assert len((await client.get(f"/api/v1/sessions/{sid}/messages")).json()["items"]) == 4


async def test_rewind_drops_the_messages_after_a_point(client, scripted_model):
    sid = await new_session(client, title="t")
    first = await ask(client, sid, "q1")
    await ask(client, sid, "q2")
    rewound = await client.post(f"/api/v1/sessions/{sid}/rewind", json={"message_id": first})
    assert rewound.status_code == 200 and len(rewound.json()["removed"]) == 2
    items = (await client.get(f"/api/v1/sessions/{sid}/messages")).json()["items"]
    assert [m["content"] for m in items][0] == "q1" and items[-1]["id"] == first
    assert (await client.post(f"/api/v1/sessions/{sid}/rewind", json={"message_id": "nope"})).status_code == 404


async def test_the_title_route_titles_the_first_question(client, scripted_model):
    scripted_model.on(lambda b: "short title" in str(b.get("messages")), Reply.text('"Weather talk."'))
    sid = await new_session(client, title="x")
    await ask(client, sid, "how is the weather")
    titled = await client.post(f"/api/v1/sessions/{sid}/title", json={})
    assert titled.status_code == 200 and titled.json()["title"] == "Weather talk"
    empty = await new_session(client, title="y")
    assert (await client.post(f"/api/v1/sessions/{empty}/title", json={})).status_code == 400


async def test_health_and_the_openapi_document_are_served(client, scripted_model):
    health = (await client.get("/health")).json()
    assert health["status"] == "ok" and health["backend"]["streams"] == "memory"
    document = (await client.get("/api/v1/openapi.json")).json()
    assert document["openapi"].startswith("3.")
    paths = document["paths"]
    assert "post" in paths["/api/v1/sessions/{session_id}/knowledge-chat"]
    assert "text/event-stream" in paths["/api/v1/sessions/{session_id}/continue-stream"]["get"]["responses"]["200"]["content"]
    assert "SessionCreate" in document["components"]["schemas"]
    refs = set(re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', json.dumps(document)))
    assert refs and refs <= set(document["components"]["schemas"])  # every reference resolves
    operations = [op for methods in paths.values() for op in methods.values()]
    assert len({op["operationId"] for op in operations}) == len(operations)
