"""PipelineBuilder: the seed's pipelines as LangGraph StateGraphs (types.NewPipelineBuilder).

`add` / `add_if` list stages in order; `compile_pipeline` turns the list into a graph in which
every edge is conditional and evaluated on the state when the stage ends, in the seed's order:

1. a cancelled run stops at once (checked first: a stop must never look like "nothing found");
2. "search found nothing" goes to the fallback node; any other error ends the turn;
3. otherwise the next stage whose AddIf condition holds runs; retrieval stages are skipped when
   the intent needs no retrieval.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime, get_runtime

from ragline.graph import events
from ragline.graph.context import RunContext, context_of
from ragline.graph.request import PipelineRequest
from ragline.graph.stages import STAGE_NODES, NodeSpec, Stage
from ragline.graph.state import ErrorKind, PipelineInput, PipelineOutput, PipelineState, needs_retrieval
from ragline.nodes.begin_turn import begin_turn
from ragline.nodes.fallback import fallback
from ragline.nodes.load_history import has_history

Condition = Callable[[PipelineState], bool]
BEGIN, FALLBACK = "begin_turn", "fallback"


@dataclass(frozen=True)
class Step:
    stage: Stage
    condition: Condition | None = None


@dataclass(frozen=True)
class Pipeline:
    name: str
    steps: tuple[Step, ...]

    @property
    def stages(self) -> list[Stage]:
        return [step.stage for step in self.steps]


class PipelineBuilder:
    def __init__(self, name: str = "pipeline") -> None:
        self._name = name
        self._steps: list[Step] = []

    def add(self, stage: Stage) -> PipelineBuilder:
        self._steps.append(Step(stage))
        return self

    def add_if(self, condition: Condition, stage: Stage) -> PipelineBuilder:
        self._steps.append(Step(stage, condition))
        return self

    def build(self) -> Pipeline:
        return Pipeline(self._name, tuple(self._steps))


# --- AddIf conditions, evaluated on the request/state when the previous stage ends ---


def _request(state: PipelineState) -> PipelineRequest:
    return state["request"]


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
    steps = []
    for step in rag_pipeline().steps:
        if step.stage in chat_stages:
            steps.append(step)
        else:
            steps.append(Step(step.stage, _both(uses_knowledge, step.condition)))
    return Pipeline("ragline", tuple(steps))


def _both(first: Condition, second: Condition | None) -> Condition:
    if second is None:
        return first
    return lambda state: first(state) and second(state)


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


# --- compilation ---


def _next_node(steps: Sequence[Step], after: int, stages: dict[Stage, NodeSpec], state: PipelineState, context: RunContext) -> str:
    if context.is_cancelled():
        return END
    error = state.get("error")
    if error is not None:
        return FALLBACK if error.kind == ErrorKind.SEARCH_NOTHING else END
    for step in steps[after + 1 :]:
        if step.condition is not None and not step.condition(state):
            continue
        if stages[step.stage].needs_retrieval and not needs_retrieval(state.get("intent", ""), state["request"]):
            continue
        return step.stage.value
    return END


def _current_context() -> RunContext:
    try:
        return context_of(get_runtime())
    except Exception:  # outside a run (graph drawing): nothing is cancelled
        return RunContext()


def _router(steps: Sequence[Step], after: int, stages: dict[Stage, NodeSpec]) -> Callable[[PipelineState], str]:
    def route(state: PipelineState) -> str:
        return _next_node(steps, after, stages, state, _current_context())

    route.__name__ = f"after_{steps[after].stage.value}" if after >= 0 else "route_first_stage"
    return route


def _stage_node(steps: Sequence[Step], index: int, stages: dict[Stage, NodeSpec]) -> Callable[..., Any]:
    """The stage's node, wrapped to open and close its progress window on every path."""
    spec = stages[steps[index].stage]
    window = spec.window
    if window is None:
        return spec.node
    window_stages = {s.stage.value for s in steps if stages[s.stage].window == window}

    async def run(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        context, turn = context_of(runtime), state["turn"]
        if state.get("open_window") != window:
            events.emit(context, events.tool_call(turn, window, {"query": state["request"].query}))
        try:
            update = await spec.node(state, runtime)
        except BaseException as exc:  # the card must close even when the stage fails or is cancelled
            events.emit(context, events.tool_result(turn, window, success=False, error=str(exc) or type(exc).__name__))
            raise
        merged: PipelineState = {**state, **update}  # type: ignore[typeddict-item]
        if _next_node(steps, index, stages, merged, context) in window_stages:
            return {**update, "open_window": window.value}
        error = merged.get("error")
        output = {key: update[key] for key in spec.result_keys if key in update}
        events.emit(context, events.tool_result(turn, window, success=error is None or error.kind == ErrorKind.SEARCH_NOTHING, output=output, error=error.message if error else None))
        return {**update, "open_window": None}

    run.__name__ = steps[index].stage.value
    run.__doc__ = spec.node.__doc__
    return run


def compile_pipeline(
    pipeline: Pipeline,
    *,
    stages: dict[Stage, NodeSpec] | None = None,
    checkpointer: Any = None,
    name: str | None = None,
) -> CompiledStateGraph:
    """A StateGraph for `pipeline`, wiring only the stages that have a node."""
    stages = STAGE_NODES if stages is None else stages
    steps = [step for step in pipeline.steps if step.stage in stages]
    graph = StateGraph(PipelineState, context_schema=RunContext, input_schema=PipelineInput, output_schema=PipelineOutput)
    graph.add_node(BEGIN, begin_turn)
    graph.add_node(FALLBACK, fallback)
    graph.add_edge(START, BEGIN)
    all_targets = [step.stage.value for step in steps]
    for index, step in enumerate(steps):
        graph.add_node(step.stage.value, _stage_node(steps, index, stages))
    for index, source in [(-1, BEGIN), *((i, s.stage.value) for i, s in enumerate(steps))]:
        graph.add_conditional_edges(source, _router(steps, index, stages), [*all_targets[index + 1 :], FALLBACK, END])
    graph.add_edge(FALLBACK, END)
    return graph.compile(checkpointer=checkpointer, name=name or pipeline.name)
