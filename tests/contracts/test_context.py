"""RunContext: JSON fields a person can set, and one host handle that never reaches a form or a checkpoint."""

from __future__ import annotations

import threading

from langgraph.runtime import Runtime
from pydantic import TypeAdapter

from ragline.contracts.context import RunContext, RunHost
from ragline.graph.binding import HostDefaults
from ragline.services import Services


def test_studio_form_shows_the_json_fields_only():
    properties = TypeAdapter(RunContext).json_schema()["properties"]
    assert "host" not in properties
    assert {"session_id", "tenant_id", "user_id", "assistant_id", "agent"} <= set(properties)


def test_a_context_from_json_gets_an_empty_host():
    context = TypeAdapter(RunContext).validate_python({"tenant_id": "acme"})
    assert context.tenant_id == "acme" and context.host == RunHost()
    assert RunContext().host is not RunContext().host  # never one handle shared between runs


def test_cancel_sets_the_hosts_stop_flag():
    context = RunContext()
    assert not context.is_cancelled()
    context.cancel()
    assert context.host.cancel_event is not None and context.host.cancel_event.is_set() and context.is_cancelled()


async def test_bound_services_fill_a_host_without_them_and_keep_its_channels():
    bound, own = Services(), Services()
    seen: list[RunHost] = []

    async def node(state, runtime):
        seen.append(runtime.context.host)
        return {}

    stop, sink = threading.Event(), [].append
    run = HostDefaults(services=bound)(node)
    await run({}, Runtime(context=RunContext(host=RunHost(event_sink=sink, cancel_event=stop))))
    await run({}, Runtime(context=RunContext(host=RunHost(services=own))))
    assert seen[0].services is bound and seen[0].event_sink is sink and seen[0].cancel_event is stop
    assert seen[1].services is own  # the host's own services win over the graph's
