"""PipelineBuilder: the seed's pipelines as LangGraph StateGraphs (types.NewPipelineBuilder).

`add` / `add_if` list stages in order; `compile_pipeline` turns the list into a graph that reads
like the pipeline:

- inside a stage, its plugin chain as plain edges (parallel branches joined by the next node);
- at each stage boundary one router whose path map names only the places it can really reach:
  the next stage, the stages an AddIf (or an intent that needs no retrieval) can skip to, the
  fallback answer after a search that may find nothing, and END;
- a progress window (the seed's progress card) is an `open_<window>` node before its first stage
  and a `close_<window>` node that every way out of the window passes through.

Where each router may go, and how it decides, is worked out by `ragline.graph.plan.Plan`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime, get_runtime

from ragline.graph.context import RunContext, context_of
from ragline.graph.plan import FALLBACK, Condition, Pipeline, PipelineBuildError, Placed, Plan, Step
from ragline.graph.progress import close_name, close_window, open_name, open_window
from ragline.graph.request import AgentConfig, PipelineRequest
from ragline.graph.stages import STAGE_NODES, Parallel, Stage, StageSpec
from ragline.graph.state import (
    ChatInput,
    ChatOutput,
    PipelineInput,
    PipelineOutput,
    PipelineState,
)
from ragline.nodes.begin_turn import begin_chat_turn, begin_turn
from ragline.nodes.fallback import fallback

Graph = CompiledStateGraph[PipelineState, RunContext, PipelineInput, PipelineOutput]  # a compiled pipeline
BEGIN = "begin_turn"


class PipelineBuilder:
    def __init__(self, name: str = "pipeline") -> None:
        self._name = name
        self._steps: list[Step] = []

    def add(self, stage: Stage) -> PipelineBuilder:
        self._steps.append(Step(stage))
        return self

    def add_if(self, condition: Condition, stage: Stage) -> PipelineBuilder:
        self._steps.append(Step(stage, (condition,)))
        return self

    def build(self) -> Pipeline:
        return Pipeline(self._name, tuple(self._steps))


# --- AddIf conditions, evaluated on the request/state when the previous stage ends ---


def _request(state: PipelineState) -> PipelineRequest:
    return state["request"]


def has_history(state: PipelineState) -> bool:
    """Multi-turn is on and the thread has an earlier answer."""
    return _request(state).max_history_rounds > 0 and any(m.type == "ai" for m in state.get("messages", []))


def web_search_enabled(state: PipelineState) -> bool:
    return _request(state).web_search_enabled


def data_analysis_enabled(state: PipelineState) -> bool:
    return _request(state).data_analysis_enabled


def uses_knowledge(state: PipelineState) -> bool:
    """The seed's choice of the RAG pipeline: a knowledge base in scope or web search on."""
    return _request(state).uses_knowledge


# --- the seed's pipelines (session_knowledge_qa.go) and static presets (types.Pipeline) ---


def chat_pipeline() -> Pipeline:
    """Pure chat: no knowledge base and no web search."""
    return (
        PipelineBuilder("chat_pipeline")
        .add_if(has_history, Stage.LOAD_HISTORY)
        .add(Stage.MEMORY_RECALL)
        .add(Stage.CHAT_COMPLETION_STREAM)
        .build()
    )


def rag_pipeline() -> Pipeline:
    return (
        PipelineBuilder("rag_pipeline")
        .add_if(has_history, Stage.LOAD_HISTORY)
        .add(Stage.MEMORY_RECALL)
        .add(Stage.QUERY_UNDERSTAND)
        .add(Stage.CHUNK_SEARCH_PARALLEL)
        .add(Stage.CHUNK_RERANK)
        .add_if(web_search_enabled, Stage.WEB_FETCH)
        .add(Stage.CHUNK_MERGE)
        .add(Stage.FILTER_TOP_K)
        .add_if(data_analysis_enabled, Stage.DATA_ANALYSIS)
        .add(Stage.INTO_CHAT_MESSAGE)
        .add(Stage.CHAT_COMPLETION_STREAM)
        .build()
    )


def dynamic_pipeline() -> Pipeline:
    """Both seed pipelines in one graph: the RAG-only stages run only when knowledge is in scope.

    The chat pipeline is a subsequence of the RAG pipeline, so gating the difference with
    `uses_knowledge` picks per request exactly the list KnowledgeQA would have built.
    """
    chat_stages = set(chat_pipeline().stages)
    steps = [
        step if step.stage in chat_stages else Step(step.stage, (uses_knowledge, *step.conditions))
        for step in rag_pipeline().steps
    ]
    return Pipeline("ragline", tuple(steps))


PRESETS: dict[str, Callable[[], Pipeline]] = {
    "chat": lambda: PipelineBuilder("chat").add(Stage.CHAT_COMPLETION).build(),
    "chat_stream": lambda: PipelineBuilder("chat_stream").add(Stage.CHAT_COMPLETION_STREAM).build(),
    "chat_history_stream": lambda: PipelineBuilder("chat_history_stream")
    .add_if(has_history, Stage.LOAD_HISTORY)
    .add(Stage.MEMORY_RECALL)
    .add(Stage.CHAT_COMPLETION_STREAM)
    .build(),
    "rag": lambda: PipelineBuilder("rag")
    .add(Stage.QUERY_UNDERSTAND)
    .add(Stage.CHUNK_SEARCH)
    .add(Stage.CHUNK_RERANK)
    .add(Stage.CHUNK_MERGE)
    .add(Stage.INTO_CHAT_MESSAGE)
    .add(Stage.CHAT_COMPLETION)
    .build(),
    "rag_stream": rag_pipeline,
}


