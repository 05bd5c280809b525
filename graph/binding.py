"""Defaults for hosts whose run context cannot carry objects (Studio, a parent graph).

The service and the CLI put the services (the composition root) and the agent configuration in
the run context. `langgraph dev` and a parent graph give a JSON context or none, so the graphs they
host are built with both and every node receives them when its context has none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from langgraph.runtime import Runtime

from ragline.contracts.context import RunContext, context_of
from ragline.contracts.request import AgentConfig
from ragline.services import Services


@dataclass(frozen=True)
class HostDefaults:
    """What a node gets when its run context lacks it: `services` (the composition root) and `agent`
    (the defaults of every request setting)."""

    services: Services | None = None
    agent: AgentConfig | None = None

    def __call__(self, node: Callable[..., Any]) -> Callable[..., Any]:
        """The node, given these defaults when the run context has none (the node itself when there are none)."""
        if self.services is None and self.agent is None:
            return node
        return _with_defaults(node, self.services, self.agent)


# What a turn reads of the root, opened in a worker thread before a stage would open it on the loop.
TURN_PARTS = ("embedder", "retrieval", "memory", "intents")


def _with_defaults(node: Callable[..., Any], services: Services | None, agent: AgentConfig | None) -> Callable[..., Any]:
    async def run(state: Any, runtime: Runtime[RunContext]) -> Any:
        context = context_of(runtime)
        missing: dict[str, Any] = {}
        if context.host.services is None and services is not None:
            await services.open_off_the_loop(*TURN_PARTS)
            missing["host"] = replace(context.host, services=services)
        if context.agent is None and agent is not None:
            missing["agent"] = agent
        if missing:
            runtime = runtime.override(context=replace(context, **missing))
        return await node(state, runtime)

    run.__name__ = getattr(node, "__name__", "node")
    run.__doc__ = node.__doc__
    return run
