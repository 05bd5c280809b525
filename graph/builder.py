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
from ragline.graph.stages import STAGE_NODES, Parallel, Stage, StageSpec
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


@dataclass(frozen=True)
class _Unit:
    """One position in the flattened pipeline: a node, or parallel branches joined by the next unit."""

    names: tuple[str, ...]
    nodes: tuple[Callable[..., Any], ...]
    step: int  # index of the pipeline step (stage) it belongs to
    first: bool  # first unit of its stage: where the step's condition is checked
    last: bool  # last unit of its stage

    @property
    def parallel(self) -> bool:
        return len(self.names) > 1


def _units(steps: Sequence[Step], stages: dict[Stage, StageSpec]) -> list[_Unit]:
    units: list[_Unit] = []
    for index, step in enumerate(steps):
        chain = stages[step.stage].chain
        for position, item in enumerate(chain):
            nodes = item.branches if isinstance(item, Parallel) else (item,)
            units.append(
                _Unit(
                    names=tuple(node.node_name for node in nodes),
                    nodes=tuple(node.fn for node in nodes),
                    step=index,
                    first=position == 0,
                    last=position == len(chain) - 1,
                )
            )
    return units


def _step_runs(step: Step, stages: dict[Stage, StageSpec], state: PipelineState) -> bool:
    if step.condition is not None and not step.condition(state):
        return False
    return not (stages[step.stage].needs_retrieval and not needs_retrieval(state.get("intent", ""), state["request"]))


def _next(units: Sequence[_Unit], after: int, steps: Sequence[Step], stages: dict[Stage, StageSpec], state: PipelineState, context: RunContext) -> str | list[str]:
    """Where to go when unit `after` ends: stop, fallback, the stage's next node, or the next stage."""
    if context.is_cancelled():
        return END
    error = state.get("error")
    if error is not None:
        return FALLBACK if error.kind == ErrorKind.SEARCH_NOTHING else END
    if after >= 0 and not units[after].last:
        target = units[after + 1]
        return list(target.names) if target.parallel else target.names[0]
    current_step = units[after].step if after >= 0 else -1
    for unit in units[after + 1 :]:
        if unit.first and unit.step > current_step and _step_runs(steps[unit.step], stages, state):
            return list(unit.names) if unit.parallel else unit.names[0]
    return END


def _current_context() -> RunContext:
    try:
        return context_of(get_runtime())
    except Exception:  # outside a run (graph drawing): nothing is cancelled
        return RunContext()


def _router(units: Sequence[_Unit], after: int, steps: Sequence[Step], stages: dict[Stage, StageSpec]) -> Callable[[PipelineState], str | list[str]]:
    def route(state: PipelineState) -> str | list[str]:
        return _next(units, after, steps, stages, state, _current_context())

    route.__name__ = f"after_{units[after].names[0]}" if after >= 0 else "route_first_stage"
    return route


def _windowed(units: Sequence[_Unit], index: int, node: Callable[..., Any], steps: Sequence[Step], stages: dict[Stage, StageSpec]) -> Callable[..., Any]:
    """The node, wrapped to open and close its stage's progress window on every path."""
    unit = units[index]
    spec = stages[steps[unit.step].stage]
    window = spec.window
    if window is None:
        return node
    in_window = {name for u in units for name in u.names if stages[steps[u.step].stage].window == window}

    async def run(state: PipelineState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        context, turn = context_of(runtime), state["turn"]
        if not unit.parallel and state.get("open_window") != window:
            events.emit(context, events.tool_call(turn, window, {"query": state["request"].query}))
        try:
            update = await node(state, runtime)
        except BaseException as exc:  # the card must close even when the stage fails or is cancelled
            events.emit(context, events.tool_result(turn, window, success=False, error=str(exc) or type(exc).__name__))
            raise
        if unit.parallel:
            return update  # branches never write the window key: the join decides
        merged: PipelineState = {**state, **update}  # type: ignore[typeddict-item]
        target = _next(units, index, steps, stages, merged, context)
        if (set(target) if isinstance(target, list) else {target}) <= in_window:
            return {**update, "open_window": window.value}
        error = merged.get("error")
        output = {key: merged[key] for key in spec.result_keys if key in merged}
        success = error is None or error.kind == ErrorKind.SEARCH_NOTHING
        events.emit(context, events.tool_result(turn, window, success=success, output=output, error=error.message if error else None))
        return {**update, "open_window": None}

    run.__name__ = getattr(node, "__name__", "stage")
    run.__doc__ = node.__doc__
    return run


def compile_pipeline(
    pipeline: Pipeline,
    *,
    stages: dict[Stage, StageSpec] | None = None,
    checkpointer: Any = None,
    store: Any = None,
    name: str | None = None,
) -> CompiledStateGraph:
    """A StateGraph for `pipeline`, wiring only the stages that have nodes."""
    stages = STAGE_NODES if stages is None else stages
    steps = [step for step in pipeline.steps if step.stage in stages]
    units = _units(steps, stages)
    graph = StateGraph(PipelineState, context_schema=RunContext, input_schema=PipelineInput, output_schema=PipelineOutput)
    graph.add_node(BEGIN, begin_turn)
    graph.add_node(FALLBACK, fallback)
    graph.add_edge(START, BEGIN)
    for index, unit in enumerate(units):
        for node_name, node in zip(unit.names, unit.nodes):
            graph.add_node(node_name, _windowed(units, index, node, steps, stages))
    later = [[name for u in units[i + 1 :] for name in u.names] for i in range(-1, len(units))]
    graph.add_conditional_edges(BEGIN, _router(units, -1, steps, stages), [*later[0], FALLBACK, END])
    for index, unit in enumerate(units):
        if unit.parallel:
            graph.add_edge(list(unit.names), units[index + 1].names[0])  # the next unit joins the branches
        else:
            graph.add_conditional_edges(unit.names[0], _router(units, index, steps, stages), [*later[index + 1], FALLBACK, END])
    graph.add_edge(FALLBACK, END)
    return graph.compile(checkpointer=checkpointer, store=store, name=name or pipeline.name)