def _current_context() -> RunContext:
    try:
        return context_of(get_runtime())
    except Exception:  # outside a run (graph drawing): nothing is cancelled
        return RunContext()


def _router(name: str, targets: list[str], decide: Callable[[PipelineState, RunContext], str]) -> Callable[[PipelineState], str]:
    def route(state: PipelineState) -> str:
        target = decide(state, _current_context())
        if target not in targets:  # the path map is the contract Studio draws: never leave it
            raise PipelineBuildError(f"router {name} chose {target!r}, outside its targets {targets}")
        return target

    route.__name__ = name
    return route


def _with_defaults(node: Callable[..., Any], services: Any, agent: AgentConfig | None) -> Callable[..., Any]:
    """The node, given `services` and the `agent` configuration when the host's run context
    carries none (Studio, a parent graph)."""

    async def run(state: PipelineState, runtime: Runtime[RunContext]) -> Any:
        context = context_of(runtime)
        missing: dict[str, Any] = {}
        if context.services is None and services is not None:
            missing["services"] = services
        if context.agent is None and agent is not None:
            missing["agent"] = agent
        if missing:
            runtime = runtime.override(context=replace(context, **missing))
        return await node(state, runtime)

    run.__name__ = getattr(node, "__name__", "node")
    run.__doc__ = node.__doc__
    return run


# --- compilation ---


def compile_pipeline(
    pipeline: Pipeline,
    *,
    stages: dict[Stage, StageSpec] | None = None,
    checkpointer: Any = None,
    services: Any = None,
    agent: AgentConfig | None = None,
    messages_form: bool = False,
    name: str | None = None,
) -> Graph:
    """A StateGraph for `pipeline`, wiring only the stages that have nodes.

    `services` (ragline.services.Services) and `agent` (the defaults of every request setting) are
    used by runs whose context brings none: hosts that cannot pass objects in the run context,
    such as `langgraph dev` or a parent graph. `messages_form`: messages in and out (ChatInput,
    ChatOutput) instead of the request form.
    """
    plan = Plan.of(pipeline, STAGE_NODES if stages is None else stages)
    schemas: dict[str, Any] = {"input_schema": ChatInput, "output_schema": ChatOutput} if messages_form else {
        "input_schema": PipelineInput, "output_schema": PipelineOutput}
    graph = StateGraph(PipelineState, context_schema=RunContext, **schemas)
    bind = services is not None or agent is not None

    def add_node(node_name: str, fn: Callable[..., Any]) -> None:
        if node_name in graph.nodes:
            raise PipelineBuildError(f"two stages use the node name {node_name!r}")
        graph.add_node(node_name, _with_defaults(fn, services, agent) if bind else fn)

    def add_router(source: str, targets: list[str], decide: Callable[[PipelineState, RunContext], str]) -> None:
        if len(targets) == 1:
            graph.add_edge(source, targets[0])
        else:
            graph.add_conditional_edges(source, _router(f"after_{source}", targets, decide), targets)

    # nodes in pipeline order, so Studio and the README list them as the seed does
    add_node(BEGIN, begin_chat_turn if messages_form else begin_turn)
    for index, placed in enumerate(plan.placed):
        window = placed.window
        if window is not None and plan.windows[window][0] == index:
            add_node(open_name(window), open_window(window))
        for item in placed.spec.chain:
            for node in item.branches if isinstance(item, Parallel) else (item,):
                add_node(node.node_name, node.fn)
        if window is not None and plan.windows[window][1] == index:
            first = plan.windows[window][0]
            result_keys = tuple(key for p in plan.placed[first : index + 1] for key in p.spec.result_keys)
            add_node(close_name(window), close_window(window, result_keys))
    if plan.may_find_nothing(0, len(plan.placed) - 1):  # only a pipeline that searches can find nothing
        add_node(FALLBACK, fallback)
        graph.add_edge(FALLBACK, END)

    graph.add_edge(START, BEGIN)
    add_router(BEGIN, plan.targets(-1, None), partial(plan.route, -1, None))
    for window, (first, last) in plan.windows.items():
        graph.add_edge(open_name(window), plan.placed[first].entry)
        add_router(close_name(window), plan.close_targets(window), partial(plan.route, last, None))
    for index, placed in enumerate(plan.placed):
        _wire_chain(graph, placed)
        add_router(placed.exit, plan.targets(index, placed.window), partial(plan.route, index, placed.window))
    return graph.compile(checkpointer=checkpointer, name=name or pipeline.name)


def _wire_chain(graph: StateGraph[Any, Any, Any, Any], placed: Placed) -> None:
    """The stage's plugin chain as plain edges; parallel branches fan out and the next node joins them."""
    previous: list[str] = []
    for item in placed.spec.chain:
        names = [node.node_name for node in (item.branches if isinstance(item, Parallel) else (item,))]
        if len(previous) == 1:
            for name in names:
                graph.add_edge(previous[0], name)
        elif len(previous) > 1:
            graph.add_edge(previous, names[0])
        previous = names


def stage_nodes(pipeline: Pipeline, stages: dict[Stage, StageSpec] | None = None) -> Sequence[str]:
    """Every stage node of the pipeline in order (the builder's stage list, for checks and docs)."""
    plan = Plan.of(pipeline, STAGE_NODES if stages is None else stages)
    return [name for placed in plan.placed for name in placed.spec.node_names]
